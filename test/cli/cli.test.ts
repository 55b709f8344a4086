import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { runCli, type CliResult } from '../support/cli.js';
import { startRedis, type TestRedis } from '../support/redis-server.js';
import { leadInProcess } from '../support/trigger-leader.js';

const goodJobs = new URL('../fixtures/jobs-good/', import.meta.url).pathname;
const badJobs = new URL('../fixtures/jobs-bad/', import.meta.url).pathname;

const leasebeat = (args: string[], env: Record<string, string> = {}): Promise<CliResult> => runCli(args, { env });

describe('the leasebeat CLI, run as a real process', () => {
  let server: TestRedis;
  let redis: Redis;
  let env: Record<string, string>;
  before(async () => {
    server = await startRedis();
    redis = server.client();
    env = { LEASEBEAT_REDIS_URL: server.url, LEASEBEAT_JOBS_DIR: goodJobs };
  });
  after(async () => {
    redis.disconnect();
    await server.close();
  });

  it('--help lists every command, and each command has its own help', async () => {
    const help = await leasebeat(['--help']);
    assert.equal(help.code, 0);
    for (const command of ['start', 'validate', 'status', 'trigger', 'pause', 'resume']) assert.match(help.stdout, new RegExp(`\\b${command}\\b`));
    // The CLI table of docs/operations.md lists every command the CLI has.
    const operations = readFileSync(new URL('../../docs/operations.md', import.meta.url), 'utf8');
    const cliStart = operations.indexOf('\n## CLI\n');
    assert.ok(cliStart >= 0, 'docs/operations.md has no "## CLI" section');
    const cliEnd = operations.indexOf('\n## ', cliStart + 1);
    const cliSection = operations.slice(cliStart, cliEnd < 0 ? undefined : cliEnd);
    const commands = [...help.stdout.slice(help.stdout.indexOf('Commands:')).matchAll(/^ {2}([a-z]+)\b/gm)].map((m) => m[1]!).filter((c) => c !== 'help');
    assert.ok(commands.length >= 10, help.stdout);
    for (const command of commands) assert.match(cliSection, new RegExp(`\`leasebeat ${command}\\b`), `${command} missing from the CLI table of docs/operations.md`);
    const startHelp = await leasebeat(['start', '--help']);
    assert.match(startHelp.stdout, /--insecure-board/);
    assert.match(startHelp.stdout, /LEASEBEAT_REDIS_URL/);
  });

  it('validate prints the next run times of good jobs in their time zone and exits 0', async () => {
    const result = await leasebeat(['validate', goodJobs, '--count', '3']);
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /nightly-report/);
    assert.match(result.stdout, /Europe\/Berlin/);
    assert.match(result.stdout, /job\(s\) valid, 0 error\(s\)/);
  });

  it('validate names the file, the field and the fix for every bad job, and exits non-zero', async () => {
    const result = await leasebeat(['validate', badJobs]);
    assert.equal(result.code, 1);
    assert.match(result.stderr, /bad-cron\.ts: schedule "61 \* \* \* \*": minute/);
    assert.match(result.stderr, /bad-timezone\.ts: timezone/);
    assert.match(result.stderr, /dup-b\.ts.*dup-a\.ts|dup-a\.ts.*dup-b\.ts/);
    assert.match(result.stderr, /throws\.ts/);
  });

  it('a bad configuration stops with the setting named and exit code 2', async () => {
    const result = await leasebeat(['start'], { ...env, LEASEBEAT_LEASE_DURATION: '5s', LEASEBEAT_RENEW_DEADLINE: '5s' });
    assert.equal(result.code, 2);
    assert.match(result.stderr, /LEASEBEAT_LEASE_DURATION \(5s\) must be greater than LEASEBEAT_RENEW_DEADLINE \(5s\)/);
    const noRedis = await leasebeat(['status'], { ...env, LEASEBEAT_REDIS_URL: 'redis://127.0.0.1:1' });
    assert.equal(noRedis.code, 2);
    assert.match(noRedis.stderr, /no Redis answers at redis:\/\/127\.0\.0\.1:1/);
  });

  it('pause and resume persist in Redis, and status shows them', async () => {
    assert.equal((await leasebeat(['pause', 'heartbeat', '--note', 'db migration'], env)).code, 0);
    const paused = JSON.parse((await leasebeat(['status', '--json'], env)).stdout) as { jobs: Array<{ name: string; paused: boolean; pauseNote: string }> };
    const heartbeat = paused.jobs.find((j) => j.name === 'heartbeat');
    assert.equal(heartbeat?.paused, true);
    assert.equal(heartbeat?.pauseNote, 'db migration');
    assert.equal(await redis.hexists('leasebeat:{leasebeat}:paused', 'heartbeat'), 1);
    assert.match((await leasebeat(['resume', 'heartbeat'], env)).stdout, /resumed heartbeat/);
    assert.match((await leasebeat(['resume', 'heartbeat'], env)).stdout, /was not paused/);
  });

  it('trigger has the leader add a manual run of the job to its queue', async () => {
    const leader = await leadInProcess(redis, goodJobs);
    let result: CliResult;
    let unknown: CliResult;
    try {
      result = await leasebeat(['trigger', 'heartbeat'], env);
      unknown = await leasebeat(['trigger', 'nope'], env);
    } finally {
      await leader.stop();
    }
    assert.equal(result.code, 0, result.stderr);
    const id = /job (\S+) on queue/.exec(result.stdout)?.[1];
    assert.ok(id && id.startsWith('heartbeat@manual-'), result.stdout);
    const queue = new Queue('leasebeat', { connection: redis });
    const job = await queue.getJob(id);
    await queue.close();
    assert.equal((job?.data as { manual: boolean }).manual, true);
    assert.equal(unknown.code, 2, unknown.stderr);
    assert.match(unknown.stderr, /nope/);
  });

  it('a bad job file never stops the good ones: an instance with a mixed folder enqueues the good job', { timeout: 60_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'leasebeat-mixed-'));
    try {
      writeFileSync(join(dir, 'bad-cron.mjs'), "export default { name: 'bad-cron', schedule: '61 * * * *', handler: () => 1 };\n");
      writeFileSync(join(dir, 'throws.mjs'), "throw new Error('the database is not reachable at import time');\n");
      writeFileSync(join(dir, 'syntax.ts'), 'export default defineJob({ name: "x", ');
      writeFileSync(
        join(dir, 'good.mjs'),
        "export default { name: 'good-one', every: '1s', handler: () => 'ok' };\n",
      );
      const { startInstance, FAST_ELECTION } = await import('../support/instance.js');
      const instance = startInstance('cli-mixed', { ...FAST_ELECTION, LEASEBEAT_REDIS_URL: server.url, LEASEBEAT_JOBS_DIR: dir, LEASEBEAT_PREFIX: 'mixed' });
      try {
        const loaded = await instance.waitForLog((l) => l.msg === 'jobs loaded', 30_000);
        assert.equal(loaded.jobs, 1);
        assert.deepEqual(loaded.names, ['good-one']);
        assert.equal(loaded.errors, 3);
        const errors = instance.logs.filter((l) => l.level >= 50).map((l) => l.msg).join('\n');
        assert.match(errors, /bad-cron\.mjs: schedule "61 \* \* \* \*": minute/);
        assert.match(errors, /syntax\.ts/);
        assert.match(errors, /throws\.mjs: .*database is not reachable/);
        for (let i = 0; i < 100 && Number((await redis.hget('mixed:{leasebeat}:job:good-one', 'enqueued')) ?? 0) < 2; i++) {
          await new Promise((r) => setTimeout(r, 100));
        }
        assert.ok(Number(await redis.hget('mixed:{leasebeat}:job:good-one', 'enqueued')) >= 2, 'the good job keeps running');

        // The same running instance answers its probes, metrics and status API.
        const { url } = (await instance.waitForLog((l) => l.msg === 'serving status, probes, metrics and Bull Board')) as unknown as { url: string };
        assert.equal((await fetch(`${url}/livez`)).status, 200);
        const ready = await fetch(`${url}/readyz`);
        assert.equal(ready.status, 200, await ready.clone().text());
        const metrics = await (await fetch(`${url}/metrics`)).text();
        assert.match(metrics, /^leader_election_master_status\{name="redis\/leasebeat"\} 1$/m);
        assert.match(metrics, /^leasebeat_ticks_enqueued_total\{job="good-one"\} [1-9]/m);
        assert.match(metrics, /^leasebeat_schedule_lag_seconds_bucket/m);
        assert.match(metrics, /^bullmq_job_count\{queue="leasebeat", ?state="completed"\}/m);
        const status = (await (await fetch(`${url}/api/status`)).json()) as { cluster: { leader: string }; loadErrors: unknown[] };
        assert.equal(status.cluster.leader, 'cli-mixed');
        assert.equal(status.loadErrors.length, 3);
      } finally {
        instance.child.kill('SIGTERM');
        await instance.exited();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
