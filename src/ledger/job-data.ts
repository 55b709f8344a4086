import type { TickRunData } from '../scheduling/define-job.js';

/** What leasebeat stores in `job.data` of every run it enqueues. */
export type TickJobData<TData = unknown> = TickRunData<TData>;

/**
 * The term a staged run stands for: the one that enqueued it, unless a later term finished that term's
 * claim and took the run over (`stagedBy`). Undefined for data that is not leasebeat's.
 */
export function stagingTerm(data: Partial<Pick<TickJobData, 'token' | 'stagedBy'>>): TickJobData['token'] | undefined {
  return data.stagedBy ?? data.token;
}

/**
 * The BullMQ job id of a tick: stable across leaders, so a repeated add of the same tick is ignored.
 * BullMQ ids may not contain `:` and may not be all digits; job names cannot contain `@`.
 */
export function tickJobId(job: string, tick: number): string {
  return `${job}@${tick}`;
}
