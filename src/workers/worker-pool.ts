import { DelayedError, Job, MetricsTime, UnrecoverableError, Worker, type ConnectionOptions } from 'bullmq';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { WorkerState } from './worker-state.js';
import type { HandlerContext, ScheduledJob } from '../scheduling/define-job.js';
import { DurabilityError } from '../redis/durability.js';
import type { TickJobData } from '../ledger/job-data.js';
import type { FinishToRecord, RecordedFinish, RunRecords, StartKind } from './run-records.js';
import { RunCancelledError, RunTerminatedError, runWithDeadline, type RunStopError } from './run-deadline.js';
import type { RunStops } from './run-stops.js';
import type { RunStopRequest } from '../ledger/run-stops.js';
import { inSpan, SpanKind, traceOf } from '../util/traces.js';

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
/** How long a run whose take the replicas did not confirm waits before it is tried again. */
const UNCONFIRMED_BACKOFF_MS = 500;
/** A finish the replicas did not confirm is recorded again after this, doubling up to the maximum. */
const FINISH_RETRY_MS = 250;
const MAX_FINISH_RETRY_MS = 2_000;
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
  /**
   * A handler ended: `completed`, `failed` for good, or `retried` (a failed attempt BullMQ runs again);
   * how long it ran (monotonic), and when it ended (epoch ms).
   */
  finished?(job: string, outcome: RunOutcome, run: { durationSeconds: number; endedAt: number }): void;
  /** A run's first start came later after its tick than its definition's `lateAfter`. */
  late?(job: string): void;
}

/** How a run's handler ended (`leasebeat_runs_finished_total{outcome}`). */
export type RunOutcome = 'completed' | 'failed' | 'retried';

/**
 * BullMQ workers for every queue the loaded jobs use, dispatching each run to its definition's handler.
 * A handler that throws fails the run (BullMQ retries it per the job's attempts); it never crashes the process.
 */
