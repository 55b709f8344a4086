import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { isDeepStrictEqual } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { pino } from 'pino';
import { Queue } from 'bullmq';
import { createAdmin, type Admin } from '../../src/index.js';
import { tickJobId } from '../../src/ledger/job-data.js';
import { TickLedger } from '../../src/ledger/tick-ledger.js';
import { Producer } from '../../src/producing/producer.js';
import { KeySpace } from '../../src/redis/keys.js';
import { QueueSet } from '../../src/redis/queue-set.js';
import { keySlot } from '../../src/redis/redis-topology.js';
import { loadJobs } from '../../src/scheduling/loader.js';
import type { ScheduledJob } from '../../src/scheduling/define-job.js';
import { compileRecord } from '../../src/schedules/catalog.js';
import { ScheduleStore } from '../../src/schedules/store.js';
import { StoredSchedules } from '../../src/schedules/stored-schedules.js';
import type { RuntimeScheduleSource } from '../../src/producing/runtime-schedules.js';
import { directWrites, DurabilityError, type WritePath } from '../../src/redis/durability.js';
import { useRedis, type RedisFixture } from '../support/redis-server.js';
import { scheduledJob } from '../support/scheduled-job.js';
import { silentGaps, ticksBetween } from '../support/ledger-audit.js';
import { useRedisCluster } from '../support/redis-cluster.js';
import { SCHEDULE_JOBS, useScheduleInstance } from '../support/schedule-instance.js';
import { term } from '../support/term.js';
import { stagedRunsHeldBy, testWorkerPool } from '../support/worker-pool.js';
import { writesThrough } from '../support/write-paths.js';
import { until } from '../support/until.js';

/**
 * What the chaos runs of issue 21 found (the runtime schedules' audit, and one file job), each reproduced
 * here without faults, on real Redis and BullMQ, and each a regression test of its fix: a chaos case fails
 * on any violation.
 */

/**
 * The job's last claimed tick once it is staged (its run added) at least `aheadMs` ahead of now, else 0.
 * The claim raises the watermark before the add: a term stopped between them leaves the tick claimed, not
 * staged, so waiting on the watermark alone races the add.
 */
async function enqueuedAhead(ledger: TickLedger, id: string, aheadMs: number): Promise<number> {
  const tick = (await ledger.jobState(id)).lastScheduledTick ?? 0;
  if (tick <= Date.now() + aheadMs) return 0;
  return (await ledger.tickState(id, tick))?.startsWith('enqueued|') ? tick : 0;
}

/** The nominal tick's BullMQ job of a schedule (queue `leasebeat`: the `work` job type names none) and its ledger record. */
async function tickOf(queue: Queue, ledger: TickLedger, id: string, tick: number): Promise<{ state: string | undefined; data: unknown }> {
  const job = await queue.getJob(tickJobId(id, tick));
  return { state: (await ledger.tickState(id, tick)) ?? undefined, data: (job?.data as { data?: unknown } | undefined)?.data };
}

/** An admin as the tests' client uses it: over the runtime-schedules fixture's job types, writing as test@ci. */
function adminOn(connection: string, options: { timeoutMs?: number } = {}): Admin {
  return createAdmin({ connection, jobsDir: SCHEDULE_JOBS, who: 'test@ci', ...options });
}

/** How {@link Terms.produceUntil} runs its producer, beyond the defaults (no staging ahead, direct writes, no runtime schedules). */
interface TermOptions {
  stageAheadMs?: number;
  onTakenOver?: () => void;
  writes?: WritePath;
  schedules?: RuntimeScheduleSource;
}

/**
 * What one test's producer terms run on, from {@link onTerms}: made for that test alone (so no test sees
 * another's ledger or queues), on the suite's Redis with the default key space.
 */
interface Terms {
  readonly keys: KeySpace;
  readonly ledger: TickLedger;
  readonly queues: QueueSet;
  /** BullMQ's queue named by `TermsSetup.queue`, to read the runs' jobs; only when one is named. */
  readonly queue: Queue;
  /** The runtime schedules as an instance reads them (their lanes made from the due index); only with `types`. */
  readonly schedules: StoredSchedules;
  /** The schedule as an instance compiles it from the store (compileRecord, as StoredSchedules does); only with `types`. */
  readonly compiled: (id: string) => Promise<ScheduledJob>;
  /**
   * Runs one producer term over `job` (none: a leader that does not load it) until `done` holds (polled),
   * then ends it as a lost lease would. `onTakenOver`: the producer's, once every loaded job is taken over.
   * `schedules`: the runtime schedules as an instance reads them (their lanes made from the due index).
   */
  readonly produceUntil: (
    job: ScheduledJob | undefined | (() => ScheduledJob),
    transitions: number,
    what: string,
    done: (producer: Producer) => Promise<boolean>,
    options?: TermOptions,
  ) => Promise<void>;
}

/** What a test's {@link Terms} are made with; all of it optional. */
interface TermsSetup {
  /** The job types stored schedules compile with (for `compiled` and `schedules`). */
  types?: ReadonlyMap<string, ScheduledJob>;
  /** A BullMQ queue to open for reading the runs (`leasebeat`, where the `work` type's runs go). */
  queue?: string;
  /** The ledger's write path, for a test that makes its writes fail as a failover would; default direct. */
  ledgerWrites?: WritePath;
}

/**
 * Makes a test's {@link Terms} on `redis`, runs `body` with them, and closes the queues after, whatever
 * `body` does: the setup every producer-term finding here shares, in one place.
 */
async function onTerms<T>(redis: RedisFixture, setup: TermsSetup, body: (terms: Terms) => Promise<T>): Promise<T> {
  const keys = new KeySpace();
  const ledger = new TickLedger(redis.client, keys, setup.ledgerWrites);
  const store = new ScheduleStore(redis.client, keys, directWrites(redis.client));
  const queues = new QueueSet({ connection: redis.client });
  const queue = setup.queue === undefined ? undefined : new Queue(setup.queue, { connection: redis.client });
  const { types } = setup;
  const schedules = types && new StoredSchedules(store, () => types, pino({ level: 'silent' }));
  const missing = (what: string, needs: string): Error => new Error(`onTerms: ${what} needs \`${needs}\` in the setup`);
  const terms: Terms = {
    keys,
    ledger,
    queues,
    get queue(): Queue {
      if (!queue) throw missing('queue', 'queue');
      return queue;
    },
    get schedules(): StoredSchedules {
      if (!schedules) throw missing('schedules', 'types');
      return schedules;
    },
    compiled: async (id) => {
      if (!types) throw missing('compiled', 'types');
      const { job, problem } = compileRecord((await store.get(id))!, types);
      if (!job) throw new Error(problem.detail);
      return job;
    },
    produceUntil: async (job, transitions, what, done, options = {}) => {
      const current = typeof job === 'function' ? job : () => job;
      const jobs = (): ReadonlyMap<string, ScheduledJob> => {
        const now = current();
        return new Map(now ? [[now.name, now]] : []);
      };
      const producer = new Producer({
        redis: redis.client, ledger, queues, jobs, stillLeading: () => true, logger: pino({ level: process.env.TEST_LOG ?? 'silent' }), stageAheadMs: options.stageAheadMs ?? 0,
        ...(options.onTakenOver ? { onTakenOver: options.onTakenOver } : {}),
        ...(options.writes ? { writes: options.writes } : {}),
        ...(options.schedules ? { schedules: options.schedules } : {}),
      });
      const stop = new AbortController();
      const running = producer.run(term(transitions, 'gen'), stop.signal);
      try {
        await until(what, () => done(producer), 30_000);
      } finally {
        stop.abort();
        await running;
      }
    },
  };
  try {
    return await body(terms);
  } finally {
    await queue?.close();
    await queues.close();
  }
}

