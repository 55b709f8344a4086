import { setTimeout as sleep } from 'node:timers/promises';
import type { Job } from 'bullmq';
import type { HandlerContext, JobHandler, TickRunData } from '../../src/scheduling/define-job.js';

/** One run of a tick's job, as its handler saw it. */
export interface RecordedRun {
  tick: number;
  worker: string;
  start: number;
  end: number | undefined;
  /** BullMQ's attempts made before this one (leasebeat handlers only). */
  attempt?: number;
}

/**
 * Records when each run of a job starts and ends, across any number of workers (standing in for
 * instances), so a test can check that runs of a `skip`/`bufferOne` job never overlap and start in tick
 * order.
 */
export class RunRecorder {
  readonly runs: RecordedRun[] = [];

  /** `now`: the clock runs are timed on; the monotonic one where no start is compared with a tick. */
  constructor(private readonly now: () => number = Date.now) {}

  /** A BullMQ processor that takes `durationMs` per run and records it under `worker`. */
  processor(worker: string, durationMs: number): (job: Job) => Promise<void> {
    return async (job) => {
      const run: RecordedRun = { tick: (job.data as { tick: number }).tick, worker, start: this.now(), end: undefined };
      this.runs.push(run);
      await sleep(durationMs);
      run.end = this.now();
    };
  }

  /**
   * A leasebeat handler that records each run of `body` under `worker`, from its call until it settles,
   * whatever leasebeat did with the run meanwhile (a handler let go past its timeout still counts).
   */
  handler(worker: string, body: (job: Job<TickRunData>, ctx: HandlerContext) => Promise<unknown>): JobHandler {
    return async (job, ctx) => {
      const run: RecordedRun = { tick: job.data.tick, worker, start: this.now(), end: undefined, attempt: job.attemptsMade };
      this.runs.push(run);
      try {
        return await body(job, ctx);
      } finally {
        run.end = this.now();
      }
    };
  }

  /** Pairs of runs that were in progress at the same time (an unfinished run lasts until now). */
  overlaps(): Array<[RecordedRun, RecordedRun]> {
    const pairs: Array<[RecordedRun, RecordedRun]> = [];
    const endOf = (run: RecordedRun): number => run.end ?? Infinity;
    for (const [i, a] of this.runs.entries()) {
      for (const b of this.runs.slice(i + 1)) if (a.start < endOf(b) && b.start < endOf(a)) pairs.push([a, b]);
    }
    return pairs;
  }

  /** The ticks in the order their runs started. */
  startOrder(): number[] {
    return [...this.runs].sort((a, b) => a.start - b.start).map((run) => run.tick);
  }
}
