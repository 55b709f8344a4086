import type { TickLedger } from '../../src/queueing/tick-ledger.js';
import { silentGaps, ticksBetween } from './ledger-audit.js';

/** What a topology test found for jobs that tick every second. */
export interface TickAudit {
  /** `<job>@<tick>` that ran more than once. */
  duplicates: string[];
  /** `<job>@<tick>` between a job's first and last run that neither ran nor has a ledger record or skip. */
  silentGaps: string[];
  summary: Record<string, { runs: number; ticks: number; skipped: number }>;
}

/**
 * Audits runs recorded as `<job>@<tick ms>` (in-process handlers) against the ledger, for every-second jobs:
 * every nominal tick from a job's first run to its last ran exactly once or is recorded (skip, or a claim
 * still pending for the next leader). A run counts even if a failover lost its ledger record.
 */
export async function auditTicks(ledger: TickLedger, jobs: string[], runs: string[], stepMs = 1_000): Promise<TickAudit> {
  const counts = new Map<string, number>();
  for (const run of runs) counts.set(run, (counts.get(run) ?? 0) + 1);
  const audit: TickAudit = { duplicates: [...counts].filter(([, n]) => n > 1).map(([run, n]) => `${run} ×${n}`), silentGaps: [], summary: {} };
  for (const job of jobs) {
    const ticks = runs.filter((run) => run.startsWith(`${job}@`)).map((run) => Number(run.slice(job.length + 1)));
    if (ticks.length === 0) continue;
    const all = ticksBetween(Math.min(...ticks), Math.max(...ticks), stepMs);
    const unrun = all.filter((tick) => !counts.has(`${job}@${tick}`));
    const gaps = await silentGaps(ledger, job, unrun);
    audit.silentGaps.push(...gaps.map((tick) => `${job}@${tick}`));
    audit.summary[job] = { runs: ticks.length, ticks: all.length, skipped: unrun.length - gaps.length };
  }
  return audit;
}