/** A suite's admin and its tests' terms over the fixture's job types, from {@link useAdminAndTerms}. */
interface AdminAndTerms {
  /** There from the suite's `before` hooks on: the client the tests write schedules with. */
  readonly admin: Admin;
  /** {@link onTerms} on the suite's Redis, with the fixture's job types. */
  onTerms<T>(setup: Omit<TermsSetup, 'types'>, body: (terms: Terms) => Promise<T>): Promise<T>;
}

/**
 * The admin and the job types (SCHEDULE_JOBS, loaded once) that the producer-term suites share: both made
 * in a `before` hook on `redis`, the admin closed in an `after` hook.
 */
function useAdminAndTerms(redis: RedisFixture): AdminAndTerms {
  let admin: Admin | undefined;
  let types: ReadonlyMap<string, ScheduledJob> | undefined;
  before(async () => {
    admin = adminOn(redis.server.url);
    types = (await loadJobs(SCHEDULE_JOBS)).jobs;
  });
  after(() => admin?.close());
  return {
    get admin(): Admin {
      if (!admin) throw new Error("useAdminAndTerms: the admin is made in the suite's before hook: use it from a hook or a test");
      return admin;
    },
    onTerms: (setup, body) => onTerms(redis, { ...setup, types }, body),
  };
}

describe('chaos findings: an interval edit runs a tick from before the edit (real instance)', () => {
  const redis = useRedis();
  useScheduleInstance(redis);
  let admin: Admin;
  let queue: Queue;
  before(() => {
    admin = adminOn(redis.server.url);
    queue = new Queue('leasebeat', { connection: redis.client });
  });
  redis.beforeClose(async () => {
    await queue.close();
    await admin.close();
  });

  // Chaos (npm run chaos -- --minutes 1 --lock redis --seed 34): "tenant-1 tick 17:49:15.000Z ran with write
  // #108 edit-interval every 1s, sent 17:49:15.853Z": the 2 s schedule had no tick at :15, the 1 s one was
  // written 853 ms after it. On a redefinition the lane rewinds to the newest tick recorded by now (:14) and
  // walks the new schedule from there: :15, already past, is claimed at once. Fixed in ddca4c4: the rewind
  // goes back no further than the version's write (definedAt), unless the lane runs late.
  it('every 2s edited to every 1s just after an odd second: that odd second has no run', { timeout: 60_000 }, async () => {
    const ledger = new TickLedger(redis.client, new KeySpace());
    await admin.schedules.upsert('halved', { job: 'work', every: '2s', data: { v: 1 } });
    await until('an even tick of the 2 s schedule ran', async () => (await ledger.jobState('halved')).lastScheduledTick !== undefined, 30_000);
    // 300 ms into an odd second: the even tick before it is recorded, the next one not due yet.
    const odd = Math.ceil(Date.now() / 2000) * 2000 + 1000;
    await sleep(odd + 300 - Date.now());
    const { version } = await admin.schedules.upsert('halved', { job: 'work', every: '1s', data: { v: 2 } });
    assert.equal(version, 2);
    const editedAt = Date.now();
    await until('the 1 s schedule ticks', async () => (await tickOf(queue, ledger, 'halved', odd + 2000)).state !== undefined, 30_000);
    assert.ok(editedAt > odd, 'the edit was written after the odd tick');
    assert.deepEqual(await tickOf(queue, ledger, 'halved', odd), { state: undefined, data: undefined }, `tick ${new Date(odd).toISOString()}, before the edit, has neither a run nor a record`);
  });
});

describe('chaos findings: a re-created schedule runs a tick claimed in its previous life (real Redis, producer terms)', () => {
  const redis = useRedis();
  const suite = useAdminAndTerms(redis);

  // Chaos (npm run chaos -- --minutes 1 --lock redis --seed 35): tenant-2's leader claimed tick 17:52:16.000Z
  // ahead of it and was cut off (freeze-near-deadline) before adding it; the schedule was removed (acknowledged
  // 17:52:15.848Z) and re-created at 17:52:20.397Z; the next leader took the new schedule over and finished
  // the old claim with the new version's data: tick :16 ran at 17:52:21.428Z. The removal left the claim
  // pending (takeBackRemovedJobs settles take-backs and staged runs, not plain claims), and JobLane.takeOver
  // finishes every pending claim whatever the current definition owes. Fixed in ddca4c4: a pending claim of
  // a tick the job as now defined does not have is added held and taken back (`rescheduled`).
  it('a claim left pending before a removal is not run by the schedule re-created after it', { timeout: 60_000 }, () => suite.onTerms({ queue: 'leasebeat' }, async ({ ledger, queue, compiled, produceUntil }) => {
    await suite.admin.schedules.upsert('ghost', { job: 'work', every: '1s', data: { life: 1 } });
    // Term 0 claims the tick 2 s ahead (as staging does) and dies before adding it.
    const tick = Math.ceil(Date.now() / 1000) * 1000 + 2000;
    const token0 = { generation: 'gen', leaderTransitions: 0 };
    assert.deepEqual(await ledger.raiseFence(token0, 'leader-0', Date.now()), { ok: true });
    assert.equal((await ledger.claim(token0, 'ghost', tick, tickJobId('ghost', tick))).kind, 'claimed');
    assert.equal(await suite.admin.schedules.remove('ghost'), true);
    // No leader until after the tick; then the schedule is written again, a new life.
    await sleep(tick + 1000 - Date.now());
    await suite.admin.schedules.upsert('ghost', { job: 'work', every: '1s', data: { life: 2 } });
    const job = await compiled('ghost');
    assert.ok(job.owedAfter! > tick, 'the new life owes no tick before its creation');
    await produceUntil(job, 1, 'term 1 ticks the new life', async () => (await ledger.jobState('ghost')).lastScheduledTick! > tick + 1000);
    const { state, data } = await tickOf(queue, ledger, 'ghost', tick);
    assert.ok(!state?.startsWith('enqueued|'), `tick ${new Date(tick).toISOString()}, claimed before the removal, was enqueued (${state}) with ${JSON.stringify(data)}`);
  }));
});

