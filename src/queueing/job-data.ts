import type { FenceToken } from '../scheduling/define-job.js';

/** What leasebeat stores in `job.data` of every run it enqueues. */
export interface TickJobData<TData = unknown> {
  /** Nominal tick, epoch ms. */
  tick: number;
  /** The fencing token of the term that enqueued it; manual runs carry the empty token. */
  token: FenceToken;
  /** The definition's `data`. */
  data: TData;
  manual: boolean;
}

/**
 * The BullMQ job id of a tick: stable across leaders, so a repeated add of the same tick is ignored.
 * BullMQ ids may not contain `:` and may not be all digits; job names cannot contain `@`.
 */
export function tickJobId(job: string, tick: number): string {
  return `${job}@${tick}`;
}
