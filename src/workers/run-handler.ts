import type { Job } from 'bullmq';
import type { Logger } from 'pino';
import type { HandlerContext, ScheduledJob } from '../scheduling/define-job.js';
import type { TickJobData } from '../ledger/job-data.js';
import { runWithDeadline, type LetGo } from './run-deadline.js';
import { inSpan, SpanKind, traceOf } from '../util/traces.js';
import { systemClock } from '../util/clock.js';

/** What one attempt of a run's handler needs besides its definition and BullMQ job. */
export interface HandlerRun {
  queue: string;
  /** Aborts the handler's `ctx.signal`; aborted with a stop error, it stops the run (see runWithDeadline). */
  abort: AbortController;
  logger: Logger;
  /** Told of a handler let go while it still runs, and of its end. */
  letGo?: LetGo;
}

/**
 * One attempt of a run's handler: called with its context, in the run's trace span, under its deadline
 * (runWithDeadline), and timed.
 */
export class HandlerCall {
  private readonly began = performance.now();
  /** Taken when the handler settles: recording the finish (its WAIT on replicas) is not the run's time. */
  private settled: { at: number; ms: number } | undefined;

  constructor(
    private readonly definition: ScheduledJob,
    private readonly job: Job,
    private readonly run: HandlerRun,
  ) {}

  /** The handler's result, or the error the run fails with. */
  call(): Promise<unknown> {
    const { job, run } = this;
    const deadline = { runId: job.id ?? '', timeoutMs: this.definition.timeoutMs, graceMs: this.definition.timeoutGraceMs, abort: run.abort, log: run.logger, clock: systemClock, letGo: run.letGo };
    // The run continues the trace of its enqueue (its data carries it), in this process or another.
    const attributes = () => ({ 'leasebeat.job': job.name, 'leasebeat.run_id': job.id ?? '', 'leasebeat.attempt': job.attemptsMade + 1, 'messaging.system': 'bullmq', 'messaging.destination.name': run.queue });
    return inSpan('leasebeat.run', attributes, () => runWithDeadline(() => this.timed(), deadline), {
      kind: SpanKind.CONSUMER,
      parent: traceOf((job.data as Partial<TickJobData>).trace),
    });
  }

  /** When the handler ended (epoch ms), and after how long; a handler let go, or never called, ends now. */
  end(): { at: number; ms: number } {
    return this.settled ?? { at: Date.now(), ms: performance.now() - this.began };
  }

  private async timed(): Promise<unknown> {
    try {
      return await this.handler();
    } finally {
      this.settled = { at: Date.now(), ms: performance.now() - this.began };
    }
  }

  private async handler(): Promise<unknown> {
    const { job, definition } = this;
    const data = job.data as Partial<TickJobData>;
    const context: HandlerContext = {
      data: data.data,
      tick: new Date(data.tick ?? job.timestamp),
      runId: job.id ?? '',
      token: data.token ?? { generation: '', leaderTransitions: -1 },
      signal: this.run.abort.signal,
      log: this.run.logger.child({ job: job.name, jobId: job.id }),
      manual: data.manual ?? false,
      backfill: data.backfill !== undefined,
    };
    if (definition.handler) return definition.handler(job as Job<TickJobData>, context);
    // A flow parent without a handler completes with its children's results.
    return job.getChildrenValues();
  }
}