describe('chaos findings: a run staged before a removal runs in the life re-created before the next leader (real Redis, producer terms)', () => {
  const redis = useRedis();
  const suite = useAdminAndTerms(redis);

  // Chaos (npm run chaos -- --minutes 1 --lock kubernetes --seed 12): tenant-5's leader staged tick
  // 17:53:55.000Z with write #47's data and froze; the schedule was removed (acknowledged 17:53:53.795Z) and
  // re-created (17:53:54.218Z) while no leader ran; the next leader (17:53:55.763Z) found the schedule there
  // and the staged run due, decided it as a late staged run of its own schedule and kept it: tick :55 ran
  // with the removed life's data. The removal is invisible to a leader that comes after the re-creation.
  // Fixed in ddca4c4: runs BullMQ says were added before the schedule's creation are taken back (`removed`).
  it('the staged run of the removed life is taken back, not run with its old data', { timeout: 60_000 }, () => suite.onTerms({ queue: 'leasebeat' }, async ({ ledger, queue, compiled, produceUntil }) => {
    // Every missed tick caught up: the late staged run is kept by the policy, not skipped by it.
    const catchup = { window: '10m', mode: 'all' as const, max: 1000 };
    await suite.admin.schedules.upsert('relived', { job: 'work', every: '1s', data: { life: 1 }, catchup });
    // Term 0 stages the next ticks 2 s ahead, then its lease is lost before they are due.
    let staged = 0;
    await produceUntil(await compiled('relived'), 0, 'term 0 stages a tick', async () => {
      staged = await enqueuedAhead(ledger, 'relived', 1000);
      return staged > 0;
    }, { stageAheadMs: 2000 });
    assert.equal((await tickOf(queue, ledger, 'relived', staged)).state, `enqueued|relived@${staged}`);
    // Removed and written again while no leader runs, both before the staged tick.
    assert.equal(await suite.admin.schedules.remove('relived'), true);
    await suite.admin.schedules.upsert('relived', { job: 'work', every: '1s', data: { life: 2 }, catchup });
    const job = await compiled('relived');
    assert.ok(job.owedAfter! < staged, 'the staged tick comes after the re-creation');
    await sleep(staged + 500 - Date.now());
    await produceUntil(job, 1, 'term 1 ticks the new life', async () => (await ledger.jobState('relived')).lastScheduledTick! > staged + 1000, { stageAheadMs: 2000 });
    // Taken back (recorded skipped; BullMQ may keep the pulled job's record), or run by the new life.
    const { state, data } = await tickOf(queue, ledger, 'relived', staged);
    assert.ok(state === 'skipped|removed' || (state?.startsWith('enqueued|') && !isDeepStrictEqual(data, { life: 1 })), `tick ${new Date(staged).toISOString()} is left to run (${state}) with ${JSON.stringify(data)}`);
  }));
});

describe('chaos findings: a run added but unconfirmed before a removal is confirmed by the life re-created before the next leader (real Redis, producer terms)', () => {
  const redis = useRedis();
  const suite = useAdminAndTerms(redis);

  // Chaos (CI on 36cbeb0: npm run chaos -- --minutes 1 --instances 3 --lock redis --redis cluster --seed 1 --lead
  // bull-primary-kill-after-handler,bull-primary-kill-during-staged-delay,ledger-primary-kill-between-claim-and-wait):
  // tenant-0's leader added tick 01:22:47.000Z 1,992 ms ahead with write #73's data and was killed 20 ms later,
  // before it confirmed the claim; the schedule was removed (acknowledged 01:22:45.232Z) and re-created every
  // 1 s (01:22:46.323Z: it has that tick) while no leader ran; the next leader (01:22:46.949Z, before the tick)
  // finished the earlier term's claim as owed by the new life: BullMQ ignored the add of a job id it had,
  // the claim was confirmed, and the tick ran with the removed life's data.
  it('the removed life’s run is taken back, not confirmed as the new life’s', { timeout: 60_000 }, () => {
    const direct = directWrites(redis.client);
    // The ledger as a leader killed right after its add leaves it: every write after the add is lost.
    let ledger: 'up' | 'watching' | 'cut' = 'up';
    const cutAfterAdd: WritePath = {
      ...direct,
      script: async (script, k, args, decides) => {
        if (ledger === 'watching' && (await redis.client.zcard('bull:leasebeat:delayed')) > 0) ledger = 'cut';
        if (ledger === 'cut') throw new DurabilityError('confirms of 1 ticks', 0, 1, 'WAIT failed: Error: Connection is closed.');
        return direct.script(script, k, args, decides);
      },
    };
    return suite.onTerms({ queue: 'leasebeat', ledgerWrites: cutAfterAdd }, async ({ keys, queue, compiled, produceUntil }) => {
      // Staged far ahead, so that the removal, the re-creation and the next takeover all come before the tick.
      const stageAheadMs = 6_000;
      await suite.admin.schedules.upsert('unconfirmed', { job: 'work', every: '1s', data: { life: 1 } });
      ledger = 'watching';
      await produceUntil(await compiled('unconfirmed'), 0, 'term 0 adds a run and cannot confirm it', () => Promise.resolve(ledger === 'cut'), { stageAheadMs });
      const audit = new TickLedger(redis.client, keys);
      const [added] = await queue.getJobs(['delayed']);
      const tick = (added!.data as { tick: number }).tick;
      assert.match((await audit.tickState('unconfirmed', tick)) ?? '', /^claimed\|/, 'the claim was left unconfirmed');
      ledger = 'up';
      // Removed and written again while no leader runs; the new life has the tick too.
      assert.equal(await suite.admin.schedules.remove('unconfirmed'), true);
      await suite.admin.schedules.upsert('unconfirmed', { job: 'work', every: '1s', data: { life: 2 } });
      const job = await compiled('unconfirmed');
      assert.ok(job.owedAfter! < tick, 'the new life owes the tick');
      // Term 1 takes over before the tick, but its BullMQ writes land after it (a loaded leader): its add of
      // the claim is then no staged run of its own, and the removed life's run must be caught before it.
      const afterTheTick = writesThrough(redis.client, async <T>(write: () => Promise<T>): Promise<T> => {
        if (Date.now() <= tick) await sleep(tick + 50 - Date.now());
        return write();
      });
      await produceUntil(job, 1, 'term 1 ticks past the tick', async () => (await audit.jobState('unconfirmed')).lastScheduledTick! > tick + 1000, { stageAheadMs, writes: afterTheTick });
      const { state, data } = await tickOf(queue, audit, 'unconfirmed', tick);
      assert.ok(state === 'skipped|removed' || (state?.startsWith('enqueued|') && !isDeepStrictEqual(data, { life: 1 })), `tick ${new Date(tick).toISOString()} is left to run (${state}) with ${JSON.stringify(data)}`);
    });
  });
});

