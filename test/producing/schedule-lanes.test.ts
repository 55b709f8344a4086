import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { pino } from 'pino';
import type { TickJobData } from '../../src/ledger/job-data.js';
import { Producer } from '../../src/producing/producer.js';
import type { DueEntry, RuntimeScheduleSource } from '../../src/producing/runtime-schedules.js';
import { directWrites, type WritePath } from '../../src/redis/durability.js';
import { KeySpace } from '../../src/redis/keys.js';
import { checkScheduleSpec, firstReviewAt } from '../../src/schedules/spec.js';
import { ScheduleStore } from '../../src/schedules/store.js';
import { StoredSchedules } from '../../src/schedules/stored-schedules.js';
import { useFreshLedger } from '../support/fresh-ledger.js';
import { useRedis } from '../support/redis-server.js';
import { jobType } from '../support/scheduled-job.js';
import { addsFailingWhile, lateStagedAdd } from '../support/write-paths.js';
import { term } from '../support/term.js';
import { until } from '../support/until.js';

const logger = pino({ level: 'silent' });
/** Short leads, so that a schedule ticking every few seconds parks between its ticks: made 1.5 s before a tick, parked when it is over 3.5 s off. */
const STAGE_AHEAD_MS = 1_000;
const REVIEW_LEAD_MS = 500;
/** The leader's page of the due index and of spec reads (PAGE in schedule-lanes.ts). */
const PAGE = 1_000;

/**
 * The producer's source of runtime schedules, watched (every call goes to Redis through `inner`): the
 * most ids one spec read asked for, the due index pages read, and a hook run before each spec read returns.
 */
class WatchedSource implements RuntimeScheduleSource {
  largestLoad = 0;
  loaded = 0;
  readonly pages: DueEntry[][] = [];
  constructor(
    private readonly inner: RuntimeScheduleSource,
    private readonly beforeLoaded: (ids: readonly string[], loadedBefore: number) => Promise<void> = () => Promise.resolve(),
  ) {}
  async load(ids: readonly string[]): ReturnType<RuntimeScheduleSource['load']> {
    this.largestLoad = Math.max(this.largestLoad, ids.length);
    const loaded = await this.inner.load(ids);
    const before = this.loaded;
    this.loaded += ids.length;
    await this.beforeLoaded(ids, before);
    return loaded;
  }
  async due(after: number, until: number, limit: number): Promise<DueEntry[]> {
    const page = await this.inner.due(after, until, limit);
    this.pages.push(page);
    return page;
  }
  dueExactly(at: number): Promise<string[]> {
    return this.inner.dueExactly(at);
  }
  nextDue(after: number): ReturnType<RuntimeScheduleSource['nextDue']> {
    return this.inner.nextDue(after);
  }
  park(...args: Parameters<RuntimeScheduleSource['park']>): ReturnType<RuntimeScheduleSource['park']> {
    return this.inner.park(...args);
  }
  stored(ids: readonly string[]): Promise<boolean[]> {
    return this.inner.stored(ids);
  }
  replaced(id: string): ReturnType<RuntimeScheduleSource['replaced']> {
    return this.inner.replaced(id);
  }
  forgetPrevious(id: string, endedAt: number): Promise<void> {
    return this.inner.forgetPrevious(id, endedAt);
  }
}

