import type { ScheduledJob } from '../../src/scheduling/define-job.js';
import { planCatchup } from '../../src/scheduling/plan.js';
import { validateJobDefinition } from '../../src/scheduling/schema.js';

/** A validated job from definition fields; name and handler are filled in unless given. */
export function scheduledJob(fields: Record<string, unknown>): ScheduledJob {
  const result = validateJobDefinition({ name: 'test-job', handler: () => undefined, ...fields }, '/jobs/test-job.ts');
  if (!result.ok) throw new Error(result.errors.join('\n'));
  return result.job;
}

/** Errors for a definition, with the file prefix `jobs/x.ts: `. */
export function errorsOf(definition: unknown): string[] {
  const result = validateJobDefinition(definition, '/abs/jobs/x.ts', 'jobs/x.ts');
  return result.ok ? [] : result.errors;
}

export const at = (iso: string): number => Date.parse(iso);
export const iso = (ms: number | undefined): string | undefined => (ms === undefined ? undefined : new Date(ms).toISOString());

const CENTURY_MS = 36_500 * 86_400_000;
const catchingUp = new WeakMap<ScheduledJob, ScheduledJob>();

/**
 * What a leader taking `job` over at `now` plans when the last tick scheduled was `lastTick`, with a
 * catch-up policy that reaches over any gap (`latest`, a century's window): `newest`, the tick it runs,
 * is the newest tick at or before `now` (and after `lastTick`); `owed` counts every tick in
 * `(lastTick, now]` (that one, and the rest skipped as `catchup-limit`), counted without enumerating them.
 */
export function takeover(job: ScheduledJob, lastTick: number, now: number): { newest: number | undefined; owed: number } {
  let unbounded = catchingUp.get(job);
  if (!unbounded) {
    unbounded = { ...job, catchup: { windowMs: CENTURY_MS, mode: 'latest', max: 1 } };
    catchingUp.set(job, unbounded);
  }
  const { enqueue, skipped } = planCatchup(unbounded, lastTick, now, false);
  if (skipped.some((span) => span.reason !== 'catchup-limit')) throw new Error(`a takeover over ${lastTick}..${now} skipped ticks outside the window`);
  return { newest: enqueue.at(-1), owed: enqueue.length + skipped.reduce((sum, span) => sum + span.count, 0) };
}
