import type { Redis } from 'ioredis';
import type { Queue } from 'bullmq';
import { tickJobId } from '../src/ledger/job-data.js';
import type { TickLedger } from '../src/ledger/tick-ledger.js';

/**
 * What became of a job's ticks due around a handover, read from Redis' own records: the ledger (entries
 * and skipped ranges) and BullMQ's job hashes (when the run finished, how often a leasebeat worker started
 * its handler). Each tick is run once, or recorded skipped with its reason; anything else is a loss.
 */
export interface TickFates {
  /** Ticks looked at. */
  ticks: number;
  /** Run: the tick's BullMQ job finished, its handler started once. */
  ran: number;
  /** Recorded skipped, by reason. */
  skipped: Record<string, number>;
  /** Neither run (yet) nor recorded skipped. */
  unrun: number;
  /** Its handler started more than once. */
  twice: number;
}

export const NO_FATES: TickFates = { ticks: 0, ran: 0, skipped: {}, unrun: 0, twice: 0 };

/** The fates of `ticks` of `job`, whose runs go to `queue` (read on `redis`, the queues' server). */
export async function tickFates(redis: Redis, ledger: TickLedger, queue: Queue, job: string, ticks: number[]): Promise<TickFates> {
  const ranges = await ledger.skippedRanges(job);
  const fates: TickFates = { ...NO_FATES, ticks: ticks.length, skipped: {} };
  for (const tick of ticks) {
    const state = (await ledger.tickState(job, tick)) ?? '';
    const reason = state.startsWith('skipped|') ? state.slice('skipped|'.length) : ranges.find((range) => range.from <= tick && tick <= range.to)?.reason;
    if (reason !== undefined) {
      fates.skipped[reason] = (fates.skipped[reason] ?? 0) + 1;
      continue;
    }
    const [finishedOn, starts] = await redis.hmget(queue.toKey(tickJobId(job, tick)), 'finishedOn', 'leasebeatStarts');
    if (Number(starts ?? 0) > 1) fates.twice++;
    else if (finishedOn && Number(starts) === 1) fates.ran++;
    else fates.unrun++;
  }
  return fates;
}

/** Two tallies added up (trials of one kind). */
export function addFates(a: TickFates, b: TickFates): TickFates {
  const skipped = { ...a.skipped };
  for (const [reason, count] of Object.entries(b.skipped)) skipped[reason] = (skipped[reason] ?? 0) + count;
  return { ticks: a.ticks + b.ticks, ran: a.ran + b.ran, skipped, unrun: a.unrun + b.unrun, twice: a.twice + b.twice };
}

/** Every tick ran once: none skipped, none lost, none run twice. */
export function allRan(fates: TickFates): boolean {
  return fates.ran === fates.ticks;
}

/** `3/3 ran; skipped catchup-limit 0, other 0; unrun 0; twice 0`: what a row shows of the tally. */
export function describeFates(fates: TickFates): string {
  const { 'catchup-limit': limit = 0, ...others } = fates.skipped;
  const other = Object.values(others).reduce((sum, n) => sum + n, 0);
  return `${fates.ran}/${fates.ticks} due ticks ran; skipped catchup-limit ${limit}, other ${other}; unrun ${fates.unrun}; run twice ${fates.twice}`;
}
