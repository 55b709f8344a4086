import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import { Queue, Worker, type Job } from 'bullmq';
import { pino } from 'pino';
import { BackfillError, createAdmin, type Admin, type BackfillOptions, type BackfillProgress } from '../../src/index.js';
import { KeySpace } from '../../src/redis/keys.js';
import { QueueSet } from '../../src/redis/queue-set.js';
import { TickLedger, type FencingToken } from '../../src/ledger/tick-ledger.js';
import { tickJobId, type TickJobData } from '../../src/ledger/job-data.js';
import type { ScheduledJob } from '../../src/scheduling/define-job.js';
import { useRedis } from '../support/redis-server.js';
import { scheduledJob } from '../support/scheduled-job.js';
import { producerTerms, type RunningTerm } from '../support/term.js';
import { until } from '../support/until.js';

const logger = pino({ level: 'silent' });
const keys = new KeySpace();
const MINUTE = 60_000;
const QUEUE = 'backfill-test';
/** The term that recorded the job's past before the tests' leaders (the fence moves on from it). */
const EARLIER: FencingToken = { generation: 'gen-1', leaderTransitions: 0 };

describe('backfill: the ticks of a range the ledger has no run of, once, under the current term', () => {
  const redis = useRedis();
  let ledger: TickLedger;
  let queues: QueueSet;
  let admin: Admin;
  let jobs: Map<string, ScheduledJob>;
  /** The range's 21 ticks (k = 0..20, a minute apart), and which of them the ledger has no run of. */
  let ticks: number[];
  let missing: number[];

  const { lead, stopAll } = producerTerms(() => ({ redis: redis.client, ledger, queues, jobs: () => jobs, stillLeading: () => true, logger }));
  /** The backfill runs in BullMQ, by tick. */
  const backfillRuns = async (): Promise<Array<Job<TickJobData>>> => {
    const queue = new Queue(QUEUE, { connection: redis.client });
    try {
      const all = (await queue.getJobs(['waiting', 'delayed', 'active', 'completed', 'failed', 'prioritized'])) as Array<Job<TickJobData>>;
      return all.filter((job) => job.data.backfill !== undefined).sort((a, b) => a.data.tick - b.data.tick);
    } finally {
      await queue.close();
    }
  };
  const ended = (id: string): Promise<BackfillProgress> =>
    until(`backfill ${id} to end`, async () => (await admin.backfills('sweep')).find((b) => b.id === id && (b.state === 'done' || b.state === 'failed')), 30_000);
  const backfill = async (options: Partial<BackfillOptions> = {}): Promise<BackfillProgress> => {
    const requested = await admin.backfill('sweep', { from: ticks[0]!, to: ticks.at(-1)!, rate: 1_000, by: 'tester', ...options });
    return ended(requested.id);
  };

  redis.beforeClose(async () => {
    await stopAll();
    await queues?.close();
    await admin?.close();
  });
  beforeEach(async () => {
    await stopAll();
    await queues?.close();
    await admin?.close();
    await redis.client.flushall();
    ledger = new TickLedger(redis.client, keys);
    queues = new QueueSet({ connection: redis.client });
    jobs = new Map([['sweep', scheduledJob({ name: 'sweep', schedule: '* * * * *', queue: QUEUE, handler: () => undefined })]]);
    admin = createAdmin({ connection: redis.client, jobs: () => jobs });
    // The job's past, recorded by an earlier term before any leader of the tests took it over: ticks 0, 1
    // and 20 ran, 5 was skipped on its own, 10..12 in a skipped range; the rest has no record at all.
    const [seconds] = await redis.client.time();
    const base = Math.floor((Number(seconds) * 1000) / MINUTE) * MINUTE - 40 * MINUTE;
    ticks = Array.from({ length: 21 }, (_, k) => base + k * MINUTE);
    assert.deepEqual(await ledger.raiseFence(EARLIER, 'seeder', Date.now()), { ok: true });
    for (const k of [0, 1, 20]) {
      const jobId = tickJobId('sweep', ticks[k]!);
      assert.equal((await ledger.claim(EARLIER, 'sweep', ticks[k]!, jobId)).kind, 'claimed');
      assert.equal(await ledger.confirm(EARLIER, 'sweep', ticks[k]!, jobId, Date.now()), 'enqueued');
    }
    assert.equal((await ledger.claim(EARLIER, 'sweep', ticks[5]!, tickJobId('sweep', ticks[5]!), { skip: 'overlap' })).kind, 'skipped');
    assert.equal(await ledger.skipRange(EARLIER, 'sweep', { from: ticks[10]!, to: ticks[12]!, count: 3, reason: 'catchup-limit' }), 'recorded');
    missing = ticks.filter((_, k) => ![0, 1, 5, 10, 11, 12, 20].includes(k));
  });

  /**
   * Starts a leader and waits until it has taken the job over: its catch-up recorded (the skips of the
   * ticks since the watermark, which tests count), and the job marked reviewed by it, the takeover's last step.
   */
  const leadAndTakeOver = async (transitions = 1): Promise<{ stop: AbortController; run: Promise<void> }> => {
    const leader = lead(transitions);
    await until('the takeover of sweep', async () => (await redis.client.hget(keys.jobState('sweep'), 'reviewedBy')) === `gen-1|${transitions}`);
    return leader;
  };

  it('enqueues exactly the ticks with no run, once each, marked as backfill runs; lists the others by fate; leaves the live lane alone', async () => {
    await leadAndTakeOver();
    const progress = await backfill();
    assert.equal(progress.state, 'done');
    assert.deepEqual({ total: progress.total, done: progress.done, enqueued: progress.enqueued }, { total: 21, done: 21, enqueued: missing.length });
    assert.deepEqual(progress.listed, { ran: 3, skipped: 4, pruned: 0, later: 0, overlapSkipped: 0 });
    const runs = await backfillRuns();
    assert.deepEqual(runs.map((run) => run.id), missing.map((tick) => tickJobId('sweep', tick)));
    for (const run of runs) {
      assert.equal(run.data.backfill, progress.id);
      assert.deepEqual(run.data.token, { generation: 'gen-1', leaderTransitions: 1 });
      assert.equal(await ledger.tickState('sweep', run.data.tick), `enqueued|${run.id}`);
    }
    // The live lane's bookkeeping: nothing of the backfill is pending there, its watermark and last run are its own.
    const state = await ledger.jobState('sweep');
    assert.ok(state.lastScheduledTick! >= ticks[20]!);
    assert.ok(!missing.includes(state.lastJobTick!), 'a backfill run does not become the previous run of the live ticks');
    assert.deepEqual(await ledger.backfillPendingTicks('sweep'), []);
    assert.ok((await ledger.pendingTicks('sweep')).every((tick) => !missing.includes(tick)));
    const [audit] = await admin.history('sweep', { limit: 1 });
    assert.equal(audit?.action, 'backfill');
    assert.equal(audit?.by, 'tester');
  });

  it('run again, it enqueues nothing: every tick is listed', async () => {
    await leadAndTakeOver();
    await backfill();
    const again = await backfill();
    assert.equal(again.enqueued, 0);
    assert.deepEqual(again.listed, { ran: 3 + missing.length, skipped: 4, pruned: 0, later: 0, overlapSkipped: 0 });
    assert.equal((await backfillRuns()).length, missing.length);
  });

  it('with includeSkipped it runs the skipped ticks too (a single record and a range), each once', async () => {
    await leadAndTakeOver();
    await backfill();
    const skipped = [5, 10, 11, 12].map((k) => ticks[k]!);
    const skipsBefore = sum(Object.values((await ledger.jobState('sweep')).skipped));
    const withSkipped = await backfill({ includeSkipped: true });
    // Run now, they are skipped no more: the job's skip counts (describe's "skips by reason") drop by as many.
    assert.equal(sum(Object.values((await ledger.jobState('sweep')).skipped)), skipsBefore - skipped.length);
    assert.equal(withSkipped.enqueued, skipped.length);
    assert.deepEqual(withSkipped.listed, { ran: 3 + missing.length, skipped: 0, pruned: 0, later: 0, overlapSkipped: 0 });
    for (const tick of skipped) assert.equal(await ledger.tickState('sweep', tick), `enqueued|${tickJobId('sweep', tick)}`);
    const again = await backfill({ includeSkipped: true });
    assert.equal(again.enqueued, 0);
    assert.deepEqual((await backfillRuns()).map((run) => run.data.tick), [...missing, ...skipped].sort((a, b) => a - b));
  });

  it('overlap skip: while its previous run is unfinished (no worker takes it), each tick is recorded skipped', async () => {
    await leadAndTakeOver();
    const progress = await backfill({ overlap: 'skip' });
    assert.equal(progress.enqueued, 1);
    assert.equal(progress.listed.overlapSkipped, missing.length - 1);
    assert.deepEqual((await backfillRuns()).map((run) => run.data.tick), [missing[0]]);
    for (const tick of missing.slice(1)) assert.equal(await ledger.tickState('sweep', tick), 'skipped|overlap');
  });

  it('overlap skip with includeSkipped: a skipped tick skipped again is counted once, for its new reason', async () => {
    await leadAndTakeOver();
    const skipsBefore = sum(Object.values((await ledger.jobState('sweep')).skipped));
    const progress = await backfill({ overlap: 'skip', includeSkipped: true });
    assert.equal(progress.enqueued, 1);
    // Every tick it decided but the one it ran is skipped now: the missing ones newly, the skipped ones again.
    const { skipped } = await ledger.jobState('sweep');
    assert.equal(skipped.overlap, progress.listed.overlapSkipped);
    assert.equal(sum(Object.values(skipped)), skipsBefore + (missing.length - 1));
  });

  it('overlap allow adds every run without waiting for the earlier ones; bufferAll adds one at a time, each once the previous finished', async () => {
    await leadAndTakeOver();
    // No worker: allow does not wait for runs that never finish.
    const allowed = await backfill({ overlap: 'allow', to: ticks[4]! });
    assert.equal(allowed.enqueued, 3);
    let active = 0;
    let mostAtOnce = 0;
    const worker = new Worker(
      QUEUE,
      async (job: Job<TickJobData>) => {
        // The allowed runs wait for this worker too: only the buffered backfill's are counted.
        if (job.data.backfill === undefined || job.data.backfill === allowed.id) return;
        mostAtOnce = Math.max(mostAtOnce, ++active);
        await new Promise((resolve) => setTimeout(resolve, 20));
        active--;
      },
      { connection: redis.client.duplicate({ maxRetriesPerRequest: null }), concurrency: 4 },
    );
    try {
      const buffered = await backfill({ overlap: 'bufferAll', from: ticks[5]! });
      assert.equal(buffered.enqueued, missing.length - 3);
      assert.equal(buffered.listed.overlapSkipped, 0);
      await until('every backfill run to complete', async () => (await backfillRuns()).every((run) => run.finishedOn !== undefined) || undefined);
      assert.equal(mostAtOnce, 1);
    } finally {
      await worker.close();
    }
  });

  it('a leader that has not noticed it lost (its term still running) is fenced off its backfill; the next term completes it, each tick once', async () => {
    await leadAndTakeOver(1);
    const requested = await admin.backfill('sweep', { from: ticks[0]!, to: ticks[20]!, rate: 4, by: 'tester' });
    await until('the backfill to be under way', async () => ((await admin.backfills('sweep'))[0]!.enqueued >= 2 ? true : undefined));
    // Term 2 raises the fence while term 1 goes on: term 1's next backfill step is refused by the fence.
    lead(2);
    const progress = await ended(requested.id);
    assert.equal(progress.enqueued, missing.length);
    assert.deepEqual((await backfillRuns()).map((run) => run.data.tick), missing);
    assert.ok(Number((await ledger.fence()).fenced) >= 1, 'term 1 met the fence');
    assert.deepEqual(await ledger.backfillPendingTicks('sweep'), []);
  });

  it('the live ticks of another job go on being recorded while a backfill runs', async () => {
    jobs.set('pulse', scheduledJob({ name: 'pulse', schedule: '* * * * * *', queue: 'pulse-q', handler: () => undefined }));
    await leadAndTakeOver();
    const watermark = async (): Promise<number> => Number((await redis.client.hget(keys.jobState('pulse'), 'lastScheduledTick')) ?? 0);
    const requested = await admin.backfill('sweep', { from: ticks[0]!, to: ticks[20]!, rate: 1, by: 'tester' });
    await until('the backfill to be under way', async () => ((await admin.backfills('sweep'))[0]!.enqueued >= 1 ? true : undefined));
    const before = await watermark();
    await until('three more live ticks of pulse', async () => (await watermark()) >= before + 3_000);
    const meanwhile = (await admin.backfills('sweep')).find((b) => b.id === requested.id)!;
    assert.equal(meanwhile.state, 'running', 'the live ticks were recorded while the backfill ran');
    assert.ok(meanwhile.enqueued < missing.length);
  });

  it('survives a leader change mid-way: the next term finishes the claim the last one left pending and resumes at the cursor; no tick runs twice, none is missed', async () => {
    await leadAndTakeOver(1);
    const requested = await admin.backfill('sweep', { from: ticks[0]!, to: ticks[20]!, rate: 4, by: 'tester' });
    await until('the backfill to be under way', async () => ((await admin.backfills('sweep'))[0]!.enqueued >= 3 ? true : undefined));
    await stopAll();
    const halfway = (await admin.backfills('sweep'))[0]!;
    assert.equal(halfway.state, 'running');
    assert.ok(halfway.enqueued < missing.length, 'the first term did not finish it');
    // Term 1 dies between a claim and its add: the claim is left pending, its run never added.
    const cursor = Number(await redis.client.hget(keys.backfill(requested.id), 'cursor'));
    const next = missing.find((tick) => tick > cursor)!;
    // As term 1's own walk would: the ticks between the cursor and the next missing one are listed first
    // (ran or skipped), so the claim takes the cursor no further than its own tick.
    const between = ticks.filter((tick) => tick > cursor && tick < next);
    if (between.length > 0) {
      const listed = await ledger.stepBackfill(term1Token, { job: 'sweep', backfill: requested.id, mode: 'list', ticks: between.map((tick) => ({ tick, jobId: tickJobId('sweep', tick) })), includeSkipped: false, reachMs: 0, now: Date.now(), others: [] });
      assert.notEqual(listed.kind, 'fenced');
    }
    const claimed = await ledger.claimBackfill(term1Token, { job: 'sweep', backfill: requested.id, ticks: [{ tick: next, jobId: tickJobId('sweep', next) }], includeSkipped: false, reachMs: 0, now: Date.now(), others: [] });
    assert.deepEqual(claimed.kind === 'claims' && claimed.ticks, ['claimed']);
    assert.deepEqual(await ledger.backfillPendingTicks('sweep'), [next]);
    lead(2);
    const progress = await ended(requested.id);
    assert.equal(progress.state, 'done');
    assert.equal(progress.enqueued, missing.length);
    assert.equal(progress.done, 21);
    const runs = await backfillRuns();
    assert.deepEqual(runs.map((run) => run.data.tick), missing, 'each missing tick once, none else');
    // The claim left pending was finished by the backfill of term 2, not taken by the live takeover as a late tick.
    assert.equal(await ledger.tickState('sweep', next), `enqueued|${tickJobId('sweep', next)}`);
    assert.deepEqual(runs.find((run) => run.data.tick === next)!.data.token, { generation: 'gen-1', leaderTransitions: 2 });
    assert.deepEqual(await ledger.backfillPendingTicks('sweep'), []);
  });

  /**
   * Overlap allow at 1,000/s claims 50 ticks a script: the whole range is one batch. One run of it cannot
   * be added (its deduplication key is of the wrong type: BullMQ's add script fails on it, the others of the
   * bulk add land), so the batch is claimed, part added, never confirmed. `handOver` ends term 1 and
   * brings in the next term; then the fault is cleared.
   */
  const batchWithFailedAdd = async (handOver: (term1: RunningTerm) => Promise<void>): Promise<void> => {
    const term1 = await leadAndTakeOver(1);
    const faulty = missing[5]!;
    const faultKey = `bull:${QUEUE}:de:${tickJobId('sweep', faulty)}`;
    await redis.client.hset(faultKey, 'fault', '1');
    const requested = await admin.backfill('sweep', { from: ticks[0]!, to: ticks[20]!, rate: 1_000, by: 'tester' });
    // One claim script decided the range: every tick, and every missing one claimed, none confirmed.
    const claimed = await until('the batch to be claimed', async () => {
      const progress = (await admin.backfills('sweep'))[0]!;
      return progress.enqueued === missing.length && (await ledger.backfillPendingTicks('sweep')).length === missing.length ? progress : undefined;
    });
    assert.deepEqual({ done: claimed.done, enqueued: claimed.enqueued, listed: claimed.listed }, { done: 21, enqueued: missing.length, listed: { ran: 3, skipped: 4, pruned: 0, later: 0, overlapSkipped: 0 } });
    assert.deepEqual((await backfillRuns()).map((run) => run.data.tick), missing.filter((tick) => tick !== faulty), 'the bulk add failed part way: all but one run landed');
    await handOver(term1);
    await redis.client.del(faultKey);
    const progress = await ended(requested.id);
    assert.equal(progress.state, 'done', progress.error);
    assert.deepEqual({ done: progress.done, enqueued: progress.enqueued, listed: progress.listed }, { done: 21, enqueued: missing.length, listed: { ran: 3, skipped: 4, pruned: 0, later: 0, overlapSkipped: 0 } }, 'nothing counted twice');
    const runs = await backfillRuns();
    assert.deepEqual(runs.map((run) => run.data.tick), missing, 'each missing tick once, none else');
    for (const run of runs) {
      assert.equal(await ledger.tickState('sweep', run.data.tick), `enqueued|${run.id}`);
      // The runs that landed kept term 1's add; the one that failed was added by term 2.
      assert.equal(run.data.token.leaderTransitions, run.data.tick === faulty ? 2 : 1);
    }
    assert.deepEqual(await ledger.backfillPendingTicks('sweep'), []);
  };

  it('overlap allow: a batch whose bulk add fails part way is left pending; after a leader change the next term finishes each claim once, counters exact', async () => {
    await batchWithFailedAdd(async () => {
      await stopAll();
      lead(2);
    });
  });

  it('overlap allow: the term that claimed a batch is fenced before its adds are all in; the next term finishes each claim once, counters exact', async () => {
    await batchWithFailedAdd(async (term1) => {
      // Term 1 goes on (it does not know it lost): its next step, the retry of the batch, meets the fence and ends it.
      lead(2);
      await term1.run;
      assert.ok(Number((await ledger.fence()).fenced) >= 1, 'term 1 met the fence');
    });
  });

  it('refuses a range the ledger may have pruned, and a job no leader has scheduled: a BackfillError naming the option, nothing stored', async () => {
    // The job has been owed its ticks for 3 h; retention keeps 1 h: records from 3 h to 1 h ago may be gone.
    const [seconds] = await redis.client.time();
    const now = Number(seconds) * 1000;
    await ledger.takeOverStates([{ job: 'sweep', stagedWithinMs: 0 }], now - 180 * MINUTE);
    await assert.rejects(
      admin.backfill('sweep', { from: now - 170 * MINUTE, to: now - 160 * MINUTE }),
      (error: unknown) => error instanceof BackfillError && error.option === 'from' && /may be pruned, and a pruned tick may have run; give --from \S+ or later/.test(error.problem),
    );
    jobs.set('fresh', scheduledJob({ name: 'fresh', schedule: '* * * * *', queue: QUEUE, handler: () => undefined }));
    await assert.rejects(admin.backfill('fresh', { from: ticks[0]!, to: ticks[1]! }), (error: unknown) => error instanceof BackfillError && error.option === 'job');
    assert.deepEqual(await redis.client.keys('*backfill*'), []);
  });

  it('leaves to the live lane the ticks within its staging reach of the watermark: listed as later, not claimed', async () => {
    // No leader: the earlier term is the fence's; its watermark is tick 20.
    await ledger.takeOverStates([{ job: 'sweep', stagedWithinMs: 0 }], Date.now());
    const requested = await admin.backfill('sweep', { from: ticks[0]!, to: ticks[20]! });
    const step = await ledger.stepBackfill(EARLIER, {
      job: 'sweep', backfill: requested.id, mode: 'list', ticks: ticks.map((tick) => ({ tick, jobId: tickJobId('sweep', tick) })),
      includeSkipped: false, reachMs: 25 * MINUTE, now: Date.now(), others: [],
    });
    assert.deepEqual(step, { kind: 'decided', cursor: ticks[20], fate: '' });
    const progress = (await admin.backfills('sweep'))[0]!;
    assert.deepEqual(progress.listed, { ran: 3, skipped: 4, pruned: 0, later: missing.length, overlapSkipped: 0 });
    assert.equal(progress.enqueued, 0);
    assert.deepEqual(await ledger.backfillPendingTicks('sweep'), []);
  });

  it('never runs a tick whose record was pruned; runs those before every backfilled span', async () => {
    await leadAndTakeOver();
    await backfill();
    // Retention forgets every record of the range (the first backfill's runs, the earlier term's records).
    const [seconds] = await redis.client.time();
    await ledger.prune('sweep', Number(seconds) * 1000 - 10 * MINUTE);
    assert.equal(await ledger.tickState('sweep', missing[0]!), undefined);
    const again = await backfill();
    assert.equal(again.enqueued, 0);
    assert.equal(again.listed.pruned, 21, 'no record, but decided by the earlier backfill: it may have run');
    // Ticks before any backfill's span were never recorded: they are backfilled.
    const before = await backfill({ from: ticks[0]! - 5 * MINUTE, to: ticks[0]! - MINUTE });
    assert.equal(before.enqueued, 5);
    assert.equal((await backfillRuns()).length, missing.length + 5);
  });

  it('retention does not prune a pending backfill claim: it tells the next leader the run may be in BullMQ', async () => {
    await leadAndTakeOver();
    const requested = await admin.backfill('sweep', { from: ticks[0]!, to: ticks[20]!, rate: 1, by: 'tester' });
    await until('the first backfill claim', async () => ((await admin.backfills('sweep'))[0]!.enqueued >= 1 ? true : undefined));
    await stopAll();
    const cursor = Number(await redis.client.hget(keys.backfill(requested.id), 'cursor'));
    const next = missing.find((tick) => tick > cursor)!;
    const claimed = await ledger.claimBackfill(term1Token, { job: 'sweep', backfill: requested.id, ticks: [{ tick: next, jobId: tickJobId('sweep', next) }], includeSkipped: false, reachMs: 0, now: Date.now(), others: [] });
    assert.deepEqual(claimed.kind === 'claims' && claimed.ticks, ['claimed']);
    const [seconds] = await redis.client.time();
    await ledger.prune('sweep', Number(seconds) * 1000);
    assert.equal(await ledger.tickState('sweep', next), `claimed|gen-1|1|${tickJobId('sweep', next)}`);
    assert.equal(await ledger.tickState('sweep', missing[0]!), undefined, 'a confirmed one is pruned');
  });
});

const term1Token: FencingToken = { generation: 'gen-1', leaderTransitions: 1 };

function sum(values: number[]): number {
  return values.reduce((total, value) => total + value, 0);
}
