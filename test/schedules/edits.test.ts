import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Queue } from 'bullmq';
import { createAdmin, createScheduler, type Admin, type Scheduler } from '../../src/index.js';
import { TickLedger } from '../../src/ledger/tick-ledger.js';
import { KeySpace } from '../../src/redis/keys.js';
import { useRedis } from '../support/redis-server.js';
import { SCHEDULE_JOBS } from '../support/schedule-instance.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { until } from '../support/until.js';

/**
 * Issue 31, findings 1, 2 and 5: what an edit, a remove and a re-create of a runtime schedule do to the
 * ticks staged ahead of them. The leader reaches Redis through a proxy, so that a test can keep it from
 * hearing of a write; another instance runs the workers.
 */
describe('runtime schedules: edits, removes and re-creates against staged runs (real Redis and BullMQ)', () => {
  const redis = useRedis();
  let proxy: TcpProxy;
  let leader: Scheduler;
  let workers: Scheduler;
  let admin: Admin;
  let queue: Queue;
  const ledger = (): TickLedger => new TickLedger(redis.client, new KeySpace());
  const options = { jobsDir: SCHEDULE_JOBS, election: { leaseDurationMs: 2_000, renewDeadlineMs: 1_500, retryPeriodMs: 250 }, members: { heartbeatIntervalMs: 200, graceMs: 1_000 } };

  before(async () => {
    proxy = await TcpProxy.start({ port: redis.server.port });
    leader = createScheduler({ ...options, connection: `redis://127.0.0.1:${proxy.port}`, identity: 'leader', workers: false });
    await leader.start();
    await until('the first instance to lead', () => leader.elector.isLeader());
    workers = createScheduler({ ...options, connection: redis.server.url, identity: 'workers' });
    await workers.start();
    admin = createAdmin({ connection: redis.server.url, jobsDir: SCHEDULE_JOBS, who: 'test@ci' });
    queue = new Queue('leasebeat', { connection: redis.client });
  });
  redis.beforeClose(async () => {
    proxy.heal('reset');
    await queue.close();
    await admin.close();
    await Promise.all([leader.stop(), workers.stop()]);
  });
  after(() => proxy.close());

  /** Whether the run of schedule `id`'s tick ever started: the worker's take counts each start in its job hash. */
  const started = async (id: string, tick: number): Promise<boolean> => Number((await redis.client.hget(`bull:leasebeat:${id}@${tick}`, 'leasebeatStarts')) ?? 0) > 0;
  const completed = async (id: string, tick: number): Promise<boolean> => (await queue.getJobState(`${id}@${tick}`)) === 'completed';
  const record = async (id: string, tick: number): Promise<string | undefined> => ledger().tickState(id, tick);

  /**
   * Waits for an instant `from`..`to` ms past a multiple of `periodMs` (by this host's clock, which Redis
   * shares) at which the schedule's next tick, one `accept`s, is staged already (recorded `enqueued`); that tick.
   */
  async function stagedTickAhead(id: string, periodMs: number, from: number, to: number, accept = (_tick: number) => true): Promise<number> {
    return until(
      `a staged tick of ${id}, ${from}..${to} ms into its period`,
      async () => {
        const now = Date.now();
        const phase = now % periodMs;
        if (phase < from || phase >= to) return false;
        const tick = now - phase + periodMs;
        if (!accept(tick)) return false;
        return (await record(id, tick)) === `enqueued|${id}@${tick}` ? tick : false;
      },
      30_000,
      5,
    );
  }

  it('an edit through a version without a staged tick, then back to one with it, runs that tick (issue 31, 1)', { timeout: 90_000 }, async (t) => {
    await admin.schedules.upsert('bounce', { job: 'work', every: '1s' });
    await until('a run of the schedule', async () => (await queue.getCompleted()).some((job) => job.name === 'bounce'), 30_000);
    let conclusive = 0;
    for (let attempt = 0; attempt < 3; attempt++) {
      // Just past an even second E: tick E+1 is staged (2 s ahead), and the intermediate version (every 2 s) lacks it.
      const owed = await stagedTickAhead('bounce', 1_000, 150, 350, (tick) => tick % 2_000 === 1_000);
      await admin.schedules.upsert('bounce', { job: 'work', every: '2s' });
      await until('the leader to act on the intermediate version', async () => (await record('bounce', owed)) !== `enqueued|bounce@${owed}`, 5_000, 5);
      await admin.schedules.upsert('bounce', { job: 'work', every: '1s' });
      const ackedAt = Date.now();
      if (ackedAt >= owed) {
        t.diagnostic(`attempt ${attempt}: the last write was acknowledged after tick ${owed}: inconclusive`);
        continue;
      }
      conclusive++;
      // The version acknowledged before the tick owes it: it runs, once.
      await until(`tick ${owed} to run (acknowledged ${owed - ackedAt} ms before it)`, () => completed('bounce', owed), 10_000).catch(async (error: unknown) => {
        throw new Error(`${(error as Error).message}; its ledger record: ${await record('bounce', owed)}`);
      });
      assert.equal(await record('bounce', owed), `enqueued|bounce@${owed}`);
    }
    assert.ok(conclusive > 0, 'no attempt acknowledged the last write before the tick');
  });

  /**
   * A write acknowledged a moment before a staged tick of the version it replaced, while the leader cannot
   * hear of it: the run must not start (the worker's check sees the write), and once the leader hears, the
   * tick is recorded skipped for `reason`.
   */
  async function writeUnheardBeforeStagedTick(id: string, write: () => Promise<unknown>, reason: string): Promise<void> {
    await admin.schedules.upsert(id, { job: 'work', every: '2s', data: { version: 1 } });
    await until('a run of the schedule', async () => (await queue.getCompleted()).some((job) => job.name === id), 30_000);
    for (;;) {
      const tick = await stagedTickAhead(id, 2_000, 1_600, 1_800);
      // The edits below have no tick at an even second but on the hour.
      if (tick % 3_600_000 === 0) continue;
      proxy.partition('blackhole');
      try {
        await write();
        const ackedAt = Date.now();
        // Past the tick and BullMQ's promotion, with the leader's last stamp still fresh (RenewDeadline 1.5 s).
        await until(`${id}: a start of tick ${tick}, or 700 ms past it`, async () => (await started(id, tick)) || Date.now() > tick + 700, 5_000, 5);
        if (ackedAt >= tick) continue;
        assert.equal(await started(id, tick), false, `the run of tick ${tick} started after the write was acknowledged ${tick - ackedAt} ms before it`);
      } finally {
        proxy.heal('deliver');
      }
      await until(`${id}: tick ${tick} recorded skipped`, async () => (await record(id, tick)) === `skipped|${reason}`, 20_000);
      assert.equal(await started(id, tick), false, 'the run never started');
      return;
    }
  }

  it('an edit acknowledged before a staged tick the new version lacks: the run does not start (issue 31, 2)', { timeout: 90_000 }, async () => {
    await writeUnheardBeforeStagedTick('edited-ahead', () => admin.schedules.upsert('edited-ahead', { job: 'work', every: '1h', data: { version: 2 } }), 'rescheduled');
  });

  it('a remove acknowledged before a staged tick: the run does not start (issue 31, 2)', { timeout: 90_000 }, async () => {
    await writeUnheardBeforeStagedTick('removed-ahead', () => admin.schedules.remove('removed-ahead'), 'removed');
  });

  it('a schedule removed while paused and written again starts fresh: no pause, no note (issue 31, 5)', { timeout: 30_000 }, async () => {
    await admin.schedules.upsert('r1', { job: 'work', every: '1h' });
    await admin.schedules.pause('r1', 'tenant suspended');
    assert.deepEqual(await admin.schedules.get('r1').then((view) => [view?.paused, view?.pauseNote]), [true, 'tenant suspended']);
    assert.equal(await admin.schedules.remove('r1'), true);
    await admin.schedules.upsert('r1', { job: 'work', every: '1h' });
    assert.deepEqual(await admin.schedules.get('r1').then((view) => [view?.paused, view?.pauseNote]), [false, null]);
    assert.equal(await ledger().isPaused('r1'), false);
  });
});
