import { DelayedError, Job, MetricsTime, UnrecoverableError, Worker, type ConnectionOptions } from 'bullmq';
import { setTimeout as sleep } from 'node:timers/promises';
import { Cluster, Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { WorkerState } from './worker-state.js';
import type { ScheduledJob } from '../scheduling/define-job.js';
import { DurabilityError } from '../redis/durability.js';
import { stagingTerm, type TickJobData } from '../ledger/job-data.js';
import type { FinishToRecord, RecordedFinish, RunRecords, RunStart, StartKind } from './run-records.js';
import { RunTimeoutError, RunTimeoutFinalError, stopError, stoppedByTick } from './run-deadline.js';
import { HandlerCall } from './run-handler.js';
import type { RunStops } from './run-stops.js';
import type { RunStopRequest } from '../ledger/run-stops.js';
import type { StagedRunCheck, StagedRunVerdict } from '../ledger/tick-ledger.js';
import { backoffMs } from '../util/backoff.js';
import { withTimeout } from '../util/abort.js';
import { systemClock } from '../util/clock.js';

/**
 * BullMQ's lock and stalled-job settings, which decide what happens to the jobs of an instance that dies.
 * A worker holds a lock on each active job and renews it every `lockDuration / 2`. When the process dies
 * the lock expires; every worker runs a stalled check each `stalledInterval` (at most one per queue per
 * interval runs, cluster-wide), and a job that was active at one check and is still unlocked at the next
 * goes back to the wait list for another instance. So a killed instance's job restarts elsewhere between
 * `lockDuration / 2` and `lockDuration + stalledInterval` after the kill. leasebeat relies on this as is.
 */
export interface WorkerTuning {
  /**
   * Default 30 s (BullMQ's). Renewal every 15 s tolerates a handler that blocks the event loop for up to
   * about 15 s; shorter would recover crashed jobs sooner but run a CPU-heavy job twice, once while its
   * first run is still going.
   */
  lockDurationMs?: number;
  /**
   * Default 10 s (BullMQ's is 30 s). A check costs one script per queue, over the active list only, so it
   * is cheap; at 10 s a dead instance's jobs are back in the queue 15 to 40 s after the kill, about when
   * the leader declares the instance Unknown (20 s grace).
   */
  stalledIntervalMs?: number;
  /**
   * Default 2 (BullMQ's is 1). A job survives two losses of the instance running it (say a drain that ran
   * out of time during a rollout, then a node failure); a job that itself kills every worker it lands on
   * fails after its third run instead of taking the fleet down one instance at a time.
   */
  maxStalledCount?: number;
  /**
   * Most runs at once per queue on this instance; default 64. A queue's worker takes the sum of its jobs'
   * `concurrency` up to this bound, so 10,000 schedules on the shared queue do not make a worker of
   * concurrency 10,000 that pulls a whole burst into memory at once. Each job's own `concurrency` still
   * holds inside the bound. 64 rather than a multiple of the CPU count: handlers mostly wait on I/O, and in
   * a container the CPU count Node sees is the host's, not the pod's limit, so it would size nothing.
   */
  concurrency?: number;
}

export const DEFAULT_WORKER_TUNING: Required<WorkerTuning> = { lockDurationMs: 30_000, stalledIntervalMs: 10_000, maxStalledCount: 2, concurrency: 64 };

/** One run executing on this instance. */
interface ActiveRun {
  queue: string;
  id: string;
  name: string;
  /** Aborts the handler's `ctx.signal`; kept here because BullMQ forgets its own controllers on a forced close. */
  abort: AbortController;
}

/** How long a run waits before retrying when its job is at its per-instance concurrency. */
const CONCURRENCY_BACKOFF_MS = 250;
/** How long a staged run no live leader stands behind yet waits before it is tried again. */
const STAGED_HOLD_MS = 1_000;
/**
 * A staged run held this long past its due time says so, then once a minute (per instance): no leader has
 * decided it for longer than any failover takes (a lease, then a takeover), so its tick is not running.
 */
const HELD_WARN_AFTER_MS = 30_000;
const HELD_WARN_EVERY_MS = 60_000;
/** How long a run whose take the replicas did not confirm waits before it is tried again. */
const UNCONFIRMED_BACKOFF_MS = 500;
/** A finish the replicas did not confirm is recorded again after this, doubling up to the maximum. */
const FINISH_RETRY_MS = 250;
const MAX_FINISH_RETRY_MS = 2_000;
/** A worker whose connection failed as it opened is replaced after this, doubling up to the maximum (see open). */
const REOPEN_RETRY_MS = 250;
const MAX_REOPEN_RETRY_MS = 5_000;
/**
 * A worker that has not fetched a run for this long while runs of its queue were due and it had room for
 * them counts as stuck (see checkLiveness); checked this often.
 */
const STUCK_AFTER_MS = 20_000;
const LIVENESS_CHECK_MS = 5_000;
/** A delayed job's score in BullMQ's delayed set: its due time in ms, times 0x1000 (getDelayedScore.lua). */
const DELAYED_SCORE_PER_MS = 0x1000;
/** How often a replaced worker is looked at until its runs are done. */
const RETIRE_POLL_MS = 250;
/** BullMQ's answers for a run that is no longer ours to move: gone, or its lock lost or another's. */
const NOT_OURS = /^(Missing key for job|Missing lock for job|Lock mismatch for job)/;
/** What a handler throws after moving its own job (to delayed, to wait for its children): not a failure. */
const MOVED_ERRORS = new Set(['DelayedError', 'WaitingError', 'WaitingChildrenError', 'RateLimitError']);

/** Counts a job's failed runs in a row, pausing it after its `pauseOnFailure` (TickLedger implements it). */
export interface FailedRunCounter {
  countFailedRun(job: string, pauseAfter: number, note: string): Promise<{ streak: number; paused: boolean }>;
  clearFailedRuns(job: string): Promise<void>;
}

/** The longest error message a pause note quotes. */
const NOTE_MESSAGE_CHARS = 200;

/** Hooks for the workers' Prometheus metrics. */
export interface WorkerMetrics {
  /**
   * A handler started; `kind` says why (see `StartKind`): `runner-lost` is BullMQ's at-least-once re-run.
   * `run`: its tick (a manual run's: its request) and BullMQ's processedOn, for the start lag.
   */
  started(job: string, kind: StartKind, run: { tick: number; startedAt: number }): void;
  /**
   * A run came back that had finished, and its finish was recorded again without running the handler:
   * `finish-lost` (a failover lost BullMQ's record of it) or `completed-retry-refused` (an operator put a
   * completed run back).
   */
  notRunAgain(job: string, reason: 'finish-lost' | 'completed-retry-refused'): void;
  /** A finish could not be recorded (the lock was lost, or the pool closed first): the run may run again. */
  finishUnrecorded(job: string): void;
  /** A handler ended, with its {@link RunOutcome}; how long it ran (monotonic), and when it ended (epoch ms). */
  finished?(job: string, outcome: RunOutcome, run: { durationSeconds: number; endedAt: number }): void;
  /** A run's first start came later after its tick than its definition's `lateAfter`. */
  late?(job: string): void;
  /** A handler was let go while still running (its run ended without it: see runWithDeadline), and when it stopped. */
  letGo?(job: string): void;
  letGoStopped?(job: string): void;
}

/**
 * How a run's handler ended (`leasebeat_runs_finished_total{outcome}`): `retried` is a failed attempt BullMQ
 * runs again; `timed-out` failed for good by its `timeout`; `stopped` was ended by a newer tick of its job
 * (overlap `cancelOther`, `terminateOther`), as its policy asks: no failure of the job's own.
 */
export type RunOutcome = 'completed' | 'failed' | 'timed-out' | 'retried' | 'stopped';

/** The outcome of a run that failed for good with `error`. */
function finalOutcome(error: Error): RunOutcome {
  if (stoppedByTick(error)) return 'stopped';
  return error instanceof RunTimeoutError || error instanceof RunTimeoutFinalError ? 'timed-out' : 'failed';
}

/**
 * BullMQ workers for every queue the loaded jobs use, dispatching each run to its definition's handler.
 * A handler that throws fails the run (BullMQ retries it per the job's attempts); it never crashes the process.
 */
export class WorkerPool {
  private readonly workers = new Map<string, Worker>();
  /** Replacements in a row of each queue's worker whose connection failed as it opened (see open). */
  private readonly reopens = new Map<string, number>();
  /** Workers whose connections are still opening: they run once open (see open). */
  private readonly opening = new Set<Worker>();
  /** When each worker last fetched a run (its processor was called), on the monotonic clock. */
  private readonly fetchedAt = new Map<Worker, number>();
  /** Since when each worker has had due runs it did not fetch (see checkLiveness). */
  private readonly unfetchedSince = new Map<Worker, number>();
  private livenessTimer: NodeJS.Timeout | undefined;
  /** Set while a liveness check runs: its reads are bounded, but a slow one must not overlap the next. */
  private checkingLiveness = false;
  /** Runs each worker has in its processor now: a replaced worker is closed only once it has none. */
  private readonly busy = new Map<Worker, number>();
  /** Replaced workers whose runs are still going (see retire). */
  private readonly retired = new Set<Worker>();
  private readonly runs = new Map<string, ActiveRun>();
  /** Active runs by job name, for the per-job limit. */
  private readonly runningByName = new Map<string, number>();
  /** When each staged run held long past its due time last said so (see warnIfHeldLong). */
  private readonly heldWarnedAt = new Map<string, number>();
  private heldPrunedAt = 0;
  private jobs: ReadonlyMap<string, ScheduledJob> = new Map();
  private closing: Promise<void> | undefined;
  /** Set once a close ran out of time: the runs still active are abandoned, and nothing of theirs is recorded. */
  private abandoned = false;
  private closed = false;
  /** Set by `pause()`, cleared by `resume()`; a pause superseded by a resume never counts as drained. */
  private pausing: { drained: boolean } | undefined;
  /** Each worker's pending or finished `Worker.pause()`, which resolves once its active runs are done; cleared by `resume()`. */
  private readonly pauses = new Map<Worker, Promise<void>>();
  /** Aborted once the pool has closed: it no longer listens for stop requests. */
  private readonly stopsHeard = new AbortController();
  private listeningForStops = false;

  constructor(
    private readonly options: {
      connection: ConnectionOptions;
      prefix?: string;
      logger: Logger;
      tuning?: WorkerTuning;
      /** When a worker counts as stuck, and how often that is checked (tests shorten both). */
      liveness?: { stuckAfterMs: number; checkEveryMs: number };
      /**
       * Each run's record of its starts and finish (run-records.ts), through which a run starts only once
       * its take is durable and is handed back to BullMQ only once its finish is: a failover can then
       * neither hand a run to a second worker nor run a finished run again.
       */
      records: RunRecords;
      metrics?: WorkerMetrics;
      /**
       * For a staged run (added ahead of its tick: its data says when it is due), whether it may start
       * now, and the stop a leader asked of it, read in the same step. One that may not is handed back for
       * a moment without spending an attempt: no live leader stands behind it yet to apply a pause or the
       * catch-up policy to it (stagedRunMayStart.lua).
       */
      mayStartStaged?: (run: { job: string; jobId: string }, data: TickJobData) => Promise<StagedRunVerdict>;
      /**
       * Where the ledger and the queues are on one server (not a Cluster): the same check's keys and
       * arguments, which the take then makes in its own script, one round trip fewer per run.
       */
      stagedCheck?: (run: { job: string; jobId: string }, data: TickJobData) => StagedRunCheck;
      /** Where the runs of jobs with `pauseOnFailure` count their failures in a row (the tick ledger). */
      failedRuns?: FailedRunCounter;
      /**
       * The stops leaders ask of runs when a newer tick comes due (overlap `cancelOther`, `terminateOther`),
       * on whichever instance the run is: heard from the pool's first `update()` until it has closed.
       */
      runStops?: RunStops;
    },
  ) {}

  /**
   * Starts or adjusts workers so that every queue in `jobs` (the job files' definitions) has one, sized to
   * its jobs' concurrency up to the tuning's bound. A runtime schedule's runs are done by its job type.
   */
  update(jobs: ReadonlyMap<string, ScheduledJob>): void {
    if (this.closing) return;
    this.listenForStops();
    this.jobs = jobs;
    const bound = this.options.tuning?.concurrency ?? DEFAULT_WORKER_TUNING.concurrency;
    const concurrencyByQueue = new Map<string, number>();
    for (const job of jobs.values()) {
      // A job type runs the ticks of any number of runtime schedules, each up to its concurrency: its
      // queue gets the whole bound.
      const wanted = job.trigger.kind === 'none' ? bound : job.concurrency;
      concurrencyByQueue.set(job.queue, Math.min(bound, (concurrencyByQueue.get(job.queue) ?? 0) + wanted));
    }
    for (const [queue, concurrency] of concurrencyByQueue) {
      const existing = this.workers.get(queue);
      if (existing) existing.concurrency = concurrency;
      else this.workers.set(queue, this.startWorker(queue, concurrency));
    }
    this.livenessTimer ??= setInterval(() => void this.checkLiveness(), this.options.liveness?.checkEveryMs ?? LIVENESS_CHECK_MS).unref();
  }

  /** How long a worker's lock on a run lasts unrenewed (see WorkerTuning). */
  private get lockDurationMs(): number {
    return this.options.tuning?.lockDurationMs ?? DEFAULT_WORKER_TUNING.lockDurationMs;
  }

  /** Number of runs currently executing on this instance. */
  activeCount(): number {
    return this.runs.size;
  }

  /** `<queue>/<job id>` of the runs executing on this instance. */
  activeJobIds(): string[] {
    return [...this.runs.values()].map((run) => `${run.queue}/${run.id}`);
  }

  /** Names of the queues with a worker. */
  queueNames(): string[] {
    return [...this.workers.keys()];
  }

  /** What the workers are doing; see `WorkerState`. */
  state(): WorkerState {
    if (this.closed) return 'stopped';
    if (this.closing) return 'draining';
    if (this.pausing) return this.pausing.drained ? 'paused' : 'draining';
    // A worker still opening its connections starts once they are open (or is replaced): it counts as running.
    return [...this.workers.values()].every((w) => w.isRunning() || this.opening.has(w)) ? 'running' : 'stopped';
  }

  /**
   * Stops taking new runs on every queue; active runs go on to the end. Resolves once they have (the state
   * is then `paused`); after an intervening `resume()`, only when the pool closes. Workers started while
   * paused start paused. A fetch BullMQ already had in flight at the moment of the call may still start one
   * more run; it is finished like the others before the pool counts as paused.
   */
  async pause(): Promise<void> {
    if (this.closing || this.pausing) return;
    // Without workers (a cordon found before any job was loaded) there is nothing to wait for.
    const pause = { drained: this.workers.size === 0 };
    this.pausing = pause;
    await this.whenPaused();
    pause.drained = true;
  }

  /** Takes new runs again after `pause()`. */
  resume(): void {
    if (this.closing || !this.pausing) return;
    this.pausing = undefined;
    this.pauses.clear();
    // BullMQ's resume restarts a worker whose main loop ended, or wakes one still finishing its runs.
    // A worker still opening starts once open (see open).
    for (const worker of this.workers.values()) if (!this.opening.has(worker)) void worker.resume();
  }

  /**
   * Stops taking new runs and waits for active ones, for at most `timeoutMs`. Runs still active then are
   * abandoned: their handlers' `ctx.signal` aborts, nothing they return or throw is written, and their locks
   * are no longer renewed, so once a lock expires (`lockDurationMs`) BullMQ's stalled-job check on any other
   * worker of the queue moves the run back to wait (or fails it past `maxStalledCount`) and it runs again
   * from the start. A handler that ignores its signal goes on in this process until the process exits.
   */
  close(timeoutMs: number): Promise<void> {
    this.closing ??= this.closeWorkers(timeoutMs);
    return this.closing;
  }

  private async closeWorkers(timeoutMs: number): Promise<void> {
    clearInterval(this.livenessTimer);
    const workers = [...this.workers.values()];
    let timer: NodeJS.Timeout | undefined;
    // Drain with pause(), not close(): BullMQ hands every later close() the first one's promise, so a
    // close(true) after a graceful close() would still wait for the runs, however long they take.
    const drained = Promise.all([this.whenPaused(), this.retiredIdle()]).then(() => true);
    const expired = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs)));
    const graceful = await Promise.race([drained, expired]);
    clearTimeout(timer);
    if (!graceful) {
      this.abandoned = true;
      this.options.logger.warn(
        { active: this.activeJobIds(), timeoutMs },
        'drain timed out; abandoning the active runs to BullMQ stalled-job recovery (another worker runs them again once their locks expire)',
      );
    }
    // Always forced: after a drain there is nothing left to wait for, and a forced close cannot hang on a
    // dead Redis (it disconnects instead of QUIT). Past the timeout, the worker neither waits for its runs
    // nor writes their outcome (it checks that its connection is closing).
    await Promise.all([...workers, ...this.retired].map((w) => w.close(true)));
    // Only now, so that a handler that honours its signal cannot fail the run before the worker stops writing.
    for (const run of this.runs.values()) run.abort.abort(new Error(`shutdown: runs not finished within ${timeoutMs} ms are abandoned`));
    this.stopsHeard.abort();
    this.closed = true;
  }

  /** Hears the stop requests (once, before the first worker starts) until the pool has closed. */
  private listenForStops(): void {
    if (this.listeningForStops) return;
    this.listeningForStops = true;
    this.options.runStops?.listen(this.stopsHeard.signal, {
      request: (request) => this.stopRun(request),
      // A request published while the feed was down is not delivered again: the active runs look it up.
      resubscribed: () => void this.lookUpStops(),
    });
  }

  /**
   * Stops run `request.jobId` if it is active here: its signal aborts with the stop's error, and the run
   * fails with it once its handler stops (cancel; at the latest when its `timeoutGrace` ends) or at once
   * (terminate). Through the pool's own controller, not BullMQ's `Worker.cancelJob`: that takes a string
   * reason, which would reach the handler but could not decide the run's end (see runWithDeadline).
   */
  private stopRun(request: RunStopRequest): void {
    for (const run of this.runs.values()) {
      if (run.id !== request.jobId || run.abort.signal.aborted) continue;
      this.options.logger.info({ job: run.name, jobId: run.id, how: request.how, byTick: new Date(request.byTick) }, 'stopping a run: a newer tick of its job came due');
      run.abort.abort(stopError(request));
    }
  }

  /** Looks up the stop requests of the runs active here (after the feed reconnected). */
  private async lookUpStops(): Promise<void> {
    for (const run of [...this.runs.values()]) {
      const request = await this.stopAsked(run.id, run.name);
      if (request) this.stopRun(request);
    }
  }

  /** The stop asked of run `jobId`; undefined when none was, or it cannot be read now (the feed still delivers one). */
  private async stopAsked(jobId: string, name: string): Promise<RunStopRequest | undefined> {
    try {
      return await this.options.runStops?.requested(jobId);
    } catch (error) {
      this.options.logger.warn({ job: name, jobId, err: error }, 'could not read whether a run was asked to stop; a published request still stops it');
      return undefined;
    }
  }

  /** Pauses every worker (once per pause) and resolves when none has an active run. */
  private whenPaused(): Promise<void> {
    return Promise.all(
      [...this.workers.values()].map((worker) => {
        let paused = this.pauses.get(worker);
        if (!paused) {
          paused = worker.pause();
          this.pauses.set(worker, paused);
        }
        return paused;
      }),
    ).then(() => undefined);
  }

  private startWorker(queue: string, concurrency: number): Worker {
    const tuning = this.options.tuning ?? {};
    const worker: Worker = new Worker(queue, (job: Job, token?: string, signal?: AbortSignal) => {
      this.fetchedAt.set(worker, performance.now());
      this.busy.set(worker, (this.busy.get(worker) ?? 0) + 1);
      return this.process(job, queue, token, signal).finally(() => this.busy.set(worker, this.busy.get(worker)! - 1));
    }, {
      connection: this.options.connection,
      prefix: this.options.prefix,
      concurrency,
      // BullMQ counts finished jobs (bullmq_job_completed_total/failed_total) only in workers given this option.
      metrics: { maxDataPoints: MetricsTime.ONE_WEEK },
      lockDuration: this.lockDurationMs,
      stalledInterval: tuning.stalledIntervalMs ?? DEFAULT_WORKER_TUNING.stalledIntervalMs,
      maxStalledCount: tuning.maxStalledCount ?? DEFAULT_WORKER_TUNING.maxStalledCount,
      // Started once its connections are open (see open).
      autorun: false,
    });
    worker.on('failed', (job, error) => {
      this.options.logger.warn({ job: job?.name, jobId: job?.id, attempt: job?.attemptsMade, err: error }, 'run failed');
    });
    worker.on('error', (error) => this.options.logger.error({ err: error, queue }, 'worker error'));
    this.open(queue, worker);
    if (this.options.records.replicated) {
      worker.on('completed', (job, result) => void this.settleFinish(job, (token) => job.moveToCompleted(result, token, false)));
      worker.on('failed', (job, error) => job && void this.settleFinish(job, (token) => job.moveToFailed(error, token, false)));
    }
    return worker;
  }

  /**
   * Starts `worker` once its connections are open. BullMQ opens each with an INFO (its version check), and
   * a refusal of it (BUSY, LOADING while a restarted Redis reads its AOF, CLUSTERDOWN mid-failover, a
   * connection cut) fails that connection for good: a worker started on it never takes a run again, and
   * one whose main connection failed spins in its fetch loop without yielding, freezing the whole process
   * (timers, the lease, the HTTP probes). So a worker runs only once open; one that fails to open is
   * replaced by a new one, after a backoff while Redis keeps refusing.
   */
  private open(queue: string, worker: Worker): void {
    this.opening.add(worker);
    worker.waitUntilReady().then(
      () => {
        this.opening.delete(worker);
        this.reopens.delete(queue);
        // A worker opened while the pool is paused waits for `resume()`.
        if (!this.closing && !this.pausing && this.workers.get(queue) === worker) void worker.resume();
      },
      (error: unknown) => {
        this.opening.delete(worker);
        if (this.closing || this.workers.get(queue) !== worker) return;
        const attempt = this.reopens.get(queue) ?? 0;
        this.reopens.set(queue, attempt + 1);
        const retryInMs = backoffMs(attempt, REOPEN_RETRY_MS, MAX_REOPEN_RETRY_MS);
        this.options.logger.warn({ queue, err: error, retryInMs }, "a worker's connection failed as it opened: starting a new worker for the queue");
        setTimeout(() => this.replace(queue, worker), retryInMs).unref();
      },
    );
  }

  /** Starts a new worker for `queue` in place of `worker`, and retires that one (see retire). */
  private replace(queue: string, worker: Worker): void {
    if (this.closing || this.workers.get(queue) !== worker) return;
    this.workers.set(queue, this.startWorker(queue, worker.concurrency));
    this.pauses.delete(worker);
    this.fetchedAt.delete(worker);
    this.unfetchedSince.delete(worker);
    this.retire(worker);
  }

  /**
   * Closes a replaced worker once the runs it took are done: a forced close would abandon them (their
   * locks unrenewed, BullMQ would run them again), and a graceful one waits on the fetch that is stuck.
   * At the pool's close, its runs are drained with the others'.
   */
  private retire(worker: Worker): void {
    this.retired.add(worker);
    const closeWhenIdle = (): void => {
      if (!this.retired.has(worker)) return;
      if ((this.busy.get(worker) ?? 0) > 0) return void setTimeout(closeWhenIdle, RETIRE_POLL_MS).unref();
      this.retired.delete(worker);
      this.busy.delete(worker);
      worker.close(true).catch(() => undefined);
    };
    closeWhenIdle();
  }

  /** Resolves once no replaced worker has a run going. */
  private async retiredIdle(): Promise<void> {
    while ([...this.retired].some((worker) => (this.busy.get(worker) ?? 0) > 0)) await sleep(RETIRE_POLL_MS);
  }

  /**
   * Replaces a worker whose fetch loop is stuck: runs of its queue have been due (waiting, or delayed past
   * their time) for STUCK_AFTER_MS, it had room for them, and it fetched none. BullMQ's fetch can park for
   * good on Redis Cluster after a primary dies while the worker blocks on its queue (its blocking
   * connection's reset awaits an 'end' that never comes): chaos runs saw every instance's worker of one
   * queue take nothing more, their runs left waiting and delayed to the end. A worker paused by the pool,
   * or still opening, is not judged.
   */
  private async checkLiveness(): Promise<void> {
    if (this.closing || this.pausing || this.checkingLiveness) return;
    this.checkingLiveness = true;
    try {
      await this.judgeWorkers(this.options.liveness?.stuckAfterMs ?? STUCK_AFTER_MS);
    } finally {
      this.checkingLiveness = false;
    }
  }

  /** One liveness check of every worker (see checkLiveness). */
  private async judgeWorkers(stuckAfterMs: number): Promise<void> {
    for (const [queue, worker] of [...this.workers]) {
      if (this.opening.has(worker) || !worker.isRunning()) continue;
      let active = 0;
      for (const run of this.runs.values()) if (run.queue === queue) active++;
      const due = active < worker.concurrency && (await this.hasDueRuns(worker).catch(() => false));
      const now = performance.now();
      const since = this.unfetchedSince.get(worker);
      // Nothing due, or a fetch since the due runs were first seen: the worker keeps up.
      if (!due || (since !== undefined && (this.fetchedAt.get(worker) ?? -Infinity) > since)) {
        if (due) this.unfetchedSince.set(worker, now);
        else this.unfetchedSince.delete(worker);
        continue;
      }
      if (since === undefined) {
        this.unfetchedSince.set(worker, now);
        continue;
      }
      if (now - since < stuckAfterMs || this.closing || this.pausing) continue;
      this.options.logger.warn({ queue, unfetchedMs: Math.round(now - since) }, 'a worker took no run while runs of its queue were due: its fetch is stuck; starting a new worker for the queue');
      this.replace(queue, worker);
    }
  }

  /**
   * Whether runs of `worker`'s queue are waiting, or delayed past their time by a second; read on the
   * pool's own client (the scheduler's worker connection), not the worker's, which may be the stuck part,
   * and within a bound. Without a client of its own (connection options) the pool does not judge.
   */
  private async hasDueRuns(worker: Worker): Promise<boolean> {
    const client = this.options.connection;
    if (!(client instanceof Redis || client instanceof Cluster)) return false;
    const { wait, prioritized, delayed } = worker.keys;
    const dueScore = (Date.now() - 1_000) * DELAYED_SCORE_PER_MS;
    const counts = await withTimeout(systemClock, LIVENESS_CHECK_MS, undefined, `the due runs of queue ${worker.name}`, () =>
      Promise.all([client.llen(wait!), client.zcard(prioritized!), client.zcount(delayed!, 0, dueScore)]),
    );
    return counts.some((n) => n > 0);
  }

  /**
   * The definition that runs `job`: the one named like it (a file job), the job type a runtime schedule's
   * run names (workers hold no copy of the schedules), or, for a child of a tick's flow, the one that
   * started the flow (its parent's id is `<name>@<tick>`: a file job, or a schedule whose run names its
   * type), whose handler then switches on `job.name`.
   */
  private async definitionOf(job: Job): Promise<ScheduledJob | undefined> {
    const own = this.jobs.get(job.name);
    if (own) return own;
    const typed = this.jobType((job.data as Partial<TickJobData> | undefined)?.type);
    if (typed) return typed;
    const { id, queueKey } = job.parent ?? {};
    const starter = id?.split('@')[0];
    if (id === undefined || queueKey === undefined || starter === undefined) return undefined;
    const started = this.jobs.get(starter) ?? (await this.parentType(id, queueKey));
    return started?.handler ? started : undefined;
  }

  /** The job file `name` when it is a job type. */
  private jobType(name: string | undefined): ScheduledJob | undefined {
    const type = name === undefined ? undefined : this.jobs.get(name);
    return type?.trigger.kind === 'none' ? type : undefined;
  }

  /** The job type a flow's parent run names (a runtime schedule's tick), read from BullMQ's record of it. */
  private async parentType(id: string, queueKey: string): Promise<ScheduledJob | undefined> {
    // The parent is on the schedule's queue, its job type's: a queue this pool has a worker for.
    const prefix = `${this.options.prefix ?? 'bull'}:`;
    const worker = queueKey.startsWith(prefix) ? this.workers.get(queueKey.slice(prefix.length)) : undefined;
    const parent = worker && (await Job.fromId<Partial<TickJobData>>(worker, id));
    return this.jobType(parent?.data.type);
  }

  private async process(job: Job, queue: string, token: string | undefined, signal: AbortSignal | undefined): Promise<unknown> {
    const definition = await this.definitionOf(job);
    if (!definition) {
      throw new Error(
        `no definition named "${job.name}" is loaded on this instance (nor one that started it as a flow child): ` +
          'every instance must load the same jobs/ folder',
      );
    }
    // A worker always passes its lock token; without one nothing here could be checked or recorded.
    if (token === undefined) throw new Error(`run ${job.id} was handed over without a lock token`);
    const running = this.runningByName.get(job.name) ?? 0;
    if (running >= definition.concurrency) {
      // This instance already runs as many as the job allows: hand the run back for a moment.
      return await this.handBack(job, token, CONCURRENCY_BACKOFF_MS);
    }
    // The slot is taken before the first wait, so that runs arriving meanwhile see it taken.
    this.runningByName.set(job.name, running + 1);
    const key = `${queue}/${job.id}`;
    const abort = new AbortController();
    // Listed before its checks, so that a stop published from now on reaches it (stopRun): the check
    // below read the stops asked before.
    this.runs.set(key, { queue, id: job.id ?? '', name: job.name, abort });
    try {
      const start = await this.takeChecked(job, token);
      if (start.kind === 'held') {
        this.warnIfHeldLong(job);
        return await this.handBack(job, token, STAGED_HOLD_MS);
      }
      if (start.kind === 'not-ours') {
        // Whoever holds the run on this server runs it; BullMQ writes nothing for a DelayedError.
        this.options.logger.warn({ job: job.name, jobId: job.id }, 'run not started: the server does not hold our take of it (a failover lost it, or its lock expired)');
        throw new DelayedError();
      }
      if (start.kind === 'finished') return await this.recordAgain(job, start.finish, start.refused);
      if (start.start === 'runner-lost') {
        this.options.logger.warn(
          { job: job.name, jobId: job.id, previousRunner: start.previousRunner },
          'running a run again whose last start never finished (its process died or lost the lock): BullMQ runs a run at least once',
        );
      }
      const { tick = job.timestamp, dueAt } = job.data as Partial<TickJobData>;
      const startedAt = job.processedOn ?? Date.now();
      const name = metricName(job);
      this.options.metrics?.started(name, start.start, { tick, startedAt });
      // Late is about the first start only (a retry starts when its backoff says), from when the run was
      // due: a staged run's due time includes its jitter.
      if (start.start === 'first' && definition.lateAfterMs !== undefined && startedAt - (dueAt ?? tick) > definition.lateAfterMs) this.options.metrics?.late?.(name);
      // BullMQ's own cancellation (Worker.cancelJob) reaches the handler too.
      signal?.addEventListener('abort', () => abort.abort(signal.reason), { once: true });
      let result: unknown;
      let value: string;
      const letGo = { started: () => this.options.metrics?.letGo?.(name), stopped: () => this.options.metrics?.letGoStopped?.(name) };
      const handler = new HandlerCall(definition, job, { queue, abort, logger: this.options.logger, letGo });
      const ended = (outcome: RunOutcome): void => {
        const end = handler.end();
        this.options.metrics?.finished?.(name, outcome, { durationSeconds: end.ms / 1000, endedAt: end.at });
      };
      try {
        // Stopped by a newer tick before it started (it waited while that tick came due): it never starts.
        // A staged run's check read the stop already; a stop heard since aborted the run's signal.
        const asked = start.stopAsked ? start.stopAsked.request : await this.stopAsked(job.id ?? '', job.name);
        if (asked) throw stopError(asked);
        if (stoppedByTick(abort.signal.reason)) throw abort.signal.reason;
        result = await handler.call();
        // What BullMQ will store, and what a finish recorded again returns.
        value = JSON.stringify(result) ?? '';
      } catch (error) {
        const failure = error instanceof Error ? error : new Error(String(error));
        const moved = MOVED_ERRORS.has(failure.name);
        const final = !moved && isFinal(job, failure);
        await this.recordFinish(job, token, moved ? { outcome: 'moved', final: false, value: failure.message } : { outcome: 'failed', final, value: failure.message });
        if (!moved) ended(final ? finalOutcome(failure) : 'retried');
        // A run a newer tick stopped did not fail by itself: it neither counts towards pauseOnFailure nor clears the count.
        if (final && !stoppedByTick(failure)) await this.countOutcome(definition, job, failure);
        throw error;
      }
      await this.recordFinish(job, token, { outcome: 'completed', final: false, value });
      ended('completed');
      await this.countOutcome(definition, job, undefined);
      return result;
    } finally {
      this.runs.delete(key);
      const left = this.runningByName.get(job.name)! - 1;
      if (left === 0) this.runningByName.delete(job.name);
      else this.runningByName.set(job.name, left);
    }
  }

  /**
   * For a job with `pauseOnFailure`: counts a run that failed for good (`failure`), or clears the count
   * after one that completed. Only the runs of its ticks and triggers count, not its flow's children. Best
   * effort: the run's outcome stands whatever Redis answers.
   */
  private async countOutcome(definition: ScheduledJob, job: Job, failure: Error | undefined): Promise<void> {
    const pauseAfter = definition.pauseOnFailure;
    if (pauseAfter === undefined || !this.options.failedRuns || job.parentKey !== undefined) return;
    try {
      if (!failure) return await this.options.failedRuns.clearFailedRuns(job.name);
      const note = `paused after ${pauseAfter} failed runs in a row (pauseOnFailure); the last, ${job.id}: ${failure.message.slice(0, NOTE_MESSAGE_CHARS)}`;
      const { paused } = await this.options.failedRuns.countFailedRun(job.name, pauseAfter, note);
      if (paused) this.options.logger.warn({ job: job.name, jobId: job.id, pauseOnFailure: pauseAfter }, 'job paused: its runs failed too many times in a row');
    } catch (error) {
      this.options.logger.warn({ job: job.name, jobId: job.id, err: error }, 'could not count the outcome of a run for pauseOnFailure');
    }
  }

  /**
   * Checks and counts the take of a run (see take); a staged run's only once a live leader stands behind
   * it: in the take's own script where the ledger shares the run's server (`stagedCheck`), else after
   * `mayStartStaged` let it start. `held`: it may not start yet, or its check failed.
   */
  private async takeChecked(job: Job, token: string): Promise<RunStart> {
    const data = job.data as Partial<TickJobData>;
    if (data.dueAt === undefined || data.manual) return this.take(job, token);
    const run = { job: job.name, jobId: job.id ?? '' };
    if (this.options.stagedCheck) return this.take(job, token, this.options.stagedCheck(run, data as TickJobData));
    if (!this.options.mayStartStaged) return this.take(job, token);
    let verdict: StagedRunVerdict;
    try {
      verdict = await this.options.mayStartStaged(run, data as TickJobData);
    } catch (error) {
      this.options.logger.warn({ job: job.name, jobId: job.id, err: error }, 'could not check whether a staged run may start; holding it');
      return { kind: 'held' };
    }
    if (!verdict.start) return { kind: 'held' };
    const start = await this.take(job, token);
    return start.kind === 'start' ? { ...start, stopAsked: { request: verdict.stop } } : start;
  }

  /**
   * Hands a run that has not started back to BullMQ for `delayMs`, spending no attempt, and ends its
   * processing (DelayedError: BullMQ writes nothing more). A hand-back Redis refuses (a primary failing
   * over) is retried while the run's lock is ours: thrown at BullMQ, the error would fail the run for good
   * though its handler never started. Past the lock's duration, or once the lock is gone (not ours), the run
   * is left to BullMQ's stalled-job recovery.
   */
  private async handBack(job: Job, token: string, delayMs: number): Promise<never> {
    const deadline = performance.now() + this.lockDurationMs;
    for (let attempt = 0; ; attempt++) {
      try {
        await job.moveToDelayed(Date.now() + delayMs, token);
        break;
      } catch (error) {
        if (NOT_OURS.test(error instanceof Error ? error.message : '') || this.closing || performance.now() >= deadline) {
          this.options.logger.warn({ job: job.name, jobId: job.id, err: error }, 'could not hand a run back; BullMQ recovers it once its lock expires');
          break;
        }
        await sleep(backoffMs(attempt, FINISH_RETRY_MS, MAX_FINISH_RETRY_MS));
      }
    }
    throw new DelayedError();
  }

  /** Warns of a staged run held past its due time by more than HELD_WARN_AFTER_MS, once per HELD_WARN_EVERY_MS. */
  private warnIfHeldLong(job: Job): void {
    const data = job.data as Partial<TickJobData>;
    const now = Date.now();
    const lateMs = now - (data.dueAt ?? Infinity);
    if (lateMs < HELD_WARN_AFTER_MS) return;
    // Runs not held again for a while were decided (started, or taken back): forgotten, once a minute (not
    // per hold: thousands of runs may be held at once while no leader produces), so the map stays small.
    if (now - this.heldPrunedAt > HELD_WARN_EVERY_MS) {
      this.heldPrunedAt = now;
      for (const [id, at] of this.heldWarnedAt) if (now - at > 2 * HELD_WARN_EVERY_MS) this.heldWarnedAt.delete(id);
    }
    const key = `${job.queueName}/${job.id}`;
    const warnedAt = this.heldWarnedAt.get(key);
    if (warnedAt !== undefined && now - warnedAt < HELD_WARN_EVERY_MS) return;
    this.heldWarnedAt.set(key, now);
    this.options.logger.warn(
      { job: job.name, jobId: job.id, lateMs, stagedBy: stagingTerm(data) },
      'a staged run is still held past its due time: no leader has decided it yet (is one producing?)',
    );
  }

  /**
   * Checks and counts the take (see RunRecords.start). A take the replicas did not confirm, or that Redis
   * did not answer, hands the run back (see handBack): it starts once Redis is back, without spending an
   * attempt (a start counted meanwhile makes its next take a `runner-lost` one: at least once still holds).
   */
  private async take(job: Job, token: string, staged?: StagedRunCheck): Promise<RunStart> {
    try {
      return await this.options.records.start(job, token, staged);
    } catch (error) {
      const why = error instanceof DurabilityError ? 'its take is not on enough replicas yet' : 'Redis did not answer its take';
      this.options.logger.warn({ job: job.name, jobId: job.id, err: error }, `run not started: ${why}`);
      return await this.handBack(job, token, UNCONFIRMED_BACKOFF_MS);
    }
  }

  /** Hands BullMQ the outcome a finished run already had, without running its handler again. */
  private async recordAgain(job: Job, finish: RecordedFinish, refused: boolean): Promise<unknown> {
    const log = { job: job.name, jobId: job.id, outcome: finish.outcome };
    if (refused) {
      const message = 'a completed run was put back to run (a retry from Bull Board or the BullMQ API): refused, its completion is recorded again. To run the job again, use `leasebeat trigger`';
      this.options.logger.warn(log, message);
      // Bull Board shows the job's log: the operator who pressed retry sees why it did not run.
      await job.log(`leasebeat: ${message}`).catch(() => undefined);
    } else {
      this.options.logger.warn(log, 'a finished run came back after a Redis failover lost the record of its finish: recording that finish again, not running it');
    }
    this.options.metrics?.notRunAgain(metricName(job), refused ? 'completed-retry-refused' : 'finish-lost');
    if (finish.outcome === 'completed') return finish.value === '' ? undefined : (JSON.parse(finish.value) as unknown);
    // Only completed and failed runs come back finished: a moved one is re-entered (startRuns.lua).
    throw finish.final ? new UnrecoverableError(finish.value) : new Error(finish.value);
  }

  /**
   * On a replicated topology, right after BullMQ recorded a run's finish: makes sure the server has it and
   * replicas hold it. If a failover lost it while the run is still under our lock, records it again at
   * once; past the lock's duration, stalled-job recovery and the run's finish record take over.
   */
  private async settleFinish(job: Job, recordAgain: (token: string) => Promise<unknown>): Promise<void> {
    const token = job.token;
    if (!token) return;
    const deadline = performance.now() + this.lockDurationMs;
    for (let attempt = 0; !this.closed && performance.now() < deadline; attempt++) {
      try {
        if (!(await this.options.records.finishLost(job, token))) return;
        this.options.logger.warn({ job: job.name, jobId: job.id }, "a failover lost BullMQ's record of a run's finish: recording it again while the run is still ours");
        this.options.metrics?.notRunAgain(metricName(job), 'finish-lost');
        await recordAgain(token);
      } catch (error) {
        const retryInMs = backoffMs(attempt, FINISH_RETRY_MS, MAX_FINISH_RETRY_MS);
        this.options.logger.debug({ job: job.name, jobId: job.id, err: error, retryInMs }, "BullMQ's record of a run's finish is not on enough replicas yet; checking again");
        await sleep(retryInMs);
      }
    }
  }

  /**
   * Records how the handler ended before BullMQ does, retrying while the replicas do not confirm it: BullMQ
   * keeps renewing the run's lock meanwhile, so the run stays ours. Gives up when the lock is lost or the
   * pool closes; then a failover (or a lost runner's recovery) may run the run again, which is counted.
   */
  private async recordFinish(job: Job, token: string, finish: FinishToRecord): Promise<void> {
    // An abandoned run is BullMQ's again: it runs again from the start, as close() promises.
    if (this.abandoned) return;
    for (let attempt = 0; ; attempt++) {
      try {
        if (await this.options.records.finish(job, token, finish)) return;
        this.options.logger.warn({ job: job.name, jobId: job.id }, "the run's lock was lost before its finish was recorded: another worker may run it again");
        break;
      } catch (error) {
        if (this.closing) {
          this.options.logger.warn({ job: job.name, jobId: job.id, err: error }, 'closing before the finish of a run was confirmed on replicas: a failover may run it again');
          break;
        }
        const retryInMs = backoffMs(attempt, FINISH_RETRY_MS, MAX_FINISH_RETRY_MS);
        this.options.logger.warn({ job: job.name, jobId: job.id, err: error, retryInMs }, 'the finish of a run is not on enough replicas yet; holding the run and recording it again');
        await sleep(retryInMs);
      }
    }
    this.options.metrics?.finishUnrecorded(metricName(job));
  }
}

/** Whether BullMQ will not retry after this failure (no attempt left, or unrecoverable): as `Job.shouldRetryJob` decides. */
function isFinal(job: Job, error: Error): boolean {
  return error instanceof UnrecoverableError || error.name === 'UnrecoverableError' || job.attemptsMade + 1 >= (job.opts.attempts ?? 1);
}

/**
 * The name a run is counted under in the per-job metrics: a runtime schedule's job type (its runs carry
 * it), so that 100,000 schedules make one series per job type, not one per schedule; else the job's own.
 */
export function metricName(job: Job): string {
  return (job.data as Partial<TickJobData> | undefined)?.type ?? job.name;
}
