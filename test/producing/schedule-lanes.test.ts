import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { pino } from 'pino';
import { Producer } from '../../src/producing/producer.js';
import { directWrites } from '../../src/redis/durability.js';
import { KeySpace } from '../../src/redis/keys.js';
import { checkScheduleSpec, firstReviewAt } from '../../src/schedules/spec.js';
import { ScheduleStore } from '../../src/schedules/store.js';
import { StoredSchedules } from '../../src/schedules/stored-schedules.js';
import { useFreshLedger } from '../support/fresh-ledger.js';
import { useRedis } from '../support/redis-server.js';
import { jobType } from '../support/scheduled-job.js';
import { term } from '../support/term.js';
import { until } from '../support/until.js';

const logger = pino({ level: 'silent' });
/** Short leads, so that a schedule ticking every few seconds parks between its ticks: made 1.5 s before a tick, parked when it is over 3.5 s off. */
const STAGE_AHEAD_MS = 1_000;
const REVIEW_LEAD_MS = 500;

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
  const producer = (onTakenOver?: (jobs: number) => void): Producer =>
    new Producer({
      redis: redis.client,
      ledger: base.ledger,
      queues: base.queues,
      jobs: () => files,
      schedules: new StoredSchedules(store, () => files, logger),
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
      await store.remove('doomed');
      made.schedulesChanged(['doomed']);
      assert.equal(await dueAt('doomed'), undefined);
      const ran = (await runIds('doomed')).length;
      await sleep(6_000);
      assert.equal((await runIds('doomed')).length, ran);
    });
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
});
