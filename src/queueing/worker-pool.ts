import { DelayedError, MetricsTime, Worker, type ConnectionOptions, type Job } from 'bullmq';
import type { Logger } from 'pino';
import type { WorkerState } from '../members/record.js';
import type { HandlerContext, ScheduledJob } from '../scheduling/define-job.js';
import type { TickJobData } from './job-data.js';

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
/** How long a run whose take the replicas did not confirm waits before it is tried again. */
const UNCONFIRMED_BACKOFF_MS = 500;

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
  private closed = false;
  /** Set by `pause()`, cleared by `resume()`; a pause superseded by a resume never counts as drained. */
  private pausing: { drained: boolean } | undefined;
  /** Each worker's pending or finished `Worker.pause()`, which resolves once its active runs are done; cleared by `resume()`. */
  private readonly pauses = new Map<Worker, Promise<void>>();

  constructor(
    private readonly options: {
      connection: ConnectionOptions;
      prefix?: string;
      logger: Logger;
      tuning?: WorkerTuning;
      /**
       * On replicated Redis: resolves once the replicas hold this instance's take of a run from `queue`
       * (and so the run's add, written before it), throws when they do not. A run taken on a primary that
       * a failover then loses would be taken, and run, again elsewhere.
       */
      confirmTaken?: (queue: string) => Promise<void>;
    },
  ) {}

  /**
   * Starts or adjusts workers so that every queue in `jobs` has one, sized to its jobs' concurrency up to
   * the tuning's bound.
   */
  update(jobs: ReadonlyMap<string, ScheduledJob>): void {
    if (this.closing) return;
    this.jobs = jobs;
    const bound = this.options.tuning?.concurrency ?? DEFAULT_WORKER_TUNING.concurrency;
    const concurrencyByQueue = new Map<string, number>();
    for (const job of jobs.values()) {
      concurrencyByQueue.set(job.queue, Math.min(bound, (concurrencyByQueue.get(job.queue) ?? 0) + job.concurrency));
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
    this.closed = true;
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
    return worker;
  }

  /**
   * The definition that runs `job`: the one named like it, or, for a child of a tick's flow, the one that
   * started the flow (its parent's id is `<name>@<tick>`), whose handler then switches on `job.name`.
   */
  private definitionOf(job: Job): ScheduledJob | undefined {
    const own = this.jobs.get(job.name);
    if (own) return own;
    const starter = job.parent?.id?.split('@')[0];
    const parent = starter === undefined ? undefined : this.jobs.get(starter);
    return parent?.handler ? parent : undefined;
  }

  private async process(job: Job, queue: string, token: string | undefined, signal: AbortSignal | undefined): Promise<unknown> {
    const definition = this.definitionOf(job);
    if (!definition) {
      throw new Error(
        `no definition named "${job.name}" is loaded on this instance (nor one that started it as a flow child): ` +
          'every instance must load the same jobs/ folder',
      );
    }
    const running = this.runningByName.get(job.name) ?? 0;
    if (running >= definition.concurrency && token) {
      // This instance already runs as many as the job allows: hand the run back for a moment.
      await job.moveToDelayed(Date.now() + CONCURRENCY_BACKOFF_MS, token);
      throw new DelayedError();
    }
    if (this.options.confirmTaken && token) {
      try {
        await this.options.confirmTaken(queue);
      } catch (error) {
        // Not durable yet: hand the run back without spending an attempt; it runs once the replicas are back.
        this.options.logger.warn({ job: job.name, jobId: job.id, err: error }, 'run not started: its take is not on enough replicas yet');
        await job.moveToDelayed(Date.now() + UNCONFIRMED_BACKOFF_MS, token);
        throw new DelayedError();
      }
    }
    const key = `${queue}/${job.id}`;
    const abort = new AbortController();
    // BullMQ's own cancellation (Worker.cancelJob) reaches the handler too.
    signal?.addEventListener('abort', () => abort.abort(signal.reason), { once: true });
    this.runs.set(key, { queue, id: job.id ?? '', name: job.name, abort });
    this.runningByName.set(job.name, running + 1);
    try {
      const data = job.data as Partial<TickJobData>;
      const context: HandlerContext = {
        data: data.data,
        tick: new Date(data.tick ?? job.timestamp),
        token: data.token ?? { generation: '', leaderTransitions: -1 },
        signal: abort.signal,
        log: this.options.logger.child({ job: job.name, jobId: job.id }),
        manual: data.manual ?? false,
      };
      if (definition.handler) return await definition.handler(job as Job<TickJobData>, context);
      // A flow parent without a handler completes with its children's results.
      return await job.getChildrenValues();
    } finally {
      this.runs.delete(key);
      const left = this.runningByName.get(job.name)! - 1;
      if (left === 0) this.runningByName.delete(job.name);
      else this.runningByName.set(job.name, left);
    }
  }
}
