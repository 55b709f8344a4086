import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Queue } from 'bullmq';
import type { TickJobData } from '../../src/ledger/job-data.js';
import { KeySpace } from '../../src/redis/keys.js';
import { TickLedger } from '../../src/ledger/tick-ledger.js';
import { FAST_ELECTION, killAll, startInstance, type Instance } from '../support/instance.js';
import { useRedis } from '../support/redis-server.js';

const JOBS = new URL('../fixtures/jobs-multiprocess/', import.meta.url).pathname;
const LEASE_KEY = 'leasebeat:{leasebeat}:lease';

describe('fencing across processes: a leader frozen past its lease', () => {
  const redis = useRedis();
  const instances: Instance[] = [];
  redis.beforeClose(() => killAll(instances));

  it('SIGSTOP the leader past its lease, SIGCONT it: no enqueue from its term after the fence rose, no duplicates', { timeout: 120_000 }, async (t) => {
    const env = { LEASEBEAT_REDIS_URL: redis.server.url, LEASEBEAT_JOBS_DIR: JOBS, LEASEBEAT_SHUTDOWN_TIMEOUT: '5s', ...FAST_ELECTION };
    for (const id of ['a', 'b', 'c']) instances.push(startInstance(`fence-${id}`, env));
    const ledger = new TickLedger(redis.client, new KeySpace());
    for (let i = 0; i < 600 && (await ledger.jobState('every-second')).enqueued < 3; i++) await sleep(100);

    const holder = await redis.client.hget(LEASE_KEY, 'holderIdentity');
    const old = instances.find((i) => i.identity === holder);
    assert.ok(old, 'one of the instances leads');
    const oldTransitions = (await ledger.fence()).leaderTransitions;
    old.child.kill('SIGSTOP');
    const stoppedAt = Date.now();

    // Another instance takes over and raises the fence.
    let raised: { time: number; instance: Instance } | undefined;
    for (let i = 0; i < 200 && !raised; i++) {
      await sleep(50);
      for (const instance of instances) {
        if (instance === old) continue;
        const line = instance.logs.find((l) => l.msg === 'fence raised; producing');
        if (line) raised = { time: line.time, instance };
      }
    }
    assert.ok(raised, 'a new leader raised the fence');
    t.diagnostic(`frozen leader ${old.identity}; ${raised.instance.identity} raised the fence ${raised.time - stoppedAt} ms after SIGSTOP`);
    await sleep(3_000); // frozen for well over the 2 s lease
    old.child.kill('SIGCONT');
    await sleep(4_000);
    for (const instance of instances) instance.child.kill('SIGTERM');
    await Promise.all(instances.map((i) => i.exited()));

    const queue = new Queue('leasebeat', { connection: redis.client });
    const jobs = await queue.getJobs(['waiting', 'delayed', 'active', 'completed', 'failed', 'prioritized']);
    await queue.close();
    const staleAfterRaise = jobs.filter((job) => {
      const data = job.data as TickJobData;
      return data.token.leaderTransitions <= oldTransitions && job.timestamp >= raised.time;
    });
    assert.deepEqual(staleAfterRaise.map((j) => j.id), [], 'no enqueue from the old term after the fence rose');
    const runs = Object.entries(await redis.client.hgetall('test:runs')).filter(([, count]) => Number(count) > 1);
    assert.deepEqual(runs, [], 'no tick ran twice');

    const fence = await ledger.fence();
    const selfFenced = old.logs.some((l) => String(l.msg).startsWith('renew deadline passed without a renewal'));
    const redisFenced = old.logs.some((l) => String(l.msg).startsWith('enqueue rejected by the fence'));
    t.diagnostic(
      `after SIGCONT the old leader was stopped by: ${selfFenced ? 'its local self-fence' : ''}${selfFenced && redisFenced ? ' and ' : ''}` +
        `${redisFenced ? 'the Redis fence' : ''}${!selfFenced && !redisFenced ? 'noticing the lost lease before any tick fired' : ''}; ` +
        `fence counter of rejected claims: ${fence.fenced}; old term's jobs: ${jobs.filter((j) => (j.data as TickJobData).token.leaderTransitions === oldTransitions).length}`,
    );
    assert.ok(old.logs.some((l) => l.msg === 'stopped leading'), 'the old leader noticed it lost the lease');
    assert.equal(fence.fenced, Number(await redis.client.hget(ledger.keys.jobState('every-second'), 'fenced') ?? 0));
  });
});