describe('chaos findings: a staged run that came due while no leader ran is kept though an edit dropped its tick (real Redis, producer terms)', () => {
  const redis = useRedis();
  const suite = useAdminAndTerms(redis);

  // Chaos (npm run chaos -- --minutes 1.083 --lock kubernetes --seed 12 --lead freeze-in-renewal,
  // redis-restart-kill-leader,freeze-in-renewal): tenant-1's leader staged tick 18:02:47.000Z of its 1 s
  // schedule and froze (18:02:45.565Z); the schedule was edited to every 2 s (acknowledged 18:02:45.993Z)
  // while no leader ran; the next leader (18:02:47.588Z) found the staged run due and decided it by the
  // catch-up policy only (planLateStaged): kept, so the odd second ran with the old version's data, 1 s
  // after an edit that has no such tick. A live leader would have taken it back (`rescheduled`). Fixed in
  // 23afdac: late staged runs of ticks the job no longer has are taken back (`rescheduled`) at takeover.
  it('the late staged run of a tick the edited schedule no longer has is taken back', { timeout: 60_000 }, () => suite.onTerms({ queue: 'leasebeat' }, async ({ ledger, queue, compiled, produceUntil }) => {
    await suite.admin.schedules.upsert('halving', { job: 'work', every: '1s', data: { v: 1 } });
    // Term 0 stages two ticks 2 s ahead, one of them odd, then its lease is lost before they are due.
    let staged = 0;
    await produceUntil(await compiled('halving'), 0, 'term 0 stages two ticks', async () => {
      staged = await enqueuedAhead(ledger, 'halving', 1000);
      return staged > 0;
    }, { stageAheadMs: 2000 });
    const odd = staged % 2000 === 0 ? staged - 1000 : staged;
    assert.ok(odd > Date.now(), 'the odd tick is still ahead');
    assert.equal((await tickOf(queue, ledger, 'halving', odd)).state, `enqueued|halving@${odd}`);
    // Edited to every 2 s while no leader runs; the odd tick comes due meanwhile.
    await suite.admin.schedules.upsert('halving', { job: 'work', every: '2s', data: { v: 2 } });
    await sleep(odd + 500 - Date.now());
    await produceUntil(await compiled('halving'), 1, 'term 1 takes over', async () => (await ledger.jobState('halving')).lastScheduledTick! > odd + 2000, { stageAheadMs: 2000 });
    const { state, data } = await tickOf(queue, ledger, 'halving', odd);
    assert.equal(state, 'skipped|rescheduled', `tick ${new Date(odd).toISOString()}, which every 2s does not have, is left to run (${state}) with ${JSON.stringify(data)}`);
  }));
});

describe('chaos findings: a schedule removed while no leader ran leaves its owed ticks without a record (real Redis, producer terms)', () => {
  const redis = useRedis();
  const suite = useAdminAndTerms(redis);

  // Chaos (npm run chaos -- --minutes 1 --lock redis --redis sentinel --seed 5 --lead primary-freeze,
  // primary-kill,replica-restart,kill-leader): tenant-0 ticked every 1 s; its ledger's primary was killed
  // at 18:08:28.970Z (replication held first); ticks :31 and :32 came due while the leader could not
  // record them; the removal was sent at 18:08:32.438Z and acknowledged; neither tick has a run or a
  // record (and so tenant-4's :58 and :04 around the Sentinel failovers). A lane stops at the removal
  // (JobLane.stop: its staged runs taken back, nothing else); a leader that comes after it never loads the
  // job, and takeBackRemovedJobs takes back staged runs only. Proposed fix: removeSchedule.lua records the
  // removal's time (Redis TIME) in the job's state, and both the stopping lane and takeBackRemovedJobs
  // record the ticks owed from the watermark to it as one skipped range (`removed`).
  it('the ticks owed between the last recorded one and the removal are recorded skipped', { timeout: 60_000 }, () => suite.onTerms({}, async ({ ledger, schedules, produceUntil }) => {
    await suite.admin.schedules.upsert('dropped', { job: 'work', every: '1s' });
    let watermark = 0;
    await produceUntil(undefined, 0, 'term 0 records a tick', async () => {
      watermark = (await ledger.jobState('dropped')).lastScheduledTick ?? 0;
      return watermark > 0;
    }, { schedules });
    // No leader for two more ticks; then the schedule is removed, and the next leader does not load it.
    await sleep(watermark + 2500 - Date.now());
    assert.equal(await suite.admin.schedules.remove('dropped'), true);
    let takenOverAt: number | undefined;
    let gaps: number[] = [];
    await produceUntil(undefined, 1, 'term 1 sweeps the removed schedule', async () => {
      gaps = await silentGaps(ledger, 'dropped', [watermark + 1000, watermark + 2000]);
      // Recorded is what is expected; the bound only ends the wait when it is not.
      return takenOverAt !== undefined && (gaps.length === 0 || Date.now() > takenOverAt + 2000);
    }, { onTakenOver: () => (takenOverAt = Date.now()), schedules });
    assert.deepEqual(gaps.map((tick) => new Date(tick).toISOString()), [], 'the ticks owed before the removal have a record');
  }));
});

describe('chaos findings: an interval edit while no leader ran is planned by the new interval from the watermark (real Redis, producer terms)', () => {
  // Each test starts its terms from 0 again: a fresh fence.
  const redis = useRedis({ flush: true });
  const suite = useAdminAndTerms(redis);

  /**
   * A schedule every `from` whose term records ticks up to an even one and ends; the odd second after it
   * passes with no leader; the schedule is edited to each of `edits` in turn, 2 s apart; the next term
   * takes over. Answers that odd tick, the ticks some version owed up to the last edit that have no
   * record, and what the ledger holds of the odd tick.
   */
  function editedWhileNoLeader(id: string, from: '1s' | '2s', edits: Array<{ every: '1s' | '2s'; data?: object }>): Promise<{ odd: number; gaps: number[]; state: string | undefined }> {
    return suite.onTerms({}, async ({ ledger, schedules, produceUntil }) => {
      await suite.admin.schedules.upsert(id, { job: 'work', every: from });
      let watermark = 0;
      await produceUntil(undefined, 0, 'term 0 records an even tick', async () => {
        watermark = (await ledger.jobState(id)).lastScheduledTick ?? 0;
        return watermark > 0 && watermark % 2000 === 0;
      }, { schedules });
      let lastEditAt = 0;
      for (const [i, edit] of edits.entries()) {
        await sleep(watermark + 1500 + 2000 * i - Date.now());
        assert.equal((await suite.admin.schedules.upsert(id, { job: 'work', ...edit })).version, 2 + i);
        lastEditAt = Date.now();
      }
      await produceUntil(undefined, 1, 'term 1 catches up past the last edit', async () =>
        ((await ledger.jobState(id)).lastScheduledTick ?? 0) >= Math.max(watermark + 2000, lastEditAt + 1000), { schedules });
      const odd = watermark + 1000;
      // The first version owed the odd tick when it is every 1 s; the edits (every 2 s) owe the even ones.
      const owed = ticksBetween(odd, lastEditAt, 1000).filter((tick) => (tick === odd ? from === '1s' : tick % 2000 === 0));
      return { odd, gaps: await silentGaps(ledger, id, owed), state: await ledger.tickState(id, odd) };
    });
  }

  // Chaos (npm run chaos -- --minutes 1 --lock redis --redis sentinel --seed 5 --lead primary-freeze,
  // primary-kill,replica-restart,kill-leader): tenant-0 ticked every 1 s; its leader stopped producing at
  // the primary's freeze (18:20:45.562Z); the schedule was edited to every 2 s (sent 18:20:50.784Z) before
  // the next term (18:20:50.819Z); that term caught up from the watermark (:48) by the 2 s schedule: :50
  // ran, and :49, owed by the 1 s version until the edit, has neither a run nor a record. And the other way
  // (npm run chaos -- --minutes 1.083 --lock redis --seed 34 --lead freeze-in-renewal,redis-restart-kill-leader,
  // freeze-in-renewal, at 9990946): tenant-2 every 2 s, its leader killed, edited to every 1 s at
  // 18:31:23.504Z, 60 ms before the next term: that term caught up :23, a tick no version had before the
  // edit, with the new data. ddca4c4 bounds the rewind of a live lane by the version's write (definedAt);
  // a takeover still plans everything after the watermark by the new spec. Proposed fix: the store keeps
  // the version before (spec and write time) in the record, and a takeover plans the ticks up to the
  // edit's write by it (run or skipped per the policy) and those after by the new spec; short of that, the
  // ticks before the write are recorded as one skipped range (`rescheduled`) and none of the new spec's
  // before it is run.
  it('edited from 1 s to 2 s: the odd tick the 1 s version owed before the edit is run or recorded skipped', { timeout: 60_000 }, async () => {
    const { odd, gaps } = await editedWhileNoLeader('halved-late', '1s', [{ every: '2s' }]);
    assert.deepEqual(gaps.map((tick) => new Date(tick).toISOString()), [], `tick ${new Date(odd).toISOString()}, owed before the edit, has a record`);
  });

  // The store kept only the version the last write replaced: after two edits with no leader, the span of
  // the first version was counted by the second's ticks, and the first's odd tick had no record.
  it('edited twice (1 s, then 2 s, then 2 s with other data): each version\'s ticks up to its replacement are recorded', { timeout: 60_000 }, async () => {
    const { odd, gaps } = await editedWhileNoLeader('edited-twice-late', '1s', [{ every: '2s' }, { every: '2s', data: { edit: 2 } }]);
    assert.deepEqual(gaps.map((tick) => new Date(tick).toISOString()), [], `every tick from ${new Date(odd).toISOString()} to the last edit has a record`);
  });

  it('edited from 2 s to 1 s: the odd tick before the edit, which no version had, is not run', { timeout: 60_000 }, async () => {
    const { odd, state } = await editedWhileNoLeader('doubled-late', '2s', [{ every: '1s' }]);
    assert.ok(!state?.startsWith('enqueued|'), `tick ${new Date(odd).toISOString()}, before the edit, is ${state}`);
  });
});