describe('runtime schedules parked in the due index (real Redis and BullMQ)', () => {
  const redis = useRedis();
  const base = useFreshLedger(redis);
  const files = new Map([['work', jobType('work')]]);
  let store: ScheduleStore;
  beforeEach(() => {
    store = new ScheduleStore(redis.client, new KeySpace(), directWrites(redis.client));
  });

  /** Writes a schedule due at once (`asTheApi`: due by its first tick, as `schedules.upsert` writes it). */
  const upsert = async (id: string, spec: object, asTheApi = false): Promise<void> => {
    const now = Date.now();
    const checked = checkScheduleSpec(id, { job: 'work', ...spec }, files, now);
    if (!checked.ok) throw new Error(checked.errors.join('\n'));
    await store.upsert(id, checked.spec, 'test', asTheApi ? { reviewAt: firstReviewAt(checked.job, now) } : {});
  };
  const storedSchedules = (): StoredSchedules => new StoredSchedules(store, () => files, logger);
  const producer = (onTakenOver?: (jobs: number) => void, schedules: RuntimeScheduleSource = storedSchedules(), writes?: WritePath, parkedMarksKept?: number): Producer =>
    new Producer({
      ...(writes && { writes }),
      ...(parkedMarksKept !== undefined && { parkedMarksKept }),
      redis: redis.client,
      ledger: base.ledger,
      queues: base.queues,
      jobs: () => files,
      schedules,
      scheduleReviewLeadMs: REVIEW_LEAD_MS,
      stageAheadMs: STAGE_AHEAD_MS,
      stillLeading: () => true,
      logger,
      ...(onTakenOver ? { onTakenOver } : {}),
    });
  /** Runs `made` for one term (term 1) while `during` runs, then ends the term as a lost lease would. */
  const producing = async (made: Producer, during: () => Promise<void>): Promise<void> => {
    const stop = new AbortController();
    const run = made.run(term(1), stop.signal);
    try {
      await during();
    } finally {
      stop.abort();
      await run;
    }
  };
  const dueAt = async (id: string): Promise<number | undefined> => {
    const score = await redis.client.zscore(store.keys.scheduleDue, id);
    return score === null ? undefined : Number(score);
  };
  /** Every BullMQ job id added for schedule `id`, in tick order. */
  const runIds = async (id: string): Promise<string[]> => {
    const jobs = await base.queues.get('leasebeat').getJobs(['waiting', 'delayed', 'active', 'completed', 'failed', 'prioritized']);
    return jobs.map((job) => job.id ?? '').filter((jobId) => jobId.startsWith(`${id}@`)).sort();
  };
  const ticksOf = (ids: string[]): number[] => ids.map((jobId) => Number(jobId.split('@')[1]));

  /**
   * Writes schedules `ids`, each to run once at `tick`, through `ScheduleStore.upsert` (its Lua), 64 in
   * flight on one connection, which ioredis pipelines; then sets each one's entry of the due index to
   * `dueAt(i)`, as a leader parking it would (an upsert writes no instant earlier than its own now, and a
   * slow seed would spread what it writes over many instants).
   */
  const seedOnce = async (ids: readonly string[], tick: number, dueAt: (i: number) => number): Promise<void> => {
    const checked = checkScheduleSpec(ids[0]!, { job: 'work', at: new Date(tick).toISOString() }, files, Date.now());
    if (!checked.ok) throw new Error(checked.errors.join('\n'));
    let next = 0;
    const writer = async (): Promise<void> => {
      for (let i = next++; i < ids.length; i = next++) await store.upsert(ids[i]!, checked.spec, 'seed');
    };
    await Promise.all(Array.from({ length: 64 }, writer));
    for (let i = 0; i < ids.length; i += 1_000) {
      await redis.client.zadd(store.keys.scheduleDue, 'XX', ...ids.slice(i, i + 1_000).flatMap((id, j) => [dueAt(i + j), id]));
    }
    const entries = await redis.client.zmscore(store.keys.scheduleDue, ...ids);
    assert.equal(entries.filter((entry) => entry !== null).length, ids.length);
  };
  /** A tick a few seconds off, on a whole second: `at` must be in the future when written. */
  const tickIn = (ms: number): number => Math.ceil((Date.now() + ms) / 1_000) * 1_000;
  /** Waits until every one of `ids` has run its one tick and left the due index, and no lane is left. */
  const allRan = async (made: Producer, ids: readonly string[]): Promise<void> => {
    await until(`all ${ids.length} schedules run and parked`, async () => made.laneCounts().schedules === 0 && (await redis.client.zcard(store.keys.scheduleDue)) === 0, 30_000, 100);
  };
  /**
   * The audit, from Redis and BullMQ: every one of `ids` has exactly one BullMQ job, of `tick`, and no
   * other job exists; BullMQ's event stream shows each added exactly once; the ledger records each tick
   * enqueued. Answers the jobs.
   */
  const assertEachRanOnce = async (ids: readonly string[], tick: number): Promise<Array<{ id: string; data: TickJobData }>> => {
    const queue = base.queues.get('leasebeat');
    const jobs = (await queue.getJobs(['waiting', 'delayed', 'active', 'completed', 'failed', 'prioritized'])).map((job) => ({ id: job.id ?? '', data: job.data as TickJobData }));
    const expected = ids.map((id) => `${id}@${tick}`).sort();
    const found = jobs.map((job) => job.id).sort();
    const missing = expected.filter((id) => !found.includes(id));
    assert.deepEqual(missing.slice(0, 5), [], `${missing.length} of ${ids.length} ticks not enqueued`);
    assert.deepEqual(found, expected, 'one job per schedule, of its tick, and no other job');
    // An add of a job id BullMQ already holds is refused (event "duplicated"), so the jobs alone could
    // hide a second add: count the adds in the event stream. Under BullMQ's 10,000 events, none trimmed.
    const events = await redis.client.xrange(queue.keys.events!, '-', '+');
    assert.ok(events.length < 10_000, `the event stream holds ${events.length} events: trimmed, the audit would miss adds`);
    const adds = new Map<string, number>();
    for (const [, fields] of events) {
      const event = fields[fields.indexOf('event') + 1];
      if (event === 'added') adds.set(fields[fields.indexOf('jobId') + 1]!, (adds.get(fields[fields.indexOf('jobId') + 1]!) ?? 0) + 1);
    }
    const addedTwice = [...adds].filter(([, n]) => n !== 1).map(([id, n]) => `${id} ×${n}`);
    assert.deepEqual(addedTwice.slice(0, 5), [], `${addedTwice.length} runs added more than once`);
    assert.deepEqual([...adds.keys()].sort(), expected, 'every run added exactly once');
    const states = await Promise.all(ids.map((id) => base.ledger.tickState(id, tick)));
    const unrecorded = ids.filter((id, i) => !states[i]?.startsWith('enqueued|'));
    assert.deepEqual(unrecorded.slice(0, 5), [], `${unrecorded.length} ticks not recorded enqueued in the ledger`);
    return jobs;
  };

  it('holds no lane for a schedule whose next tick is far off: the due index holds its next tick', { timeout: 60_000 }, async () => {
    for (let i = 0; i < 50; i++) await upsert(`yearly-${i}`, { schedule: '0 0 1 1 *' });
    for (let i = 0; i < 50; i++) await upsert(`written-${i}`, { schedule: '0 0 1 1 *' }, true);
    // A write that says nothing makes its schedule due at once: a leader looks at it as soon as it can.
    assert.ok((await dueAt('yearly-0'))! <= Date.now() + 50);
    // The API's writes are due by their first tick: no leader looks at them before it draws near.
    const nextNewYear = Date.UTC(new Date().getUTCFullYear() + 1, 0, 1);
    assert.equal(await dueAt('written-0'), nextNewYear);
    let takenOver: number | undefined;
    const made = producer((jobs) => (takenOver = jobs));
    await producing(made, async () => {
      await until('the takeover', () => takenOver !== undefined);
      // The file job type's lane, and the 50 schedules found due in the index; none of the API's.
      assert.equal(takenOver, 51);
      await until('every schedule parked', () => made.laneCounts().schedules === 0);
      for (let i = 0; i < 50; i++) assert.equal(await dueAt(`written-${i}`), nextNewYear, `written-${i}`);
      // The instant the lane must act again: its next tick less the staging horizon (it has no jitter).
      for (let i = 0; i < 50; i++) assert.equal(await dueAt(`yearly-${i}`), nextNewYear - STAGE_AHEAD_MS, `yearly-${i}`);
      assert.deepEqual(await runIds('yearly-0'), []);
    });
  });

  it('a parked schedule gets its lane again before each tick: every tick enqueued once, the lane parked between', { timeout: 60_000 }, async () => {
    await upsert('every-5s', { every: '5s' });
    const made = producer();
    const startedAt = Date.now();
    await producing(made, async () => {
      // It has a lane around a tick (about half a second: made 1.5 s before, parked once the tick is
      // staged), then parks: waited for as states, not sampled on a loaded machine's late timers.
      await until('a lane for the next tick', () => made.laneCounts().schedules === 1, 15_000, 5);
      await until('the lane to park', () => made.laneCounts().schedules === 0, 15_000, 5);
      await sleep(Math.max(0, startedAt + 17_000 - Date.now()));
    });
    const ticks = ticksOf(await runIds('every-5s'));
    assert.ok(ticks.length >= 3, `3 ticks or more in 17 s, got ${ticks.length}`);
    for (let i = 1; i < ticks.length; i++) assert.equal(ticks[i]! - ticks[i - 1]!, 5_000, `a tick lost or doubled between ${ticks[i - 1]} and ${ticks[i]}`);
    const { lastScheduledTick } = await base.ledger.jobState('every-5s');
    assert.equal(lastScheduledTick, ticks.at(-1), 'the ledger recorded every tick that ran, and no other');
  });

  it('keeps the marks of so many parked lanes only: the others are taken over from the ledger, every tick enqueued once', { timeout: 60_000 }, async () => {
    // A term used to keep the marks of every schedule it parked: a million hourly ones grew the leader's
    // heap by some 200 MiB over the hour. No worker runs here, so each staged run still waits when its lane
    // is taken over again: with no catch-up, a takeover that took it for an earlier term's would pull it.
    const ids = Array.from({ length: 30 }, (_, i) => `kept-${i}`);
    for (const id of ids) await upsert(id, { every: '5s', catchup: { mode: 'none' } });
    const made = producer(undefined, storedSchedules(), undefined, 10);
    let mostKept = 0;
    const startedAt = Date.now();
    await producing(made, async () => {
      // Sampled while the lanes come and go (made before each tick, parked between) over three ticks or more.
      while (Date.now() < startedAt + 17_000) {
        mostKept = Math.max(mostKept, made.laneCounts().parked);
        await sleep(20);
      }
    });
    assert.equal(mostKept, 10, 'marks kept up to the limit, and no more');
    for (const id of ids) {
      const ticks = ticksOf(await runIds(id));
      assert.ok(ticks.length >= 3, `${id}: 3 ticks or more in 17 s, got ${ticks.length}`);
      for (let i = 1; i < ticks.length; i++) assert.equal(ticks[i]! - ticks[i - 1]!, 5_000, `${id}: a tick lost or doubled between ${ticks[i - 1]} and ${ticks[i]}`);
      assert.equal((await base.ledger.jobState(id)).lastScheduledTick, ticks.at(-1), `${id}: the ledger recorded every tick that ran, and no other`);
    }
  });

  it('an edit of a parked schedule applies at once, and an edit the producer was not told of is found by a resync', { timeout: 60_000 }, async () => {
    await upsert('told', { schedule: '0 0 1 1 *' });
    await upsert('untold', { schedule: '0 0 1 1 *' });
    const made = producer();
    await producing(made, async () => {
      await until('both parked', async () => made.laneCounts().schedules === 0 && (await dueAt('told'))! > Date.now() + 86_400_000);
      const editedAt = Date.now();
      await upsert('told', { every: '2s' });
      made.schedulesChanged(['told']);
      await until('a run of the edited schedule', async () => (await runIds('told')).length > 0, 10_000);
      assert.ok(ticksOf(await runIds('told'))[0]! > editedAt, 'no tick of the time before the edit');
      // The feed lost this one: its write made it due at once, and a resync reads the index afresh.
      await upsert('untold', { every: '2s' });
      await sleep(3_000);
      made.schedulesResync();
      await until('a run of the schedule edited behind the producer’s back', async () => (await runIds('untold')).length > 0, 10_000);
    });
  });

  it('a change told while the last one is being followed gets its lane at once, not a resync interval later', { timeout: 60_000 }, async () => {
    let takenOver = false;
    const made = producer(() => (takenOver = true));
    await producing(made, async () => {
      await until('the takeover', () => takenOver);
      // Written after the first scan read the index: only what the producer is told makes their lanes.
      await upsert('told-first', { every: '2s' });
      await upsert('told-during', { every: '2s' });
      made.schedulesChanged(['told-first']);
      // Told while the first is being read from Redis.
      setImmediate(() => made.schedulesChanged(['told-during']));
      await until('a run of the schedule told second', async () => (await runIds('told-during')).length > 0, 10_000);
    });
  });

  it('a removed schedule leaves the index and runs no more', { timeout: 60_000 }, async () => {
    await upsert('doomed', { every: '5s' });
    const made = producer();
    await producing(made, async () => {
      await until('a run', async () => (await runIds('doomed')).length > 0, 10_000);
      await until('parked', () => made.laneCounts().schedules === 0);
      await store.remove('doomed', 'test');
      made.schedulesChanged(['doomed']);
      assert.equal(await dueAt('doomed'), undefined);
      const ran = (await runIds('doomed')).length;
      await sleep(6_000);
      assert.equal((await runIds('doomed')).length, ran);
    });
  });

  // Chaos (aimed Cluster seed 1): a term claimed a staged tick whose add never landed, then lost its lease;
  // the schedule was removed before the next term took it over. Its claim stayed pending for good: the next
  // term took back only the runs it found in BullMQ, and this one was not there, though its add could land late.
  it('a schedule removed while no leader ran, with a claim whose add never landed: the next leader takes it back in its queue', { timeout: 60_000 }, async () => {
    await upsert('left', { every: '3s' });
    const writes = addsFailingWhile(redis.client, () => true);
    await producing(producer(undefined, storedSchedules(), writes), async () => void (await until('an add of left to have failed', () => writes.failed > 0, 10_000)));
    const tick = (await base.ledger.jobState('left')).lastScheduledTick!;
    const jobId = `left@${tick}`;
    assert.match((await base.ledger.tickState('left', tick)) ?? '', /^claimed\|/, 'its claim left pending');
    await store.remove('left', 'test');
    const second = new AbortController();
    const run = producer().run(term(2), second.signal);
    try {
      await until('the claim to be taken back', async () => (await base.ledger.tickState('left', tick)) === 'skipped|removed', 10_000);
    } finally {
      second.abort();
      await run;
    }
    // The first term's add lands only now: BullMQ holds the placeholder of its id in the job type's queue.
    const queue = base.queues.get('leasebeat');
    await lateStagedAdd(queue, 'left', tick, jobId);
    assert.equal(await queue.getJobState(jobId), 'unknown', 'the late add left no run');
    assert.deepEqual(await runIds('left'), []);
  });

  it('a new leader finds the schedules the last one parked, and enqueues a tick owed while no leader ran, once', { timeout: 60_000 }, async () => {
    await upsert('handed-over', { every: '5s' });
    const first = new AbortController();
    const one = producer();
    const running = one.run(term(1), first.signal);
    await until('a run, then parked', async () => (await runIds('handed-over')).length > 0 && one.laneCounts().schedules === 0, 15_000);
    first.abort();
    await running;
    const [lastOfFirst] = ticksOf(await runIds('handed-over')).slice(-1);
    // No leader until a tick has passed: the next term owes it (catch-up: the latest within 5 minutes).
    await until('a tick owed with no leader', () => Date.now() > lastOfFirst! + 5_500, 15_000);
    const second = new AbortController();
    const two = producer();
    const run = two.run(term(2), second.signal);
    try {
      await until('the owed tick', async () => ticksOf(await runIds('handed-over')).includes(lastOfFirst! + 5_000), 10_000);
    } finally {
      second.abort();
      await run;
    }
    const ticks = ticksOf(await runIds('handed-over'));
    assert.equal(new Set(ticks).size, ticks.length);
    for (let i = 1; i < ticks.length; i++) assert.equal(ticks[i]! - ticks[i - 1]!, 5_000, `a tick lost between ${ticks[i - 1]} and ${ticks[i]}`);
  });

  it('the due index is written only under the fence, and only for the version the lane ran by', async () => {
    await upsert('guarded', { schedule: '0 0 1 1 *' });
    const stored = (await store.get('guarded'))!;
    await base.ledger.raiseFence({ generation: 'gen-1', leaderTransitions: 2 }, 'leader-2', Date.now());
    // A stale term: refused.
    assert.equal(await store.park({ generation: 'gen-1', leaderTransitions: 1 }, 'guarded', stored.version, stored.updatedAt, 1), 'fenced');
    // The term of the fence, with the version stored: written.
    assert.equal(await store.park({ generation: 'gen-1', leaderTransitions: 2 }, 'guarded', stored.version, stored.updatedAt, 42), 'parked');
    assert.equal(await dueAt('guarded'), 42);
    // Edited since: the write would hide the edit, so nothing is written.
    await upsert('guarded', { schedule: '0 0 2 1 *' });
    const afterEdit = await dueAt('guarded');
    assert.equal(await store.park({ generation: 'gen-1', leaderTransitions: 2 }, 'guarded', stored.version, stored.updatedAt, 43), 'changed');
    assert.equal(await dueAt('guarded'), afterEdit);
    // Nothing more owed: it leaves the index until it is written again.
    const edited = (await store.get('guarded'))!;
    assert.equal(await store.park({ generation: 'gen-1', leaderTransitions: 2 }, 'guarded', edited.version, edited.updatedAt, undefined), 'parked');
    assert.equal(await dueAt('guarded'), undefined);
  });

  it('a takeover enqueues the ticks due now before it reads the overdue rest of the index', { timeout: 90_000 }, async () => {
    // Overdue for a minute and owing nothing now (their one tick an hour off; more than one batch of the
    // background read), as a bulk write leaves schedules due by a first tick before their write; then three
    // due now, as a stopped leader leaves the schedules it was looking at (the entry stays at its instant
    // until the lane parks).
    const overdue = Array.from({ length: 1_500 }, (_, i) => `overdue-${String(i).padStart(4, '0')}`);
    const dueNow = ['due-now-a', 'due-now-b', 'due-now-c'];
    const tick = tickIn(2_500);
    await seedOnce(overdue, tick + 3_600_000, () => Date.now() - 60_000);
    await seedOnce(dueNow, tick, () => Date.now());
    // The read of the overdue specs is held until the ticks due now are in BullMQ (at most 8 s): a takeover
    // that reads the index in order meets them only after that read.
    let dueFirst: boolean | undefined;
    const source = new WatchedSource(storedSchedules(), async (read) => {
      if (dueFirst !== undefined || !read.some((id) => id.startsWith('overdue-'))) return;
      const enqueued = async (): Promise<boolean> => (await Promise.all(dueNow.map(runIds))).every((runs) => runs.length === 1);
      dueFirst = await until('the ticks due now enqueued', enqueued, 8_000, 50).then(() => true, () => false);
    });
    let takenOver: number | undefined;
    const made = producer((jobs) => (takenOver = jobs), source);
    await producing(made, async () => {
      await until('every schedule taken over', () => takenOver !== undefined, 30_000);
      const parked = async (): Promise<boolean> => made.laneCounts().schedules === 0 && (await redis.client.zcount(store.keys.scheduleDue, '-inf', tick + 60_000)) === 0;
      await until('the due now run and every overdue one parked at its tick', parked, 30_000, 100);
    });
    assert.equal(dueFirst, true, 'the ticks due now were enqueued before the overdue schedules were read');
    assert.ok(takenOver! >= overdue.length + dueNow.length, `the takeover counted every lane it made, overdue ones too: ${takenOver}`);
    await assertEachRanOnce(dueNow, tick);
  });

  it('2,500 schedules due at one instant: read in bounded batches, each enqueued exactly once', { timeout: 60_000 }, async () => {
    const ids = Array.from({ length: 2_500 }, (_, i) => `same-${String(i).padStart(4, '0')}`);
    const tick = tickIn(5_000);
    // As `schedules.upsert` writes them (due by their first tick): 2,500 entries of the index at one score.
    await seedOnce(ids, tick, () => tick);
    assert.equal(await redis.client.zcount(store.keys.scheduleDue, tick, tick), ids.length);
    const source = new WatchedSource(storedSchedules());
    const made = producer(undefined, source);
    await producing(made, () => allRan(made, ids));
    await assertEachRanOnce(ids, tick);
    assert.ok(source.largestLoad <= PAGE, `specs read ${PAGE} at most at a time, not ${source.largestLoad}`);
  });

  it('a due read over several pages, with groups at one instant across the page ends: each enqueued exactly once', { timeout: 60_000 }, async () => {
    // Groups of one instant each, read in pages of 1,000: 400 + 600 of the 900 (the page ends inside a
    // group), 1,200 (a page of one instant, and more), 300 + 700 (the page ends with a group), 150.
    const sizes = [400, 900, 1_200, 300, 700, 150];
    const ids: string[] = [];
    const groupOf: number[] = [];
    // Ids of mixed case and digits, so that the order within an instant is not the order they were written in.
    for (const [group, size] of sizes.entries()) for (let i = 0; i < size; i++, groupOf.push(group)) ids.push(`${'aZ0m'[i % 4]}${(i * 7919) % 10_007}-g${group}`);
    const tick = tickIn(5_000);
    // Due long ago, a millisecond apart: the takeover reads them all, over four pages (after its read of
    // the entries due from a lead ago on, which finds none).
    const dueFrom = Date.now() - 60_000;
    await seedOnce(ids, tick, (i) => dueFrom + groupOf[i]!);
    const source = new WatchedSource(storedSchedules());
    const made = producer(undefined, source);
    await producing(made, () => allRan(made, ids));
    await assertEachRanOnce(ids, tick);
    const overdueRead = source.pages.filter((page) => page.length > 0).slice(0, 4).map((page) => page.length);
    assert.deepEqual(overdueRead.slice(0, 3), [PAGE, PAGE, PAGE], `the takeover read full pages: ${overdueRead.join(', ')}`);
    assert.ok(source.largestLoad <= PAGE, `specs read ${PAGE} at most at a time, not ${source.largestLoad}`);
  });

  it('a new leader while the last one reads a group due at one instant: each enqueued exactly once', { timeout: 60_000 }, async () => {
    // 300 due first, then 2,700 due together: a page ends inside the group.
    const ids = Array.from({ length: 3_000 }, (_, i) => `handover-${String(i).padStart(4, '0')}`);
    const tick = tickIn(1_500);
    const dueFrom = Date.now() - 60_000;
    await seedOnce(ids, tick, (i) => dueFrom + (i < 300 ? 0 : 1));
    // Owed when the first leader starts: each lane enqueues its tick as soon as it is made (catch-up).
    await until('the tick passed', () => Date.now() > tick + 100, 30_000);
    const second = new AbortController();
    let secondRun: Promise<void> | undefined;
    const two = producer();
    // Half way through the first leader's reads of specs, and once it has enqueued some: a second term
    // raises the fence, then the read goes on.
    const source = new WatchedSource(storedSchedules(), async (read, before) => {
      if (secondRun || before + read.length < ids.length / 2) return;
      await until('a run of the first term', async () => (await base.queues.get('leasebeat').count()) > 0, 20_000);
      secondRun = two.run(term(2), second.signal);
      await until('the fence raised by term 2', async () => (await base.ledger.fence()).leaderTransitions === 2, 20_000);
    });
    const first = new AbortController();
    const one = producer(undefined, source);
    const firstRun = one.run(term(1), first.signal);
    try {
      await until('the second term', () => secondRun !== undefined, 30_000);
      // The first term ends by itself once the fence refuses it.
      await firstRun;
      await allRan(two, ids);
    } finally {
      first.abort();
      second.abort();
      await Promise.all([firstRun, secondRun]);
    }
    const jobs = await assertEachRanOnce(ids, tick);
    const byTerm = [1, 2].map((transitions) => jobs.filter((job) => job.data.token.leaderTransitions === transitions).length);
    assert.ok(byTerm[0]! > 0 && byTerm[1]! > 0, `runs of both terms, got ${byTerm.join(' and ')}`);
  });

  it('a group of the due index at one instant is read in batches by member: none skipped or read twice as members leave', async () => {
    const key = store.keys.scheduleDue;
    const at = Date.now() + 3_600_000;
    // Ids whose byte order is not their order of writing, nor a locale's (upper case before lower, digits first).
    const ids = Array.from({ length: 2_500 }, (_, i) => `${'aZ0mB9'[i % 6]}${(i * 7919) % 10_007}${'-_.'[i % 3]}x`);
    for (let i = 0; i < ids.length; i += 1_000) await redis.client.zadd(key, ...ids.slice(i, i + 1_000).flatMap((id) => [at, id]));
    // Neighbours a millisecond either side: not of the group.
    await redis.client.zadd(key, ...Array.from({ length: 100 }, (_, i) => [at - 1, `before-${i}`, at + 1, `after-${i}`]).flat());
    const group = await redis.client.zrangebyscore(key, at, at);
    assert.equal(group.length, ids.length);
    assert.deepEqual(await store.dueExactly(at, 100), group, 'the whole group, in the index order, each once');
    assert.deepEqual(await store.dueAt(at, undefined, 10_000), group, 'one batch when the limit allows');
    assert.deepEqual(await store.dueAt(at, group.at(-1), 100), []);
    // After each batch, the last one read leaves the group (its lane parked) and so does the next one
    // (removed): read by offset, the rest would shift under the cursor and one would be skipped.
    const read: string[] = [];
    const left = new Set<string>();
    for (let batch = await store.dueAt(at, undefined, 100); batch.length > 0; batch = await store.dueAt(at, read.at(-1), 100)) {
      read.push(...batch);
      const cursor = batch.at(-1)!;
      await redis.client.zadd(key, at + 60_000, cursor);
      const next = group[group.indexOf(cursor) + 1];
      if (next !== undefined) {
        await redis.client.zrem(key, next);
        left.add(next);
      }
    }
    assert.equal(new Set(read).size, read.length, 'none read twice');
    assert.deepEqual(read, group.filter((id) => !left.has(id)), 'every one still in the group read, in order');
  });
});
