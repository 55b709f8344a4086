import { setTimeout as sleep } from 'node:timers/promises';
import type { Job } from 'bullmq';

/** One run of a tick's job, as its handler saw it. */
export interface RecordedRun {
  tick: number;
  worker: string;
  start: number;
  end: number | undefined;
}

/**
 * Records when each run of a job starts and ends, across any number of workers (standing in for
 * instances), so a test can check that runs of a `skip`/`bufferOne` job never overlap and start in tick
 * order.
 */
export class RunRecorder {
  readonly runs: RecordedRun[] = [];

  /** A BullMQ processor that takes `durationMs` per run and records it under `worker`. */
  processor(worker: string, durationMs: number): (job: Job) => Promise<void> {
    return async (job) => {
      const run: RecordedRun = { tick: (job.data as { tick: number }).tick, worker, start: Date.now(), end: undefined };
      this.runs.push(run);
      await sleep(durationMs);
      run.end = Date.now();
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