describe('chaos findings: an interval edit while the lane runs late leaves the ticks the new interval lacks without a record (real Redis, producer term)', () => {
  const redis = useRedis({ flush: true });
  const suite = useAdminAndTerms(redis);

  // Chaos (npm run chaos -- --minutes 1 --lock redis --redis cluster --seed 1 --lead bull-primary-kill-after-handler,
  // bull-primary-kill-during-staged-delay,ledger-primary-kill-between-claim-and-wait, at e120ab2): tenant-1
  // every 1 s, its ledger's primary frozen; tick :57 came due while the lane could not record it; the
  // schedule was edited to every 2 s at :57.518; the lane, running late, walked on under the new interval,
  // which has no :57: neither a job nor a record. A takeover records such ticks (JobLane.recordReplaced);
  // a live lane running late did not.
  it('the odd tick the 1 s version owed before the edit is recorded skipped, and none of the 2 s version before the edit runs', { timeout: 60_000 }, () => {
    const direct = directWrites(redis.client);
    let ledgerDown = false;
    // The ledger's writes as a frozen primary leaves them: every one fails until it is back.
    const failing: WritePath = { ...direct, script: (script, k, args, decides) => (ledgerDown ? Promise.reject(new Error('Connection is closed.')) : direct.script(script, k, args, decides)) };
    return suite.onTerms({ ledgerWrites: failing }, async ({ keys, schedules, produceUntil }) => {
      let even: number | undefined;
      let editedAt = 0;
      await suite.admin.schedules.upsert('late-edit', { job: 'work', every: '1s' });
      await produceUntil(undefined, 0, 'the edit applied once the ledger is back', async (producer) => {
        const { lastScheduledTick } = await new TickLedger(redis.client, keys).jobState('late-edit');
        if (even === undefined) {
          // Recorded up to an even tick, the one before due: the ledger goes down before the odd one.
          if (lastScheduledTick === undefined || lastScheduledTick % 2000 !== 0 || lastScheduledTick < Date.now() - 200) return false;
          even = lastScheduledTick;
          ledgerDown = true;
          return false;
        }
        if (ledgerDown) {
          // The odd tick came due while the lane could not record it; then the schedule is edited.
          if (Date.now() < even + 1400) return false;
          editedAt = Date.now();
          await suite.admin.schedules.upsert('late-edit', { job: 'work', every: '2s' });
          producer.schedulesChanged(['late-edit']);
          await sleep(300);
          ledgerDown = false;
          return false;
        }
        return (lastScheduledTick ?? 0) >= editedAt + 2000;
      }, { schedules });
      const audit = new TickLedger(redis.client, keys);
      const odd = even! + 1000;
      assert.deepEqual(await silentGaps(audit, 'late-edit', [odd]), [], `tick ${new Date(odd).toISOString()}, owed by the 1 s version before the edit, has a record`);
      assert.ok(!(await audit.tickState('late-edit', even! + 2000))?.startsWith('enqueued|') || even! + 2000 > editedAt, 'no tick of the 2 s version before its write ran');
    });
  });
});

