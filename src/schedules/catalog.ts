import type { ScheduledJob } from '../scheduling/define-job.js';
import { compileSchedule } from './spec.js';
import type { ScheduleRecord } from './store.js';

/** Why a stored schedule does not run as written. */
export type ScheduleProblem =
  /** Its job type is not defined in `jobs/`: its ticks are recorded as skipped `no-handler`. */
  | { kind: 'orphaned'; detail: string }
  /** A file definition has its id: the file job runs, the schedule does not. */
  | { kind: 'shadowed'; detail: string }
  /** It no longer compiles (a job type changed under it): it does not run. */
  | { kind: 'invalid'; detail: string };

/** What a stored schedule runs as against the job files: its definition (none when it does not run), and what is wrong with it. */
export type CompiledRecord = { job: ScheduledJob; problem: ScheduleProblem | undefined } | { job: undefined; problem: ScheduleProblem };

/**
 * Compiles a stored schedule against the job files. A name is a file job or a schedule, never both: a
 * file definition wins, and the schedule is shadowed. An orphan (its job type gone) still compiles: it
 * has no handler, and its ticks are recorded as skipped `no-handler`.
 */
export function compileRecord(record: ScheduleRecord, files: ReadonlyMap<string, ScheduledJob>): CompiledRecord {
  const problem = judgeSchedule(record.id, record.spec.job, files);
  if (problem?.kind === 'shadowed') return { job: undefined, problem };
  const result = compileSpec(record, files);
  if (!result.ok) return { job: undefined, problem: { kind: 'invalid', detail: result.errors.join('; ') } };
  return { job: result.job, problem };
}

/**
 * The schedule's definition as its spec says, with its job type's options when `files` define that type,
 * whatever else they say of its name (an admin with no jobs folder, or a page showing a shadowed
 * schedule's ticks, reads it so).
 */
export function compileSpec(record: ScheduleRecord, files: ReadonlyMap<string, ScheduledJob> | undefined): ReturnType<typeof compileSchedule> {
  const type = files?.get(record.spec.job);
  return compileSchedule(record.id, record.spec, type?.trigger.kind === 'none' ? type : undefined, record.createdAt, record.updatedAt, record.version);
}

/**
 * What the job files say of schedule `id` of job type `job`: shadowed when a file definition has its
 * name, orphaned when its job type is not among them (or is no job type).
 */
export function judgeSchedule(id: string, job: string, files: ReadonlyMap<string, ScheduledJob>): ScheduleProblem | undefined {
  const shadow = files.get(id);
  if (shadow && shadow.type === undefined) {
    return { kind: 'shadowed', detail: `the file job "${id}" (${shadow.file}) has the same name and runs instead; rename one of them` };
  }
  if (files.get(job)?.trigger.kind !== 'none') {
    return { kind: 'orphaned', detail: `its job type "${job}" is not defined in jobs/: its ticks are skipped as no-handler` };
  }
  return undefined;
}