export class WorkerPool {
  private readonly workers = new Map<string, Worker>();
  private readonly runs = new Map<string, ActiveRun>();
  /** Active runs by job name, for the per-job limit. */
  private readonly runningByName = new Map<string, number>();
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
      /**
       * Each run's record of its starts and finish (run-records.ts), through which a run starts only once
       * its take is durable and is handed back to BullMQ only once its finish is: a failover can then
       * neither hand a run to a second worker nor run a finished run again.
       */
      records: RunRecords;
      metrics?: WorkerMetrics;
      /**
       * For a staged run (added ahead of its tick: its data says when it is due), whether it may start
       * now. One that may not is handed back for a moment without spending an attempt: no live leader
       * stands behind it yet to apply a pause or the catch-up policy to it (stagedRunMayStart.lua).
       */
      mayStartStaged?: (job: string, run: TickJobData) => Promise<boolean>;
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
    return [...this.workers.values()].every((w) => w.isRunning()) ? 'running' : 'stopped';
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
    for (const worker of this.workers.values()) void worker.resume();
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
    const workers = [...this.workers.values()];
    let timer: NodeJS.Timeout | undefined;
    // Drain with pause(), not close(): BullMQ hands every later close() the first one's promise, so a
    // close(true) after a graceful close() would still wait for the runs, however long they take.
    const drained = this.whenPaused().then(() => true);
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
    await Promise.all(workers.map((w) => w.close(true)));
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
    const worker = new Worker(queue, (job: Job, token?: string, signal?: AbortSignal) => this.process(job, queue, token, signal), {
      connection: this.options.connection,
      prefix: this.options.prefix,
      concurrency,
      // BullMQ counts finished jobs (bullmq_job_completed_total/failed_total) only in workers given this option.
      metrics: { maxDataPoints: MetricsTime.ONE_WEEK },
      lockDuration: tuning.lockDurationMs ?? DEFAULT_WORKER_TUNING.lockDurationMs,
      stalledInterval: tuning.stalledIntervalMs ?? DEFAULT_WORKER_TUNING.stalledIntervalMs,
      maxStalledCount: tuning.maxStalledCount ?? DEFAULT_WORKER_TUNING.maxStalledCount,
      // A worker created while the pool is paused waits for `resume()`.
      autorun: this.pausing === undefined,
    });
    worker.on('failed', (job, error) => {
      this.options.logger.warn({ job: job?.name, jobId: job?.id, attempt: job?.attemptsMade, err: error }, 'run failed');
    });
    worker.on('error', (error) => this.options.logger.error({ err: error, queue }, 'worker error'));
    if (this.options.records.replicated) {
      worker.on('completed', (job, result) => void this.settleFinish(job, (token) => job.moveToCompleted(result, token, false)));
      worker.on('failed', (job, error) => job && void this.settleFinish(job, (token) => job.moveToFailed(error, token, false)));
    }
    return worker;
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
      await job.moveToDelayed(Date.now() + CONCURRENCY_BACKOFF_MS, token);
      throw new DelayedError();
    }
    // The slot is taken before the first wait, so that runs arriving meanwhile see it taken.
    this.runningByName.set(job.name, running + 1);
    const key = `${queue}/${job.id}`;
    try {
      if (!(await this.mayStart(job))) {
        await job.moveToDelayed(Date.now() + STAGED_HOLD_MS, token);
        throw new DelayedError();
      }
      const start = await this.take(job, token);
      if (start === undefined) throw new DelayedError();
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
      this.options.metrics?.started(metricName(job), start.start, { tick, startedAt });
      // Late is about the first start only (a retry starts when its backoff says), from when the run was
      // due: a staged run's due time includes its jitter.
      if (start.start === 'first' && definition.lateAfterMs !== undefined && startedAt - (dueAt ?? tick) > definition.lateAfterMs) this.options.metrics?.late?.(metricName(job));
      const abort = new AbortController();
      // BullMQ's own cancellation (Worker.cancelJob) reaches the handler too.
      signal?.addEventListener('abort', () => abort.abort(signal.reason), { once: true });
      this.runs.set(key, { queue, id: job.id ?? '', name: job.name, abort });
      let result: unknown;
      let value: string;
      const began = performance.now();
      // Taken when the handler settles: recording the finish (its WAIT on replicas) is not the run's time.
      // A handler let go past its deadline has not settled: the run ended when it was failed.
      let handlerEnded: { at: number; ms: number } | undefined;
      const ended = (outcome: RunOutcome): void => {
        const end = handlerEnded ?? { at: Date.now(), ms: performance.now() - began };
        this.options.metrics?.finished?.(metricName(job), outcome, { durationSeconds: end.ms / 1000, endedAt: end.at });
      };
      const timed = async (): Promise<unknown> => {
        try {
          return await this.runHandler(definition, job, abort.signal);
        } finally {
          handlerEnded = { at: Date.now(), ms: performance.now() - began };
        }
      };
      try {
        // Stopped by a newer tick before it started (it waited while that tick came due): it never starts.
        const asked = await this.stopAsked(job.id ?? '', job.name);
        if (asked) throw stopError(asked);
        const deadline = { runId: job.id ?? '', timeoutMs: definition.timeoutMs, graceMs: definition.timeoutGraceMs, abort, log: this.options.logger };
        // The run continues the trace of its enqueue (its data carries it), in this process or another.
        const attributes = () => ({ 'leasebeat.job': job.name, 'leasebeat.run_id': job.id ?? '', 'leasebeat.attempt': job.attemptsMade + 1, 'messaging.system': 'bullmq', 'messaging.destination.name': queue });
        result = await inSpan('leasebeat.run', attributes, () => runWithDeadline(timed, deadline), {
          kind: SpanKind.CONSUMER,
          parent: traceOf((job.data as Partial<TickJobData>).trace),
        });
        // What BullMQ will store, and what a finish recorded again returns.
        value = JSON.stringify(result) ?? '';
      } catch (error) {
        const failure = error instanceof Error ? error : new Error(String(error));
        const moved = MOVED_ERRORS.has(failure.name);
        const final = !moved && isFinal(job, failure);
        await this.recordFinish(job, token, moved ? { outcome: 'moved', final: false, value: failure.message } : { outcome: 'failed', final, value: failure.message });
        if (!moved) ended(final ? 'failed' : 'retried');
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

  private async runHandler(definition: ScheduledJob, job: Job, signal: AbortSignal): Promise<unknown> {
    const data = job.data as Partial<TickJobData>;
    const context: HandlerContext = {
      data: data.data,
      tick: new Date(data.tick ?? job.timestamp),
      runId: job.id ?? '',
      token: data.token ?? { generation: '', leaderTransitions: -1 },
      signal,
      log: this.options.logger.child({ job: job.name, jobId: job.id }),
      manual: data.manual ?? false,
      backfill: data.backfill !== undefined,
    };
    if (definition.handler) return definition.handler(job as Job<TickJobData>, context);
    // A flow parent without a handler completes with its children's results.
    return job.getChildrenValues();
  }

  /** False for a staged run that must wait for a leader (see `mayStartStaged`); a failed check waits too. */
  private async mayStart(job: Job): Promise<boolean> {
    const data = job.data as Partial<TickJobData>;
    if (data.dueAt === undefined || data.manual || !this.options.mayStartStaged) return true;
    try {
      return await this.options.mayStartStaged(job.name, data as TickJobData);
    } catch (error) {
      this.options.logger.warn({ job: job.name, jobId: job.id, err: error }, 'could not check whether a staged run may start; holding it');
      return false;
    }
  }

  /**
   * Checks and counts the take (see RunRecords.start). Undefined when the run was handed back because the
   * replicas did not confirm the take: it starts once they are back, without spending an attempt.
   */
  private async take(job: Job, token: string): Promise<Awaited<ReturnType<RunRecords['start']>> | undefined> {
    try {
      return await this.options.records.start(job, token);
    } catch (error) {
      if (!(error instanceof DurabilityError)) throw error;
      this.options.logger.warn({ job: job.name, jobId: job.id, err: error }, 'run not started: its take is not on enough replicas yet');
      await job.moveToDelayed(Date.now() + UNCONFIRMED_BACKOFF_MS, token);
      return undefined;
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
    // Only completed and failed runs come back finished: a moved one is re-entered (startRun.lua).
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
    const lockMs = this.options.tuning?.lockDurationMs ?? DEFAULT_WORKER_TUNING.lockDurationMs;
    const deadline = performance.now() + lockMs;
    for (let attempt = 0; !this.closed && performance.now() < deadline; attempt++) {
      try {
        if (!(await this.options.records.finishLost(job, token))) return;
        this.options.logger.warn({ job: job.name, jobId: job.id }, "a failover lost BullMQ's record of a run's finish: recording it again while the run is still ours");
        this.options.metrics?.notRunAgain(metricName(job), 'finish-lost');
        await recordAgain(token);
      } catch (error) {
        const retryInMs = Math.min(FINISH_RETRY_MS * 2 ** attempt, MAX_FINISH_RETRY_MS);
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
        const retryInMs = Math.min(FINISH_RETRY_MS * 2 ** attempt, MAX_FINISH_RETRY_MS);
        this.options.logger.warn({ job: job.name, jobId: job.id, err: error, retryInMs }, 'the finish of a run is not on enough replicas yet; holding the run and recording it again');
        await sleep(retryInMs);
      }
    }
    this.options.metrics?.finishUnrecorded(metricName(job));
  }
}

/** The error a run stopped by a newer tick fails with. */
function stopError(request: RunStopRequest): RunStopError {
  return request.how === 'cancel' ? new RunCancelledError(request.jobId, request.byTick) : new RunTerminatedError(request.jobId, request.byTick);
}

function stoppedByTick(error: Error): boolean {
  return error instanceof RunCancelledError || error instanceof RunTerminatedError;
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