describe('chaos findings: an edit heard of around a takeover leaves owed ticks without a record (real Redis, producer terms)', () => {
  const redis = useRedis({ flush: true });
  const suite = useAdminAndTerms(redis);

  /**
   * The ledger's writes, with the takeover's last one (the review mark, after its catch-up plan) held while
   * `hold` is set: a takeover slowed by a failing Redis, as the chaos runs had it.
   */
  const holdingReview = (): { writes: WritePath; hold: (until: Promise<void> | undefined) => void; held: () => boolean } => {
    const direct = directWrites(redis.client);
    let holding: Promise<void> | undefined;
    let held = false;
    const writes: WritePath = {
      ...direct,
      script: async (script, keys, args, decides) => {
        if (holding && script.source.includes('the current term has taken jobs over')) {
          held = true;
          await holding;
        }
        return direct.script(script, keys, args, decides);
      },
    };
    return {
      writes,
      hold: (until) => {
        holding = until;
      },
      held: () => held,
    };
  };

  // Chaos (Sentinel seed 5, CI on f94acb6): tenant-0's tick 04:14:04 (owed by every 1 s, and by the edit to
  // every 2 s acknowledged at 04:14:04.078) has no record, no job, no run; its term took over at 04:14:03.8.
  // The takeover planned up to its start by every 1 s; the edit, heard of before the lane's first step, made
  // the rewind jump to the write, and the lane, not running late, recorded nothing the version before owed
  // in between. (Seen three times in CI's chaos cases.) Fixed: a redefinition records what the
  // replaced versions owed from the ledger's watermark up to the write, as a takeover does.
  /**
   * Takes over `id` (every 1 s) with the takeover held past two of its ticks; then it is edited to every
   * 2 s, the lane hears of it, and the takeover ends. Returns the ticks of every 1 s in between that
   * have no record. `ticked`: a term recorded ticks of it before (else the takeover is its first).
   */
  const editedInTakeover = (id: string, ticked: boolean): Promise<number[]> => {
    const review = holdingReview();
    return suite.onTerms({ ledgerWrites: review.writes }, async ({ keys, schedules, produceUntil }) => {
      const audit = new TickLedger(redis.client, keys);
      const watermark = async (): Promise<number> => (await audit.jobState(id)).lastScheduledTick ?? 0;
      await suite.admin.schedules.upsert(id, { job: 'work', every: '1s' });
      if (ticked) await produceUntil(undefined, 0, 'a tick recorded', async () => (await watermark()) > 0, { schedules });
      let release: (() => void) | undefined;
      review.hold(new Promise<void>((resolve) => (release = resolve)));
      let heldAt = 0;
      let editedAt = 0;
      await produceUntil(undefined, 1, 'the 2 s version ticking after the held takeover', async (producer) => {
        if (!review.held()) return false;
        heldAt ||= Date.now();
        if (editedAt === 0) {
          if (Date.now() < heldAt + 2_200) return false;
          await suite.admin.schedules.upsert(id, { job: 'work', every: '2s' });
          editedAt = Date.now();
          // Heard of before the takeover ends: the lane's first step is by the new version.
          producer.schedulesChanged([id]);
          await sleep(100);
          release!();
          return false;
        }
        return (await watermark()) >= editedAt + 2_000;
      }, { schedules });
      const owed = ticksBetween(Math.ceil(heldAt / 1000) * 1000, Math.floor(editedAt / 1000) * 1000 - 1000, 1000);
      assert.ok(owed.length >= 1, 'a tick of every 1 s fell between the held takeover and the edit');
      return silentGaps(audit, id, owed);
    });
  };

  it('the ticks the version before owed between the takeover and the edit are recorded', { timeout: 60_000 }, async () => {
    assert.deepEqual(await editedInTakeover('edited-in-takeover', true), [], 'every tick the 1 s version owed up to the edit has a record');
  });

  it('the same at the first takeover of a schedule no term has ticked', { timeout: 60_000 }, async () => {
    assert.deepEqual(await editedInTakeover('edited-in-first-takeover', false), [], 'every tick the 1 s version owed up to the edit has a record');
  });

  // Chaos (the same hole, Cluster seed 1, CI on c80bfa6: tenant-3 has :32 and :34 and nothing of :33). A
  // lane that hears of a version late (the feed down, or the takeover by the version before) has recorded
  // ticks past its write by the version before; the rewind stopped at the newest of them, so the new
  // version's ticks in between that the old one lacks had neither a job nor a record.
  it('the ticks a version owed since its write, heard of late, are walked from the write', { timeout: 60_000 }, () =>
    suite.onTerms({}, async ({ keys, schedules, produceUntil }) => {
      const audit = new TickLedger(redis.client, keys);
      await suite.admin.schedules.upsert('heard-late', { job: 'work', every: '2s' });
      let writtenAt = 0;
      let toldAt = 0;
      await produceUntil(undefined, 0, 'the 1 s version ticking after it was heard of', async (producer) => {
        const { lastScheduledTick } = await audit.jobState('heard-late');
        if (writtenAt === 0) {
          // Just after an even tick of every 2 s: the edit to every 1 s is written, and not told.
          if (lastScheduledTick === undefined || Date.now() > lastScheduledTick + 300) return false;
          await suite.admin.schedules.upsert('heard-late', { job: 'work', every: '1s' });
          writtenAt = Date.now();
          return false;
        }
        if (toldAt === 0) {
          // Two more even ticks recorded by the version before, then the lane hears of the edit.
          if ((lastScheduledTick ?? 0) < writtenAt + 3_500) return false;
          toldAt = Date.now();
          producer.schedulesChanged(['heard-late']);
          return false;
        }
        return (lastScheduledTick ?? 0) >= toldAt + 2_000;
      }, { schedules });
      // Surely owed: from one interval after the write to when the lane heard of it.
      const owed = ticksBetween(Math.ceil((writtenAt + 1000) / 1000) * 1000, Math.floor(toldAt / 1000) * 1000, 1000);
      assert.ok(owed.some((tick) => tick % 2000 !== 0), 'an odd tick fell between the write and the telling');
      assert.deepEqual(await silentGaps(audit, 'heard-late', owed), [], 'every tick the 1 s version owed since its write has a record');
    }));
});

describe('chaos findings: a claim whose add failed is added after an edit by the new interval, which does not have its tick (real Redis, producer term)', () => {
  const redis = useRedis();
  const suite = useAdminAndTerms(redis);

  // Chaos (npm run chaos -- --minutes 1 --lock redis --redis cluster --seed 1 --lead bull-primary-kill-after-handler,
  // bull-primary-kill-during-staged-delay,ledger-primary-kill-between-claim-and-wait, at 9990946): tenant-1's
  // lane claimed tick 18:31:03.000Z of its 1 s schedule; BullMQ's primary was killed (aimed: a staged run
  // waiting) and the add failed, again and again ("BullMQ adds of 6 runs: WAIT failed", "no node known for
  // slot"); the schedule was edited to every 2 s (acknowledged 18:31:01.796Z); the lane's retry added the odd
  // tick with the 2 s version's data (18:31:04.688Z). JobLane.step finishes an unadded claim by the current
  // definition without asking whether it still has the tick. Proposed fix: as ddca4c4 does for an earlier
  // term's pending claims, an unadded claim of a tick the job as now defined does not have is added held and
  // taken back (`rescheduled`), or recorded skipped.
  /**
   * Claims an odd tick of `refused-add` (every 1 s, data v1) whose BullMQ add fails until, once the tick is
   * due, `change` rewrites the schedule; then BullMQ answers again. Returns the tick and what became of it.
   */
  const refusedAddThen = (id: string, change: () => Promise<void>) => suite.onTerms({ queue: 'leasebeat' }, async ({ ledger, queue, compiled, produceUntil }) => {
    const direct = directWrites(redis.client);
    let failAdds = false;
    // BullMQ's adds as a failover of its primary leaves them: not confirmed, so treated as not written.
    const writes: WritePath = {
      ...direct,
      write: async (key, write, decides) => {
        if (failAdds) throw new DurabilityError('BullMQ adds of 1 runs', 0, 1, 'WAIT failed: Error: Connection is closed.');
        return direct.write(key, write, decides);
      },
    };
    await suite.admin.schedules.upsert(id, { job: 'work', every: '1s', data: { v: 1 } });
    let job = await compiled(id);
    let odd: number | undefined;
    await produceUntil(() => job, 0, 'the odd tick settled after the change', async (producer) => {
      const { lastScheduledTick } = await ledger.jobState(id);
      if (odd === undefined) {
        // Staged up to an even tick: the next claim, an odd one, is made and its add fails.
        if (lastScheduledTick === undefined || lastScheduledTick % 2000 !== 0 || lastScheduledTick < Date.now() + 1000) return false;
        odd = lastScheduledTick + 1000;
        failAdds = true;
        return false;
      }
      if (failAdds) {
        // Claimed, not added, and due: past its tick, an add is a run at once, with no staging to take back.
        if (!(await ledger.tickState(id, odd))?.startsWith('claimed|') || Date.now() < odd + 300) return false;
        // Now the schedule changes, the lane hears of it in one reload, and BullMQ answers again.
        await change();
        job = await compiled(id);
        producer.reload();
        failAdds = false;
        return false;
      }
      return (lastScheduledTick ?? 0) >= odd + 3000;
    }, { stageAheadMs: 2000, writes });
    return { odd: odd!, ...(await tickOf(queue, ledger, id, odd!)) };
  });

  it('the odd tick claimed under every 1s, its add failing until an edit to every 2s, is not run with the 2 s data', { timeout: 60_000 }, async () => {
    const { odd, state, data } = await refusedAddThen('refused-add', async () => void (await suite.admin.schedules.upsert('refused-add', { job: 'work', every: '2s', data: { v: 2 } })));
    // Nor with the 1 s data: the edit, acknowledged before the retry, has no such tick (chaos at 7e0275d,
    // same command: tenant-1's odd tick ran with the 1 s version's data, added 1729 ms after the tick and
    // 3.4 s after the edit to every 2 s was acknowledged). Fixed: taken back (`rescheduled`).
    assert.equal(state, 'skipped|rescheduled', `tick ${new Date(odd).toISOString()}, which every 2s does not have, is ${state} with ${JSON.stringify(data)}`);
  });

  // The lane hears of a removal and the re-creation after it in one reload (the feed delivered both while
  // it waited to retry): the claim is of the schedule's earlier life, whose add may have landed with its
  // data. Before, the lane left it pending for the next term, whose takeover may be hours away; meanwhile a
  // landed add was the live term's run and would start.
  it('the same claim, the schedule removed and written again meanwhile: taken back as removed, not run by either life', { timeout: 60_000 }, async () => {
    const { odd, state, data } = await refusedAddThen('relived-add', async () => {
      assert.equal(await suite.admin.schedules.remove('relived-add'), true);
      await suite.admin.schedules.upsert('relived-add', { job: 'work', every: '1s', data: { v: 2 } });
    });
    assert.equal(state, 'skipped|removed', `tick ${new Date(odd).toISOString()}, claimed in the removed life, is ${state} with ${JSON.stringify(data)}`);
  });
});

