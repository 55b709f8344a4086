import type { Redis } from 'ioredis';
import { directWrites } from '../../src/redis/durability.js';
import { KeySpace } from '../../src/redis/keys.js';
import type { StoredSpec } from '../../src/schedules/spec.js';
import { ScheduleStore } from '../../src/schedules/store.js';

/** What {@link seedSchedules} wrote, and how long it took. */
export interface SeededSchedules {
  count: number;
  ms: number;
}

/**
 * Writes `count` schedules through `ScheduleStore.upsert` (its Lua, so the records are exactly what the
 * API writes), `inFlight` at a time on one connection: ioredis pipelines them, so this is many scripts
 * per round trip rather than one. `schedule(i)` names each and gives its spec in stored form (take one
 * from `Schedules.check` to be sure of the form). For the tests of many schedules, not for a running
 * cluster's Redis: every write is one feed entry that every instance reads.
 */
export async function seedSchedules(
  redis: Redis,
  count: number,
  schedule: (i: number) => { id: string; spec: StoredSpec },
  options: { inFlight?: number; by?: string; keys?: KeySpace } = {},
): Promise<SeededSchedules> {
  const store = new ScheduleStore(redis, options.keys ?? new KeySpace(), directWrites(redis));
  const inFlight = options.inFlight ?? 64;
  const by = options.by ?? 'seed@test';
  const started = performance.now();
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < count) {
      const { id, spec } = schedule(next++);
      await store.upsert(id, spec, by);
    }
  };
  await Promise.all(Array.from({ length: Math.min(inFlight, count) }, lane));
  return { count, ms: Math.round(performance.now() - started) };
}
