import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { Queue } from 'bullmq';
import { LeaderElector } from '../../src/election/leader-elector.js';
import { RedisLeaseLock } from '../../src/election/redis-lock.js';
import { DurabilityError, DurableLock, ReplicaWait } from '../../src/redis/durability.js';
import { KeySpace } from '../../src/redis/keys.js';
import { TickLedger } from '../../src/ledger/tick-ledger.js';
import { createScheduler } from '../../src/scheduler.js';
import { createAdmin, ScheduleError } from '../../src/index.js';
import { RedisProcess } from '../support/redis-process.js';
import { useRedis } from '../support/redis-server.js';
import { until } from '../support/until.js';
import { JOBS_DIR, runs, topologyScheduler } from './fixtures/runs.js';

const token = { generation: 'g1', leaderTransitions: 3 };

describe('durable writes (WAIT) on real servers', () => {
  const lonely = useRedis();
  const primary = useRedis();
  let replica: RedisProcess;

  before(async () => {
    // The replica stores the primary's snapshot on sync: in the primary's temporary directory, not the cwd.
    replica = await RedisProcess.start((port) => ['--port', String(port), '--bind', '127.0.0.1', '--dir', primary.server.dir, '--dbfilename', `replica-${port}.rdb`, '--save', '', '--appendonly', 'no', '--replicaof', '127.0.0.1', String(primary.server.port), '--repl-diskless-sync-delay', '0']);
    await until('the replica to be in sync', async () => /slave0:.*state=online/.test(await primary.client.info('replication')));
  });
  primary.beforeClose(() => replica.kill());

  it('minReplicas 0 sends no WAIT at all', async () => {
    const wait = new ReplicaWait(lonely.client, { minReplicas: 0 });
    const ledger = new TickLedger(lonely.client, new KeySpace('leasebeat', 'off'), wait);
    assert.deepEqual(await ledger.raiseFence(token, 'me', Date.now()), { ok: true });
    assert.equal((await ledger.claim(token, 'job', 1_000, 'job@1')).kind, 'claimed');
    assert.deepEqual(wait.stats, { waits: 0, confirmed: 0, unconfirmed: 0 });
  });

  it('without a replica, the fence raise and a claim count as failed though they stand on the primary; a refused raise needs no WAIT', async () => {
    const keys = new KeySpace('leasebeat', 'alone');
    const wait = new ReplicaWait(lonely.client, { minReplicas: 1, timeoutMs: 50 });
    const ledger = new TickLedger(lonely.client, keys, wait);
    await assert.rejects(ledger.raiseFence(token, 'me', Date.now()), (error: unknown) => error instanceof DurabilityError && error.acknowledged === 0 && error.required === 1);
    assert.equal(await lonely.client.hget(keys.fence, 'transitions'), '3', 'the raise itself landed');
    await assert.rejects(ledger.claim(token, 'job', 1_000, 'job@1'), DurabilityError);
    assert.match((await ledger.tickState('job', 1_000)) ?? '', /^claimed\|/);
    const waits = wait.stats.waits;
    assert.equal((await ledger.raiseFence({ generation: 'g1', leaderTransitions: 2 }, 'old', Date.now())).ok, false);
    assert.equal(wait.stats.waits, waits, 'a refusal decides nothing: no WAIT');
  });

  it('with a replica, writes are confirmed, and concurrent claims share WAITs (one in flight per connection)', async () => {
    const wait = new ReplicaWait(primary.client, { minReplicas: 1, timeoutMs: 2_000 });
    const ledger = new TickLedger(primary.client, new KeySpace('leasebeat', 'burst'), wait);
    assert.deepEqual(await ledger.raiseFence(token, 'me', Date.now()), { ok: true });
    const before = wait.stats.waits;
    const outcomes = await Promise.all(Array.from({ length: 20 }, (_, i) => ledger.claim(token, `job-${i}`, 1_000, `job-${i}@1`)));
    assert.deepEqual(new Set(outcomes.map((o) => o.kind)), new Set(['claimed']));
    // Replies arrive over several socket reads, more so under load: the bound is loose, the saving is not.
    assert.ok(wait.stats.waits - before <= 10, `20 concurrent claims took ${wait.stats.waits - before} WAITs`);
    const replicaClient = replica.client();
    try {
      assert.match((await replicaClient.hget(ledger.keys.ledger('job-19'), '1000')) ?? '', /^claimed\|/, 'the replica has the claim once it is confirmed');
    } finally {
      replicaClient.disconnect();
    }
  });

  it('an elector on a durable lock whose writes cannot be confirmed never leads, and does not churn terms', { timeout: 20_000 }, async () => {
    const name = 'unconfirmable';
    const inner = new RedisLeaseLock({ connection: lonely.client, name, identity: 'me' });
    const lock = new DurableLock(inner, inner.key, new ReplicaWait(lonely.client, { minReplicas: 1, timeoutMs: 50 }));
    let led = false;
    const elector = new LeaderElector({
      lock,
      leaseDurationMs: 2_000,
      renewDeadlineMs: 1_500,
      retryPeriodMs: 200,
      callbacks: { onStartedLeading: () => void (led = true), onStoppedLeading: () => undefined },
    });
    const stop = new AbortController();
    const run = elector.run(stop.signal);
    const startedAt = Date.now();
    await until('a few attempts', async () => ((await inner.history()).length >= 3 ? true : undefined), 10_000);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    stop.abort();
    await run;
    const elapsed = Date.now() - startedAt;
    const writes = await inner.history();
    assert.equal(led, false, 'no term starts on an unconfirmed write');
    // One attempt per retry period (plus jitter), not one per feed echo of its own write.
    assert.ok(writes.length <= Math.ceil(elapsed / 200) + 2, `${writes.length} lease writes in ${elapsed} ms`);
  });

  it('a schedule write the replicas do not acknowledge is refused as unconfirmed; repeated once they are back, it converges on one version', { timeout: 30_000 }, async () => {
    const admin = createAdmin({ connection: primary.client, jobsDir: JOBS_DIR, leaseName: 'unacked', who: 'test@ci', writes: new ReplicaWait(primary.client, { minReplicas: 1, timeoutMs: 200 }) });
    const spec = { job: 'tenant', every: '1h' };
    const unconfirmed = (error: unknown): boolean =>
      error instanceof ScheduleError && error.code === 'unconfirmed' && !error.message.includes('\n') && /schedule "t-1": .*replica.*: repeat/.test(error.message);
    try {
      replica.freeze();
      try {
        await assert.rejects(admin.schedules.upsert('t-1', spec), unconfirmed);
      } finally {
        replica.resume();
      }
      // The write may stand on the primary (it does here): the same spec again is a no-op, now acknowledged.
      const repeated = await admin.schedules.upsert('t-1', spec);
      assert.deepEqual([repeated.version, repeated.changed], [1, false]);
      assert.equal((await admin.schedules.get('t-1'))?.version, 1);

      replica.freeze();
      try {
        await assert.rejects(admin.schedules.pause('t-1', 'maintenance'), unconfirmed);
        await assert.rejects(admin.schedules.remove('t-1'), unconfirmed);
        await assert.rejects(admin.schedules.upsert('t-1', { ...spec, every: '2h' }), unconfirmed);
      } finally {
        replica.resume();
      }
      await admin.schedules.remove('t-1');
      assert.equal(await admin.schedules.get('t-1'), undefined);
    } finally {
      replica.resume();
      await admin.close();
    }
  });

  it('a worker starts a run only once the replicas hold its take: with the replica frozen, a waiting run does not start', { timeout: 30_000 }, async () => {
    const scheduler = createScheduler(topologyScheduler(primary.client, 'taken', { durability: { minReplicas: 1, waitTimeoutMs: 200 } }));
    const queue = new Queue('alpha', { connection: primary.client });
    const run = 'alpha@123';
    try {
      await scheduler.start();
      replica.freeze();
      // A run as the leader adds it; taken while no replica acknowledges, it must not start.
      await queue.add('alpha', { tick: 123, token: token, data: undefined, manual: false }, { jobId: run });
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      assert.ok(!runs.includes(run), 'the run did not start while its take could be lost in a failover');
      replica.resume();
      await until('the run to start once the replica is back', () => runs.includes(run), 15_000);
    } finally {
      replica.resume();
      await scheduler.stop();
      await queue.close();
    }
  });
});
