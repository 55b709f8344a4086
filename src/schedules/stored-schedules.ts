import type { Logger } from 'pino';
import type { FencingToken } from '../ledger/tick-ledger.js';
import type { DueEntry, IdleSchedule, LoadedSchedule, ReplacedSchedule, RuntimeScheduleSource } from '../producing/runtime-schedules.js';
import type { ScheduledJob } from '../scheduling/define-job.js';
import { compileRecord } from './catalog.js';
import type { ScheduleStore } from './store.js';

/**
 * The runtime schedules as the producer reads them: specs from the store, compiled against the job files
 * when read, and the store's due index. Nothing is cached: a leader reads a schedule when it falls due or
 * changes, so it holds nothing for the others.
 */
export class StoredSchedules implements RuntimeScheduleSource {
  constructor(
    private readonly store: ScheduleStore,
    private readonly files: () => ReadonlyMap<string, ScheduledJob>,
    private readonly log: Logger,
  ) {}

  async load(ids: readonly string[]): Promise<Array<LoadedSchedule | IdleSchedule | undefined>> {
    const [records, reviews] = await Promise.all([this.store.getMany(ids, (error) => this.log.error({ err: error }, error.message)), this.store.reviewAt(ids)]);
    const files = this.files();
    return records.map((record, i) => {
      if (!record) return undefined;
      const { job, problem } = compileRecord(record, files);
      if (!job && problem.kind === 'invalid') this.log.error({ schedule: record.id }, `schedule "${record.id}" does not compile and does not run: ${problem.detail}`);
      return job ? { job, version: record.version, updatedAt: record.updatedAt, reviewAt: reviews[i] } : { job, version: record.version, updatedAt: record.updatedAt };
    });
  }

  due(after: number, until: number, limit: number): Promise<DueEntry[]> {
    return this.store.due(after, until, limit);
  }

  dueExactly(at: number): Promise<string[]> {
    return this.store.dueExactly(at);
  }

  nextDue(after: number): Promise<number | undefined> {
    return this.store.nextDue(after);
  }

  park(term: FencingToken, id: string, version: number, updatedAt: number, reviewAt: number | undefined): Promise<'parked' | 'changed' | 'fenced'> {
    return this.store.park(term, id, version, updatedAt, reviewAt);
  }

  stored(ids: readonly string[]): Promise<boolean[]> {
    return this.store.stored(ids);
  }

  async replaced(id: string): Promise<ReplacedSchedule[]> {
    const files = this.files();
    return (await this.store.replaced(id)).map(({ endedAt, removed, record }) => ({ endedAt, removed, definedAt: record.updatedAt, job: compileRecord(record, files).job }));
  }

  forgetPrevious(id: string, endedAt: number): Promise<void> {
    return this.store.forgetPrevious(id, endedAt);
  }
}
