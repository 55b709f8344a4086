import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import type { Redis } from 'ioredis';
import { pino, type Logger } from 'pino';
import { Producer } from '../../src/producing/producer.js';
import { KeySpace } from '../../src/redis/keys.js';
import type { JobHandler, OverlapPolicy, ScheduledJob } from '../../src/scheduling/define-job.js';
import { RunCancelledError, RunTerminatedError } from '../../src/workers/run-deadline.js';
import { RunStopFeed } from '../../src/workers/run-stops.js';
import type { RunOutcome, WorkerPool } from '../../src/workers/worker-pool.js';
import { useFreshLedger } from '../support/fresh-ledger.js';
import { useRedis } from '../support/redis-server.js';
import { scheduledJob } from '../support/scheduled-job.js';
import { term } from '../support/term.js';
import { until } from '../support/until.js';
import { testWorkerPool } from '../support/worker-pool.js';

const silent = pino({ level: 'silent' });

/** One run of the job as its handler saw it, on the instance whose pool ran it. */
interface SeenRun {
  tick: number;
  instance: string;
  start: number;
  /** When the handler returned (undefined while it runs). */
  end: number | undefined;
  /** Its signal's reason, once aborted. */
  reason: unknown;
}

/**
 * cancelOther and terminateOther across instances: the previous run is active on instance A while the lane
 * of the leader (this test's producer, with instance B's pool) asks it to stop. Nothing but Redis joins
 * them: the lane knows no pool, and each pool hears stop requests on its own subscriber connection.
 */