describe('chaos findings: the admin API on a Redis Cluster URL writes no schedule', () => {
  const cluster = useRedisCluster();

  // Chaos (npm run chaos -- --minutes 1 --lock redis --redis cluster --seed 1): every one of the client's
  // 136 writes threw "WAIT for leasebeat:{leasebeat}:schedules: no node known for slot 12438: no node is
  // known for its slot yet; treated as not written". The admin opens its Cluster client lazily
  // (lazyConnect); ReplicaWait.connectionFor (src/redis/durability.ts) looks up the slot's node before any
  // command has connected the client, finds no slot map, and throws without sending: so nothing ever
  // connects it, and every durable write of the admin (schedules, pause, resume) fails until some read
  // does. Fixed in 23afdac: the durable path connects a lazy Cluster client first.
  it('a first upsert from a new admin is written', { timeout: 60_000 }, async () => {
    const admin = adminOn(cluster.current.url, { timeoutMs: 3_000 });
    const upsert = (): ReturnType<Admin['schedules']['upsert']> => admin.schedules.upsert('on-cluster', { job: 'work', every: '1h' });
    try {
      // On a loaded machine the replica may confirm after the WAIT timeout: the outcome is then unknown, and
      // the same upsert is safe to send again (it writes no second version). The bug was a write never sent.
      const outcome = await upsert().catch((error: unknown) => {
        if (error instanceof DurabilityError && error.reason === undefined) return upsert();
        throw error;
      });
      assert.equal(outcome.version, 1);
      assert.equal((await admin.schedules.get('on-cluster'))?.version, 1);
    } finally {
      await admin.close();
    }
  });
});

describe('chaos findings: an admin on a Redis Cluster writes nothing once its slot\'s primary failed over', () => {
  const cluster = useRedisCluster();

  // Chaos (npm run chaos -- --minutes 8 --lock redis --redis cluster --seed 2102, at f145b87): the client's
  // writes were acknowledged until the first kill of the primary serving leasebeat's keys (18:56:42Z);
  // from then on every one of 960 writes, for 7 minutes, threw "WAIT for leasebeat:{leasebeat}:schedules:
  // no node known for slot 12438: no node is known for its slot yet" (the suite's Cluster cases lose most of
  // their writes the same way). ReplicaWait.connectionFor finds no node for the slot in the client's map
  // after the failover and throws before sending anything, so the client never gets the MOVED or the error
  // that would refresh its slot map; an admin that only writes (an importer, a long-lived client) never
  // recovers. 23afdac connects a client that never connected; this one has. Fixed in 025e825: a read of the
  // key's slot first, when the map names no node for it.
  it('writes again after the failover', { timeout: 90_000 }, async () => {
    const admin = adminOn(cluster.current.url, { timeoutMs: 3_000 });
    try {
      assert.equal((await admin.schedules.upsert('across', { job: 'work', every: '1h' })).version, 1);
      const slot = keySlot(new KeySpace().schedules);
      const primary = await cluster.current.primaryOf(slot);
      await primary.kill();
      await cluster.current.waitForFailover(primary, slot);
      // Back as the new primary's replica: a durable write needs one to confirm it.
      await primary.launch();
      let last: unknown;
      const written = await until('an upsert after the failover', async () => {
        try {
          return (await admin.schedules.upsert('across', { job: 'work', every: '2h' })).version === 2;
        } catch (error) {
          last = error;
          return false;
        }
      }, 20_000).then(() => true, () => false);
      assert.ok(written, `no write for 20 s after the failover; the last threw: ${String(last)}`);
    } finally {
      await admin.close();
    }
  });
});

