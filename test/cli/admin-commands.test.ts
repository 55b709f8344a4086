import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { FlowProducer, Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { KubernetesLeaseLock } from '../../src/election/kubernetes-lock.js';
import { runCli, oneLine, type CliResult } from '../support/cli.js';
import { FakeLeaseServer } from '../support/fake-lease-server.js';
import { startRedis, type TestRedis } from '../support/redis-server.js';
import { silentServer } from '../support/silent-server.js';
import { leadInProcess } from '../support/trigger-leader.js';

const goodJobs = new URL('../fixtures/jobs-good/', import.meta.url).pathname;

describe('admin commands of the CLI, on a real Redis', () => {
  let server: TestRedis;
  let redis: Redis;
  let env: Record<string, string>;
  let elsewhere: string;
  before(async () => {
    server = await startRedis();
    redis = server.client();
    env = { LEASEBEAT_REDIS_URL: server.url, LEASEBEAT_JOBS_DIR: goodJobs };
    // A folder with no jobs/ in it: where an operator runs the CLI from outside the repository.
    elsewhere = await mkdtemp(join(tmpdir(), 'leasebeat-cwd-'));
  });
  after(async () => {
    redis.disconnect();
    await server.close();
    await rm(elsewhere, { recursive: true, force: true });
  });

  it('trigger of a flow-only job has the leader add the flow the job defines: the parent waits for its children', async () => {
    const leader = await leadInProcess(redis, goodJobs);
    let result: CliResult;
    try {
      result = await runCli(['trigger', 'fan-out'], { env });
    } finally {
      await leader.stop();
    }
    assert.equal(result.code, 0, result.stderr);
    const id = /job (\S+) on queue etl/.exec(result.stdout)?.[1] ?? '';
    assert.ok(id.startsWith('fan-out@manual-'), result.stdout);
    const queue = new Queue('etl', { connection: redis });
    try {
      const parent = await queue.getJob(id);
      assert.equal((parent?.data as { manual: boolean }).manual, true);
      assert.equal(await queue.getJobState(id), 'waiting-children');
      const flows = new FlowProducer({ connection: redis });
      const tree = await flows.getFlow({ id, queueName: 'etl' });
      await flows.close();
      assert.deepEqual(tree.children?.map((child) => (child.job.data as { shard: number }).shard).sort(), [0, 1, 2]);
    } finally {
      await queue.close();
    }
  });

  it('status works outside the repository, from Redis alone, and says next run times need the jobs folder', async () => {
    await redis.hset('leasebeat:{leasebeat}:job:known-job', 'enqueued', '4', 'lastScheduledTick', '1700000000000');
    const result = await runCli(['status', '--json'], { env: { LEASEBEAT_REDIS_URL: server.url }, cwd: elsewhere });
    assert.equal(result.code, 0, result.stderr);
    const report = JSON.parse(result.stdout) as { jobs: Array<{ name: string; enqueued: number }>; jobsDir: unknown };
    assert.equal(report.jobs.find((job) => job.name === 'known-job')?.enqueued, 4);
    assert.equal(report.jobsDir, null);
    const text = await runCli(['status'], { env: { LEASEBEAT_REDIS_URL: server.url }, cwd: elsewhere });
    assert.equal(text.code, 0, text.stderr);
    assert.match(text.stdout, /no jobs folder here/);
  });

  it('trigger needs no jobs folder; with no leader it says in one line that no leader took it and it will not run', async () => {
    const result = await runCli(['trigger', 'heartbeat'], { env: { LEASEBEAT_REDIS_URL: server.url, LEASEBEAT_COMMAND_TIMEOUT: '2s' }, cwd: elsewhere });
    assert.equal(result.code, 3, result.stderr);
    assert.match(oneLine(result), /no leader took request \S+ within .*; it will not run/);
  });

  it('pause refuses a name no leader scheduled and no job file defines; --force stores it anyway', async () => {
    const refused = await runCli(['pause', 'no-such-job'], { env });
    assert.equal(refused.code, 2);
    assert.match(oneLine(refused), /no job named "no-such-job".*--force/);
    assert.equal(await redis.hexists('leasebeat:{leasebeat}:paused', 'no-such-job'), 0);
    const forced = await runCli(['pause', 'no-such-job', '--force'], { env });
    assert.equal(forced.code, 0, forced.stderr);
    assert.equal(await redis.hexists('leasebeat:{leasebeat}:paused', 'no-such-job'), 1);
    assert.equal((await runCli(['resume', 'no-such-job'], { env })).code, 0);
    assert.equal((await runCli(['resume', 'never-heard-of'], { env })).code, 2);
  });

  it('status reads the lease of the configured lock: the Kubernetes Lease under LEASEBEAT_LOCK=kubernetes', async () => {
    const api = await FakeLeaseServer.start();
    const dir = await mkdtemp(join(tmpdir(), 'leasebeat-kubeconfig-'));
    try {
      const kubeconfig = await api.writeKubeconfig(dir);
      const lock = new KubernetesLeaseLock({ namespace: 'ops', name: 'leasebeat', identity: 'pod-in-k8s', kubeConfig: api.kubeConfig() });
      const now = Date.now();
      await lock.create({ holderIdentity: 'pod-in-k8s', leaseDurationSeconds: 15, acquireTime: now, renewTime: now, leaderTransitions: 3 }, AbortSignal.timeout(5000));
      const result = await runCli(['status', '--json'], {
        env: { ...env, LEASEBEAT_LOCK: 'kubernetes', LEASEBEAT_LEASE_NAMESPACE: 'ops', KUBECONFIG: kubeconfig },
      });
      assert.equal(result.code, 0, result.stderr);
      const report = JSON.parse(result.stdout) as { leader: string; leaderTransitions: number; lock: string };
      assert.equal(report.leader, 'pod-in-k8s');
      assert.equal(report.leaderTransitions, 3);
      assert.equal(report.lock, 'ops/leasebeat');
    } finally {
      await api.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('every admin command against a Redis that accepts but never answers ends within its bound with one line', { timeout: 400_000 }, async () => {
    const hung = await silentServer();
    try {
      const hungEnv = { LEASEBEAT_REDIS_URL: hung.url, LEASEBEAT_JOBS_DIR: goodJobs, LEASEBEAT_COMMAND_TIMEOUT: '1s' };
      const commands = [['status'], ['trigger', 'heartbeat'], ['pause', 'heartbeat'], ['resume', 'heartbeat'], ['cordon', 'x'], ['uncordon', 'x'], ['drain', 'x'], ['runs', 'heartbeat']];
      // Three at a time, with a generous kill timeout: the bound under test is the 1 s in the message, and a
      // loaded 2-core machine may take seconds just to start each process.
      const results: CliResult[] = [];
      for (let i = 0; i < commands.length; i += 3) {
        results.push(...(await Promise.all(commands.slice(i, i + 3).map((args) => runCli(args, { env: hungEnv, timeoutMs: 90_000 })))));
      }
      results.forEach((result, i) => {
        const command = commands[i]!.join(' ');
        assert.equal(result.code, 3, `${command}: exit ${result.code}\n${result.stderr}`);
        assert.match(oneLine(result), /did not finish within 1s: Redis at redis:\/\/127\.0\.0\.1:\d+ .*does not answer/, command);
      });
      // `start` gives up on it too, before it listens or registers anywhere.
      const start = await runCli(['start'], { env: { ...hungEnv, LEASEBEAT_HTTP_PORT: '0' }, timeoutMs: 90_000 });
      assert.equal(start.code, 2, start.stderr);
      assert.match(oneLine(start), /LEASEBEAT_REDIS_URL: no Redis answers at redis:\/\/127\.0\.0\.1:\d+ within 1s/);
    } finally {
      await hung.close();
    }
  });

  it('runs lists a job\'s recent ticks from the ledger, newest first', async () => {
    const base = 'leasebeat:{leasebeat}';
    await redis.hset(`${base}:job:ledgered`, 'enqueued', '1');
    await redis.zadd(`${base}:ledger-index:ledgered`, 1000, '1000', 2000, '2000');
    await redis.hset(`${base}:ledger:ledgered`, '1000', 'enqueued|ledgered@1000', '2000', 'skipped|paused');
    const result = await runCli(['runs', 'ledgered', '--json'], { env });
    assert.equal(result.code, 0, result.stderr);
    const list = JSON.parse(result.stdout) as Array<{ tick: string; fate: string; jobId: string | null; reason: string | null }>;
    assert.deepEqual(
      list.map(({ tick, fate, jobId, reason }) => ({ tick, fate, jobId, reason })),
      [
        { tick: new Date(2000).toISOString(), fate: 'skipped', jobId: null, reason: 'paused' },
        { tick: new Date(1000).toISOString(), fate: 'enqueued', jobId: 'ledgered@1000', reason: null },
      ],
    );
  });
});