describe('Overlap cancelOther / terminateOther: the previous run is stopped through Redis, on whichever instance it runs', () => {
  const redis = useRedis();
  const base = useFreshLedger(redis);
  const pools: WorkerPool[] = [];
  const connections: Redis[] = [];
  const producing: Array<{ stop: AbortController; run: Promise<void> }> = [];
  /** Every handler's end on any instance, as `leasebeat_runs_finished_total{outcome}` counts it. */
  const outcomes: RunOutcome[] = [];

  afterEach(async () => {
    outcomes.splice(0);
    const leaders = producing.splice(0);
    for (const { stop } of leaders) stop.abort();
    await Promise.all(leaders.map(({ run }) => run));
    await Promise.all(pools.splice(0).map((pool) => pool.close(1_000)));
    for (const connection of connections.splice(0)) connection.disconnect();
  });

  /**
   * An instance's worker pool running `job` with `handler` (told its instance), hearing stop requests
   * through its own connection to Redis.
   */
  function instance(name: string, definition: (handler: JobHandler) => ScheduledJob, handler: (instance: string) => JobHandler, logger: Logger = silent): void {
    const connection = redis.server.client();
    connections.push(connection);
    const metrics = { started: () => undefined, notRunAgain: () => undefined, finishUnrecorded: () => undefined, finished: (job: string, outcome: RunOutcome) => outcomes.push(outcome) };
    const pool = testWorkerPool({ connection, logger, identity: name, runStops: new RunStopFeed(connection, new KeySpace(), logger), metrics });
    const job = definition(handler(name));
    pool.update(new Map([[job.name, job]]));
    pools.push(pool);
  }

  /** A leader producing `job` in term `transitions`. */
  function produce(job: ScheduledJob, transitions = 1): void {
    const stop = new AbortController();
    const producer = new Producer({ redis: redis.client, ledger: base.ledger, queues: base.queues, jobs: () => new Map([[job.name, job]]), stillLeading: () => true, logger: silent });
    producing.push({ stop, run: producer.run(term(transitions), stop.signal) });
  }

  /**
   * A handler that records its runs in `seen`; the first run (`first` decides how it meets its signal) is
   * the long one, later runs end after 100 ms.
   */
  function recording(seen: SeenRun[], first: 'honours' | 'ignores', release: Promise<void>): (instance: string) => JobHandler {
    return (instance) => async (_job, ctx) => {
      const run: SeenRun = { tick: ctx.tick.getTime(), instance, start: Date.now(), end: undefined, reason: undefined };
      const isFirst = seen.length === 0;
      seen.push(run);
      ctx.signal.addEventListener('abort', () => {
        run.reason = ctx.signal.reason as unknown;
      }, { once: true });
      try {
        if (!isFirst) return await new Promise((resolve) => setTimeout(resolve, 100));
        if (first === 'honours') return await new Promise((_, reject) => ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason as Error), { once: true }));
        return await release;
      } finally {
        run.end = Date.now();
      }
    };
  }

  const jobOf = (overlap: OverlapPolicy, fields: { timeoutGrace?: string } = {}) => (handler: JobHandler) =>
    scheduledJob({ name: 'sync', every: '2s', overlap, attempts: 3, ...fields, handler });

  /** Starts A, the leader, then B once the first run is active on A; returns the first run. */
  async function firstRunOnA(overlap: OverlapPolicy, seen: SeenRun[], first: 'honours' | 'ignores', release: Promise<void>, fields: { timeoutGrace?: string } = {}, logger?: Logger): Promise<SeenRun> {
    const definition = jobOf(overlap, fields);
    instance('A', definition, recording(seen, first, release), logger);
    produce(definition(() => undefined));
    const running = await until('the first run to be active on A', () => seen[0], 10_000);
    instance('B', definition, recording(seen, first, release), logger);
    return running;
  }

  const bullJob = (tick: number) => base.queues.get('leasebeat').getJob(`sync@${tick}`);

  it('cancelOther: the run active on A is aborted through Redis, fails with the cancel error (not retried), and the new tick starts only once it stopped', { timeout: 30_000 }, async () => {
    const seen: SeenRun[] = [];
    const first = await firstRunOnA('cancelOther', seen, 'honours', new Promise(() => undefined));
    assert.equal(first.instance, 'A');
    const second = await until('the next tick to run', () => seen[1], 10_000);
    assert.ok(first.reason instanceof RunCancelledError, `the handler on A saw its signal abort with the cancel error (got ${String(first.reason)})`);
    assert.equal(first.reason.byTick, second.tick, 'cancelled by the tick that runs next');
    assert.ok(first.end !== undefined && second.start >= first.end, 'the new tick started only once the cancelled run had stopped');
    const cancelled = await until('the cancelled run to fail', async () => {
      const job = await bullJob(first.tick);
      return job?.finishedOn !== undefined && job;
    }, 10_000);
    assert.match(cancelled.failedReason, new RegExp(`^run sync@${first.tick} was cancelled by tick ${new Date(second.tick).toISOString()} \\(overlap cancelOther\\)$`));
    assert.equal(cancelled.attemptsMade, 1, 'a cancelled run is not retried');
    assert.ok(outcomes.includes('stopped') && !outcomes.includes('failed'), `counted as stopped by its policy, no failure: ${outcomes.join(', ')}`);
    const added = await bullJob(second.tick);
    assert.ok(added && added.timestamp >= cancelled.finishedOn!, 'the new tick was added only after the cancelled run failed');
    await until('a third tick to run', () => seen.length >= 3, 10_000);
    const ticks = seen.map((run) => run.tick);
    assert.deepEqual(ticks, [...new Set(ticks)].sort((a, b) => a - b), 'no tick ran twice; in tick order');
  });

  it('cancelOther across a term change: the next leader keeps the new tick buffered until the cancelled run has stopped', { timeout: 40_000 }, async () => {
    const seen: SeenRun[] = [];
    let release: () => void = () => undefined;
    const stuck = new Promise<void>((resolve) => (release = resolve));
    try {
      // A long grace: the cancelled run stops only when the test lets its handler return.
      const first = await firstRunOnA('cancelOther', seen, 'ignores', stuck, { timeoutGrace: '60s' });
      const buffered = await until('the next tick buffered behind the cancelled run', async () => {
        const [tick] = await base.ledger.pendingTicks('sync');
        return first.reason instanceof RunCancelledError && tick !== undefined && (await base.ledger.tickState('sync', tick))?.startsWith('buffered|') && tick;
      }, 10_000);
      const term1 = producing.shift()!;
      term1.stop.abort();
      await term1.run;
      produce(jobOf('cancelOther', { timeoutGrace: '60s' })(() => undefined), 2);
      await until('the second term to tick past the buffered tick', async () => ((await base.ledger.jobState('sync')).lastScheduledTick ?? 0) > buffered + 2_000, 15_000);
      assert.match((await base.ledger.tickState('sync', buffered)) ?? '', /^buffered\|/, 'still buffered while the cancelled run has not stopped');
      assert.equal(seen.length, 1, 'nothing ran beside the cancelled run');
      release();
      const second = await until('the buffered tick to run', () => seen[1], 10_000);
      assert.equal(second.tick, buffered);
      assert.ok(first.end !== undefined && second.start >= first.end, 'it started once the cancelled run had stopped');
      const cancelled = await bullJob(first.tick);
      assert.match(cancelled?.failedReason ?? '', /^run sync@\d+ was cancelled by tick .* \(overlap cancelOther\)$/);
      const ticks = seen.map((run) => run.tick);
      assert.deepEqual(ticks, [...new Set(ticks)].sort((a, b) => a - b), 'no tick ran twice; in tick order');
    } finally {
      release();
    }
  });

  it('cancelOther with a handler that ignores its signal: reported, the run failed after timeoutGrace, and the new tick starts then', { timeout: 30_000 }, async () => {
    const warnings: Array<{ msg: string; jobId?: string }> = [];
    const logger = pino({ level: 'warn' }, { write: (line: string) => void warnings.push(JSON.parse(line) as { msg: string; jobId?: string }) });
    const seen: SeenRun[] = [];
    let release: () => void = () => undefined;
    const stuck = new Promise<void>((resolve) => (release = resolve));
    try {
      const first = await firstRunOnA('cancelOther', seen, 'ignores', stuck, { timeoutGrace: '1s' }, logger);
      const second = await until('the next tick to run', () => seen[1], 15_000);
      assert.ok(first.reason instanceof RunCancelledError, 'its signal was aborted');
      assert.equal(first.end, undefined, 'the first handler still hangs: it was let go');
      const failed = await bullJob(first.tick);
      assert.match(failed?.failedReason ?? '', /was cancelled by tick .* did not stop within the grace period \(it ignores ctx\.signal\)/);
      assert.equal(failed?.attemptsMade, 1, 'not retried');
      assert.ok(failed?.finishedOn !== undefined && second.start >= failed.finishedOn, 'the new tick started once the grace had failed the run');
      assert.ok(
        warnings.some((w) => w.msg === 'a handler whose run was cancelled by a newer tick ignored its signal; the run is failed without it' && w.jobId === `sync@${first.tick}`),
        warnings.map((w) => w.msg).join(' | '),
      );
    } finally {
      release();
    }
  });

  it('cancelOther of a run no worker has started yet: it never starts, fails with the cancel error, and the new tick runs', { timeout: 30_000 }, async () => {
    const seen: SeenRun[] = [];
    const definition = jobOf('cancelOther');
    produce(definition(() => undefined));
    // No worker: the first run waits, and the next tick cancels it and is buffered behind it.
    const waiting = await until('a tick buffered behind the waiting run', async () => {
      const pending = await base.ledger.pendingTicks('sync');
      const buffered = pending.length === 1 && (await base.ledger.tickState('sync', pending[0]!))?.startsWith('buffered|');
      return buffered && Number((await base.ledger.jobState('sync')).lastJobTick);
    }, 10_000);
    const buffered = (await base.ledger.pendingTicks('sync'))[0]!;
    instance('A', definition, recording(seen, 'honours', new Promise(() => undefined)));
    const cancelled = await until('the waiting run to fail', async () => {
      const job = await bullJob(waiting);
      return job?.finishedOn !== undefined && job;
    }, 10_000);
    assert.match(cancelled.failedReason, new RegExp(`^run sync@${waiting} was cancelled by tick ${new Date(buffered).toISOString()}`));
    await until('the buffered tick to run', () => seen.some((run) => run.tick === buffered), 10_000);
    assert.ok(!seen.some((run) => run.tick === waiting), 'the cancelled run never started its handler');
  });

  it('terminateOther: the run active on A fails at once with the terminate error (not retried), its signal aborts, and the new tick starts at once', { timeout: 30_000 }, async () => {
    const seen: SeenRun[] = [];
    let release: () => void = () => undefined;
    const stuck = new Promise<void>((resolve) => (release = resolve));
    try {
      const first = await firstRunOnA('terminateOther', seen, 'ignores', stuck);
      const second = await until('the next tick to run', () => seen[1], 10_000);
      assert.ok(first.reason instanceof RunTerminatedError, 'its signal was aborted with the terminate error');
      assert.equal(first.reason.byTick, second.tick);
      assert.equal(first.end, undefined, 'not waited for: the old handler still runs, let go');
      const terminated = await until('the terminated run to fail', async () => {
        const job = await bullJob(first.tick);
        return job?.finishedOn !== undefined && job;
      }, 10_000);
      assert.match(terminated.failedReason, new RegExp(`^run sync@${first.tick} was terminated by tick ${new Date(second.tick).toISOString()} \\(overlap terminateOther\\)`));
      assert.equal(terminated.attemptsMade, 1, 'a terminated run is not retried');
      assert.ok(outcomes.includes('stopped') && !outcomes.includes('failed'), `counted as stopped by its policy, no failure: ${outcomes.join(', ')}`);
      await until('a third tick to run', () => seen.length >= 3, 10_000);
      const ticks = seen.map((run) => run.tick);
      assert.deepEqual(ticks, [...new Set(ticks)].sort((a, b) => a - b), 'no tick ran twice');
    } finally {
      release();
    }
  });
});
