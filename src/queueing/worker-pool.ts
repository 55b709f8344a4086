import { DelayedError, Worker, type ConnectionOptions, type Job } from 'bullmq';
import type { Logger } from 'pino';
import type { HandlerContext, ScheduledJob } from '../scheduling/define-job.js';
import type { TickJobData } from './job-data.js';

/** BullMQ lock settings for the workers; see the README on stalled jobs. */
export interface WorkerTuning {
  /** How long a worker's lock on an active job lasts without renewal. Default 30 s (BullMQ's). */
  lockDurationMs?: number;
  /** How often workers look for jobs whose lock expired (their worker died). Default 15 s. */
  stalledIntervalMs?: number;
  /** How many times a job may stall before it fails instead of being retried. Default 1. */
  maxStalledCount?: number;
}

/** How long a run waits before retrying when its job is at its per-instance concurrency. */
const CONCURRENCY_BACKOFF_MS = 250;

/**
 * BullMQ workers for every queue the loaded jobs use, dispatching each run to its definition's handler.
 * A handler that throws fails the run (BullMQ retries it per the job's attempts); it never crashes the process.
 */
export class WorkerPool {
  private readonly workers = new Map<string, Worker>();
  private readonly active = new Map<string, number>();
  private jobs: ReadonlyMap<string, ScheduledJob> = new Map();
  private closing = false;

  constructor(
    private readonly options: {
      connection: ConnectionOptions;
      prefix?: string;
      logger: Logger;
      tuning?: WorkerTuning;
    },
  ) {}

  /** Starts or adjusts workers so that every queue in `jobs` has one, sized to its jobs' concurrency. */
  update(jobs: ReadonlyMap<string, ScheduledJob>): void {
    if (this.closing) return;
    this.jobs = jobs;
    const concurrencyByQueue = new Map<string, number>();
    for (const job of jobs.values()) {
      concurrencyByQueue.set(job.queue, (concurrencyByQueue.get(job.queue) ?? 0) + job.concurrency);
    }
    for (const [queue, concurrency] of concurrencyByQueue) {
      const existing = this.workers.get(queue);
      if (existing) existing.concurrency = concurrency;
      else this.workers.set(queue, this.startWorker(queue, concurrency));
    }
  }

  /** Number of runs currently executing on this instance. */
  activeCount(): number {
    let total = 0;
    for (const count of this.active.values()) total += count;
    return total;
  }

  /** Names of the queues with a worker. */
  queueNames(): string[] {
    return [...this.workers.keys()];
  }

  /** True while every worker is running. */
  running(): boolean {
    return !this.closing && [...this.workers.values()].every((w) => w.isRunning());
  }

  /** Stops taking new runs and waits for active ones; after `timeoutMs` the rest are abandoned to BullMQ's stalled-job recovery. */
  async close(timeoutMs: number): Promise<void> {
    this.closing = true;
    const workers = [...this.workers.values()];
    let timer: NodeJS.Timeout | undefined;
    const graceful = Promise.all(workers.map((w) => w.close()));
    const expired = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), timeoutMs)));
    const outcome = await Promise.race([graceful.then(() => 'drained' as const), expired]);
    clearTimeout(timer);
    if (outcome === 'timeout') {
      this.options.logger.warn({ active: this.activeCount(), timeoutMs }, 'drain timed out; active runs will be recovered as stalled jobs');
      await Promise.all(workers.map((w) => w.close(true)));
    }
  }

  private startWorker(queue: string, concurrency: number): Worker {
    const tuning = this.options.tuning ?? {};
    const worker = new Worker(queue, (job: Job, token?: string, signal?: AbortSignal) => this.process(job, token, signal), {
      connection: this.options.connection,
      prefix: this.options.prefix,
      concurrency,
      lockDuration: tuning.lockDurationMs ?? 30_000,
      stalledInterval: tuning.stalledIntervalMs ?? 15_000,
      maxStalledCount: tuning.maxStalledCount ?? 1,
    });
    worker.on('failed', (job, error) => {
      this.options.logger.warn({ job: job?.name, jobId: job?.id, attempt: job?.attemptsMade, err: error }, 'run failed');
    });
    worker.on('error', (error) => this.options.logger.error({ err: error, queue }, 'worker error'));
    return worker;
  }

  private async process(job: Job, token: string | undefined, signal: AbortSignal | undefined): Promise<unknown> {
    const definition = this.jobs.get(job.name);
    if (!definition) {
      throw new Error(`no definition named "${job.name}" is loaded on this instance: every instance must load the same jobs/ folder`);
    }
    const running = this.active.get(job.name) ?? 0;
    if (running >= definition.concurrency && token) {
      // This instance already runs as many as the job allows: hand the run back for a moment.
      await job.moveToDelayed(Date.now() + CONCURRENCY_BACKOFF_MS, token);
      throw new DelayedError();
    }
    this.active.set(job.name, running + 1);
    try {
      const data = job.data as Partial<TickJobData>;
      const context: HandlerContext = {
        data: data.data,
        tick: new Date(data.tick ?? job.timestamp),
        token: data.token ?? { generation: '', leaderTransitions: -1 },
        signal: signal ?? new AbortController().signal,
        log: this.options.logger.child({ job: job.name, jobId: job.id }),
        manual: data.manual ?? false,
      };
      if (definition.handler) return await definition.handler(job as Job<TickJobData>, context);
      // A flow parent without a handler completes with its children's results.
      return await job.getChildrenValues();
    } finally {
      this.active.set(job.name, (this.active.get(job.name) ?? 1) - 1);
    }
  }
}
