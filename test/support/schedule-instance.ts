import { before } from 'node:test';
import { createScheduler, type Scheduler } from '../../src/index.js';
import type { RedisFixture } from './redis-server.js';
import { until } from './until.js';

/**
 * The job types of the runtime-schedules fixture: `work` and `report`, and `nightly`, a scheduled file
 * job whose name no schedule may take. No imports, so they load from any process.
 */
export const SCHEDULE_JOBS = new URL('../fixtures/jobs-schedules/', import.meta.url).pathname;

/** A suite's one running instance, from {@link useScheduleInstance}. */
export interface ScheduleInstance {
  /** There from the suite's `before` hooks on; it leads. */
  readonly scheduler: Scheduler;
  /** Waits until the instance has loaded schedule `id` from the change feed: from then on the leader runs and triggers it. */
  loaded(id: string): Promise<void>;
}

/**
 * One in-process instance over {@link SCHEDULE_JOBS} (or `jobsDir`) on the suite's Redis: started (and leading) in a
 * `before` hook, stopped before the server closes. What pause, resume and trigger of a schedule need.
 */
export function useScheduleInstance(redis: RedisFixture, options: { jobsDir?: string } = {}): ScheduleInstance {
  let scheduler: Scheduler | undefined;
  before(async () => {
    scheduler = createScheduler({
      connection: redis.server.url,
      jobsDir: options.jobsDir ?? SCHEDULE_JOBS,
      identity: 'schedules-instance',
      election: { leaseDurationMs: 2_000, renewDeadlineMs: 1_500, retryPeriodMs: 250 },
      members: { heartbeatIntervalMs: 200, graceMs: 1_000 },
    });
    await scheduler.start();
    await until('the instance to lead', () => scheduler!.elector.isLeader());
  });
  redis.beforeClose(() => scheduler?.stop());
  const instance: ScheduleInstance = {
    get scheduler(): Scheduler {
      if (!scheduler) throw new Error("useScheduleInstance: the instance starts in the suite's before hook: use it from a hook or a test");
      return scheduler;
    },
    loaded: async (id) => {
      await until(`the instance to load schedule ${id}`, async () => (await instance.scheduler.schedules.get(id))?.live != null);
    },
  };
  return instance;
}
