import type { FencingToken } from '../ledger/tick-ledger.js';
import type { ScheduledJob } from '../scheduling/define-job.js';
import type { EndedVersion } from '../scheduling/plan.js';

/** A runtime schedule as the leader runs it: its compiled definition, and the stored version it is compiled from. */
export interface LoadedSchedule {
  job: ScheduledJob;
  version: number;
  /** Redis time (ms) of the write of that version: with the version, it names the write. */
  updatedAt: number;
  /** When the due index says it must be looked at (undefined: it is not in the index). */
  reviewAt: number | undefined;
}

/** A stored schedule that does not run (a file job shadows it, or it no longer compiles). */
export interface IdleSchedule {
  job: undefined;
  version: number;
  updatedAt: number;
}

/** A version of a schedule that a write replaced or removed (see ScheduleStore.replaced). */
export type ReplacedSchedule = EndedVersion;

/** An entry of the due index: the instant (ms) by which a leader must look at schedule `id`. */
export interface DueEntry {
  id: string;
  at: number;
}

/**
 * What the producer needs of the runtime schedules (implemented by the schedules layer over Redis): the
 * specs, compiled against the job files, read when they are needed; and the due index that says when
 * each schedule must be looked at next, so that a leader holds a lane only for the schedules due soon.
 */
export interface RuntimeScheduleSource {
  /** The schedules `ids` as stored now, in their order; undefined for one that is not stored. */
  load(ids: readonly string[]): Promise<Array<LoadedSchedule | IdleSchedule | undefined>>;
  /** Up to `limit` entries due after `after` (exclusive) and by `until`, earliest first. */
  due(after: number, until: number, limit: number): Promise<DueEntry[]>;
  /** Every id due exactly at `at`. */
  dueExactly(at: number): Promise<string[]>;
  /** The earliest instant of the index after `after`. */
  nextDue(after: number): Promise<number | undefined>;
  /**
   * Under the fence, sets when schedule `id` must be looked at again (undefined: nothing more is owed),
   * if the stored version is still the one named; `changed` when it is not.
   */
  park(term: FencingToken, id: string, version: number, updatedAt: number, reviewAt: number | undefined): Promise<'parked' | 'changed' | 'fenced'>;
  /** Which of `ids` are stored. */
  stored(ids: readonly string[]): Promise<boolean[]>;
  /** The versions of schedule `id` that writes replaced or removed, oldest first, while a leader may still owe their ticks a record. */
  replaced(id: string): Promise<ReplacedSchedule[]>;
  /** The ticks of the versions replaced or removed by writes up to `endedAt` are accounted for: forget those. */
  forgetPrevious(id: string, endedAt: number): Promise<void>;
}