describe('chaos findings: a bufferOne lane whose release claim lost its reply waits on itself (real Redis, producer term)', () => {
  const redis = useRedis();

  // Chaos (npm run chaos -- --minutes 1 --lock kubernetes --redis cluster --seed 6 --lead primary-freeze,
  // primary-kill,replica-restart,kill-leader, with --schedules 0 too): the `buffered` file job's tick
  // 18:17:22.000Z was left "claimed" after the drain, never enqueued, and every later tick of the term was
  // skipped `overlap`. Its release claim (a buffered claim asked to enqueue: the script makes it the job's
  // lastJobId) was written, but its WAIT failed when the frozen primary came back a replica ("claims of 2
  // ticks: WAIT failed: ERR WAIT cannot be used with replica instances"). The lane, still holding the tick
  // as buffered, asks whether the previous run has finished before releasing it again: previousRun reads
  // lastJobId, now the tick itself, claimed and not in BullMQ, so "waiting": never finished, for the rest
  // of the term. Fixed in 23afdac: the lane sees that its buffered tick is the job's last run and only
  // finishes its add.
  it('the buffered tick is enqueued once the run before it finished, though its release claim lost its reply', { timeout: 60_000 }, () => {
    const direct = directWrites(redis.client);
    let failRelease: number | undefined;
    // The durable write path as a failover leaves it: the release claim of the buffered tick is written,
    // and its confirmation fails (as a WAIT answered by a server that is no longer the primary).
    const writes: WritePath = {
      ...direct,
      script: async (script, scriptKeys, args, decides) => {
        const reply = await direct.script(script, scriptKeys, args, decides);
        const releases = args.some((arg, i) => i >= 2 && arg === 'enqueue' && args[i - 2] === failRelease);
        if (failRelease !== undefined && releases) {
          failRelease = undefined;
          throw new DurabilityError('claims of 1 ticks', 0, 1, 'WAIT failed: ReplyError: ERR WAIT cannot be used with replica instances');
        }
        return reply;
      },
    };
    return onTerms(redis, { queue: 'buffers', ledgerWrites: writes }, async ({ keys, ledger, queue, produceUntil }) => {
      const job = scheduledJob({ name: 'buffered', every: '1s', overlap: 'bufferOne', queue: 'buffers', attempts: 1, handler: () => undefined });
      let buffered: number | undefined;
      let failedAt: number | undefined;
      await produceUntil(job, 0, 'the buffered tick released', async () => {
        if (buffered === undefined) {
          // No worker runs: the first run waits in BullMQ, so the next tick is buffered behind it.
          const states = await redis.client.hgetall(keys.ledger('buffered'));
          const tick = Object.entries(states).find(([, state]) => state.startsWith('buffered|'))?.[0];
          if (tick === undefined) return false;
          buffered = Number(tick);
          // The run before it finishes (removed, as removeOnComplete does); its release is to fail once.
          failRelease = buffered;
          await queue.remove((await ledger.jobState('buffered')).lastJobId!);
          return false;
        }
        if (failRelease === undefined) failedAt ??= Date.now();
        const state = await ledger.tickState('buffered', buffered);
        // Enqueued is what is expected; the bound only ends the wait when it does not come.
        return state?.startsWith('enqueued|') === true || (failedAt !== undefined && Date.now() > failedAt + 5_000);
      });
      assert.ok(failedAt !== undefined, 'the release claim was written and its confirmation failed');
      const state = await ledger.tickState('buffered', buffered!);
      assert.ok(state?.startsWith('enqueued|'), `tick ${new Date(buffered!).toISOString()} is still ${state} 5 s after the run before it finished (later ticks: ${JSON.stringify((await ledger.jobState('buffered')).skipped)})`);
    });
  });
});

describe('chaos findings: a schedule removed and created again while BullMQ fails over runs a tick of its earlier life (real Redis, producer terms)', () => {
  const redis = useRedis({ flush: true });
  const suite = useAdminAndTerms(redis);

  // Chaos (npm run chaos -- --minutes 1 --instances 3 --lock redis --redis cluster --seed 16 --lead
  // bull-primary-kill-after-handler,bull-primary-kill-during-staged-delay,ledger-primary-kill-between-claim-and-wait):
  // tenant-0 (every 2 s) claimed tick :48 ahead and its add was lost with BullMQ's primary; it was removed
  // (:47.44), created again every 1 s (:48.07; acknowledged :48.86, BullMQ still failing over), and removed
  // again (:49.53). Tick :48 ran at :50.90 with the new life's data. The interleaving is replayed here
  // (BullMQ's writes lost while the first life claims the tick, then landing unconfirmed, their WAIT failing,
  // until after the second removal; workers running throughout) and holds, before today's fixes as after:
  // what let the chaos run's tick run is not known yet, and it did not recur in reruns of the seed.
  it("the earlier life's claim is taken back, never run with the new life's data", { timeout: 60_000 }, () =>
    suite.onTerms({ queue: 'leasebeat' }, async ({ ledger, queue, schedules, produceUntil }) => {
      type Failing = 'no' | 'lost' | 'unconfirmed';
      let failing: Failing = 'no';
      const writes = writesThrough(redis.client, async <T>(write: () => Promise<T>): Promise<T> => {
        const now = failing;
        if (now === 'lost') throw new DurabilityError('BullMQ write', 0, 1, 'WAIT failed: Connection is closed.');
        const result = await write();
        if (now === 'unconfirmed') throw new DurabilityError('BullMQ write', 0, 1);
        return result;
      });
      const started: Array<{ tick: number; data: unknown }> = [];
      const pool = testWorkerPool({ connection: redis.client, logger: pino({ level: 'silent' }), ...stagedRunsHeldBy(ledger) });
      const types = (await loadJobs(SCHEDULE_JOBS)).jobs;
      const work = types.get('work')!;
      pool.update(new Map([['work', { ...work, handler: (job, ctx) => void started.push({ tick: ctx.tick.getTime(), data: ctx.data }) }]]));
      const catchup = { window: '10m', mode: 'all' as const, max: 1000 };
      try {
        await suite.admin.schedules.upsert('relife', { job: 'work', every: '2s', data: { life: 1 }, catchup });
        // The tick 2 s ahead of the next even second but one: claimed by the first life while its add is lost.
        const tick = Math.ceil((Date.now() + 3_000) / 2_000) * 2_000;
        const steps: Array<{ at: number; act: (producer: Producer) => Promise<void> | void }> = [
          { at: tick - 2_300, act: () => void (failing = 'lost') },
          { at: tick - 550, act: async (producer) => {
            assert.equal(await suite.admin.schedules.remove('relife'), true);
            producer.schedulesChanged(['relife']);
          } },
          { at: tick + 50, act: async (producer) => {
            failing = 'unconfirmed';
            await suite.admin.schedules.upsert('relife', { job: 'work', every: '1s', data: { life: 2 }, catchup });
            producer.schedulesChanged(['relife']);
          } },
          { at: tick + 1_500, act: async (producer) => {
            assert.equal(await suite.admin.schedules.remove('relife'), true);
            producer.schedulesChanged(['relife']);
          } },
          { at: tick + 2_500, act: () => void (failing = 'no') },
        ];
        await produceUntil(undefined, 1, 'the faults played out and the tick decided', async (producer) => {
          while (steps[0] && Date.now() >= steps[0].at) await steps.shift()!.act(producer);
          if (steps.length > 0 || Date.now() < tick + 5_000) return false;
          const state = await ledger.tickState('relife', tick);
          return state !== undefined && !state.startsWith('claimed|') && !state.startsWith('unstaging|');
        }, { schedules, writes, stageAheadMs: 2_000 });
        await sleep(1_500);
        const state = await ledger.tickState('relife', tick);
        const job = await queue.getJob(tickJobId('relife', tick));
        assert.deepEqual(started.filter((run) => run.tick === tick), [], `tick ${new Date(tick).toISOString()} of the removed first life ran (${state})`);
        assert.ok(!state?.startsWith('enqueued|') || job === undefined || (await job.getState()) === 'completed', `tick ${new Date(tick).toISOString()} is left to run: ${state}, BullMQ ${await job?.getState()}`);
      } finally {
        await pool.close(1_000);
      }
    }));
});
