import type { ScheduledJob } from '../scheduling/define-job.js';

/**
 * How many shapes (a job type with the same timing fields) each job type keeps compiled. Bulk writes
 * repeat few shapes: a million tenants on `every: '1h'` are one, crons spread over a day 1,440.
 */
export const SHAPES_PER_TYPE = 4_096;
/** A longer key (a very long cron, time zone or note) is compiled each time rather than kept. */
const MAX_KEY_LENGTH = 512;

/**
 * Schedules compiled once per shape: what the full check made of the first spec of a shape, for a job
 * type, reused for the next spec of that shape, which differs only in its id and data. The full check
 * (zod and the cross-field rules) costs more per upsert than the Redis command does; only a spec it
 * accepted is ever kept, so a refusal always comes from the full check, in its words.
 */
export class CompiledShapes {
  /** Per job type object: a reloaded `jobs/` folder gives new objects, and so new shapes. */
  private readonly byType = new WeakMap<ScheduledJob, Map<string, ScheduledJob>>();

  get(type: ScheduledJob, key: string): ScheduledJob | undefined {
    return this.byType.get(type)?.get(key);
  }

  /** Keeps `job` as the compiled form of `key`'s shape, dropping the oldest shape when the type holds its most. */
  set(type: ScheduledJob, key: string, job: ScheduledJob): void {
    if (key.length > MAX_KEY_LENGTH) return;
    let shapes = this.byType.get(type);
    if (!shapes) this.byType.set(type, (shapes = new Map<string, ScheduledJob>()));
    if (shapes.size >= SHAPES_PER_TYPE) shapes.delete(shapes.keys().next().value!);
    shapes.set(key, job);
  }
}

/** Deeper data is left to the full check (it also finds a cycle this way). */
const MAX_PLAIN_DEPTH = 32;

/**
 * Whether `value` is plain JSON data the full check accepts as is: null, text, booleans, finite numbers,
 * and plain objects and arrays of those. False whenever in doubt (holes, class instances, deep nesting):
 * the full check then says exactly what is wrong, or accepts it.
 */
export function isPlainJson(value: unknown, depth = 0): boolean {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return true;
  if (typeof value === 'number') return Number.isFinite(value);
  if (typeof value !== 'object' || depth >= MAX_PLAIN_DEPTH) return false;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) if (!isPlainJson(value[i], depth + 1)) return false;
    return true;
  }
  if (!isPlainRecord(value)) return false;
  for (const key of Object.keys(value)) if (!isPlainJson(value[key], depth + 1)) return false;
  return true;
}

/** An object literal (or one without a prototype) with no symbol keys, as the full check's shape rule reads it. */
export function isPlainRecord(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null) return false;
  const proto = Object.getPrototypeOf(value) as unknown;
  return (proto === Object.prototype || proto === null) && Object.getOwnPropertySymbols(value).length === 0;
}
