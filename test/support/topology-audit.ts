import assert from 'node:assert/strict';
import type { Cluster, Redis } from 'ioredis';
import type { KeySpace } from '../../src/redis/keys.js';
import { TickLedger } from '../../src/ledger/tick-ledger.js';
import { silentGaps, ticksBetween } from './ledger-audit.js';

/** What a topology test found for jobs that tick every second. */
export interface TickAudit {
  /** `<job>@<tick>` that ran more than once. */
  duplicates: string[];
  /**
   * `<job>@<tick>` the lease owed (from the first tick after the job's `scheduledSince`, or a runtime
   * schedule's creation when earlier, to its last run)
   * that neither ran nor has a ledger record or skip.
   */
  silentGaps: string[];
  /**
   * Runs of ticks the lease never owed: before the job's first owed tick, or of a job its leaders never
   * took over. Another cluster's runs (an earlier test's, say), never this one's.
   */
  unowed: string[];
  summary: Record<string, { owedSince: number | undefined; runs: number; ticks: number; skipped: number }>;
}

/**
 * Asserts what a run through a fault must show: no (job, tick) ran twice, every run was of a tick the
 * lease owed, and no tick was left without a run or a record (`gapsMessage`: what that means in the test).
 */
export function assertExactlyOnce(report: TickAudit, gapsMessage = 'every tick ran or has a recorded skip'): void {
  assert.deepEqual(report.duplicates, [], 'no (job, tick) ran twice');
  assert.deepEqual(report.unowed, [], 'every run is of a tick this lease owed');
  assert.deepEqual(report.silentGaps, [], gapsMessage);
}

/**
 * Audits runs recorded as `<job>@<tick ms>` (in-process handlers) against the ledger of `keys`, for jobs
 * that tick every `stepMs` since the epoch: every tick a leader owed, from the first one after the job's
 * `scheduledSince` (recorded by the first takeover) to the job's last run, ran exactly once or is recorded
 * (skip, or a claim still pending for the next leader). A run counts even if a failover lost its ledger
 * record. The range starts where the ledger says, not at the first run seen, so a missing first tick is a
 * gap and a stray older run cannot move the start.
 */
export async function auditTicks(redis: Redis | Cluster, keys: KeySpace, jobs: string[], runs: string[], stepMs = 1_000): Promise<TickAudit> {
  // Every command here is a single-key read: the Cluster client serves them as the ledger's Redis.
  const ledger = new TickLedger(redis as Redis, keys);
  const counts = new Map<string, number>();
  for (const run of runs) counts.set(run, (counts.get(run) ?? 0) + 1);
  const audit: TickAudit = { duplicates: [...counts].filter(([, n]) => n > 1).map(([run, n]) => `${run} ×${n}`), silentGaps: [], unowed: [], summary: {} };
  for (const job of jobs) {
    const ticks = runs.filter((run) => run.startsWith(`${job}@`)).map((run) => Number(run.slice(job.length + 1)));
    const recorded = await redis.hget(keys.jobState(job), 'scheduledSince');
    // A runtime schedule owes its ticks from its creation, though a leader first looks at it a little
    // later (JobLane.takeOver): "<version>|<updatedAt>|<createdAt>|…" in the store.
    const stored = await redis.hget(keys.schedules, job);
    const createdAt = stored === null ? Infinity : Number(stored.split('|')[2]);
    const owedSince = recorded === null ? undefined : Math.min(Number(recorded), createdAt);
    // Owed are the ticks strictly after scheduledSince (planCatchup's `tick > lastTick`).
    const firstOwed = owedSince === undefined ? Infinity : Math.floor(owedSince / stepMs) * stepMs + stepMs;
    audit.unowed.push(...ticks.filter((tick) => tick < firstOwed).map((tick) => `${job}@${tick}`));
    const owed = ticks.filter((tick) => tick >= firstOwed);
    if (owed.length === 0) {
      audit.summary[job] = { owedSince, runs: 0, ticks: 0, skipped: 0 };
      continue;
    }
    const all = ticksBetween(firstOwed, Math.max(...owed), stepMs);
    const unrun = all.filter((tick) => !counts.has(`${job}@${tick}`));
    const gaps = await silentGaps(ledger, job, unrun);
    audit.silentGaps.push(...gaps.map((tick) => `${job}@${tick}`));
    audit.summary[job] = { owedSince, runs: owed.length, ticks: all.length, skipped: unrun.length - gaps.length };
  }
  return audit;
}
