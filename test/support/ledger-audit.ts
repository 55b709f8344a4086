import type { TickLedger } from '../../src/ledger/tick-ledger.js';

/**
 * The ticks among `ticks` that have neither a job (recorded `enqueued|…`, or `claimed|…`/`buffered|…`
 * still pending for the next leader) nor a recorded skip (a `skipped|…` entry or inside a skipped range):
 * silent gaps, which must never exist.
 */
export async function silentGaps(ledger: TickLedger, job: string, ticks: number[]): Promise<number[]> {
  const ranges = await ledger.skippedRanges(job);
  const gaps: number[] = [];
  for (const tick of ticks) {
    const state = (await ledger.tickState(job, tick)) ?? '';
    if (/^(enqueued|claimed|buffered|skipped)\|/.test(state)) continue;
    if (ranges.some((range) => range.from <= tick && tick <= range.to)) continue;
    gaps.push(tick);
  }
  return gaps;
}

/** The ticks `from`, `from + stepMs`, … up to `to` inclusive. */
export function ticksBetween(from: number, to: number, stepMs: number): number[] {
  const ticks: number[] = [];
  for (let tick = from; tick <= to; tick += stepMs) ticks.push(tick);
  return ticks;
}
