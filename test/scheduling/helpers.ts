import type { ScheduledJob } from '../../src/scheduling/define-job.js';
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
