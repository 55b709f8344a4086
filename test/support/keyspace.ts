import type { Redis } from 'ioredis';
import { KeySpace } from '../../src/redis/keys.js';

/**
 * Every key of the server and its serialized value (DUMP, hex): equal snapshots mean nothing was
 * written in between. Only for a quiet server: a running instance writes its lease and heartbeats all
 * the time (use {@link scheduleFootprint} there).
 */
export async function keyspaceSnapshot(redis: Redis): Promise<Map<string, string | null>> {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await redis.scan(cursor, 'COUNT', 1000);
    keys.push(...batch);
    cursor = next;
  } while (cursor !== '0');
  keys.sort();
  const snapshot = new Map<string, string | null>();
  for (const key of keys) snapshot.set(key, (await redis.dumpBuffer(key))?.toString('hex') ?? null);
  return snapshot;
}

/** The keys whose values differ between two snapshots (added, removed or changed), for an assertion's message. */
export function keyspaceChanges(before: ReadonlyMap<string, string | null>, after: ReadonlyMap<string, string | null>): string[] {
  const changed: string[] = [];
  for (const key of new Set([...before.keys(), ...after.keys()])) {
    if (!before.has(key)) changed.push(`+${key}`);
    else if (!after.has(key)) changed.push(`-${key}`);
    else if (before.get(key) !== after.get(key)) changed.push(`~${key}`);
  }
  return changed.sort();
}

/** What the schedule store holds of one schedule id, and the change feed every instance follows. */
export interface ScheduleFootprint {
  /** The stored record (`<version>|<updatedAt>|<by>|<spec>`), null when none. */
  record: string | null;
  /** Whether the id is in the id index (for listing) and in the due index (for the leader). */
  listed: boolean;
  due: boolean;
  /** The version its last write replaced, null when none. */
  previous: string | null;
  /** Entries of its history (ids in the audit index). */
  history: number;
  /** The change feed: its length and newest entry id. */
  feed: { length: number; last: string | null };
}

/**
 * The schedule store's keys as they concern `id`: a refused write must leave all of it as it was. Stable
 * under a running instance (which reads the feed and the records, and writes none of them) as long as
 * nobody writes schedules meanwhile; the due index's score is left out, a leader moves it as it reviews.
 */
export async function scheduleFootprint(redis: Redis, id: string, keys = new KeySpace()): Promise<ScheduleFootprint> {
  const [record, listed, due, previous, history, length, newest] = await Promise.all([
    redis.hget(keys.schedules, id),
    redis.zscore(keys.scheduleIds, id),
    redis.zscore(keys.scheduleDue, id),
    redis.hget(keys.schedulePrevious, id),
    auditIndexIds(redis, id, keys).then((ids) => ids.length),
    redis.xlen(keys.scheduleChanges),
    redis.xrevrange(keys.scheduleChanges, '+', '-', 'COUNT', 1),
  ]);
  return { record, listed: listed !== null, due: due !== null, previous, history, feed: { length, last: newest[0]?.[0] ?? null } };
}

/** The audit entry ids the by-name index lists for `name`, newest first (none when it has no field). */
export async function auditIndexIds(redis: Redis, name: string, keys = new KeySpace()): Promise<string[]> {
  const ids = await redis.hget(keys.auditIndex, name);
  return ids === null ? [] : ids.split(' ');
}

/** Whether `text` is one line: no line feed, carriage return, or Unicode line or paragraph separator. */
export function isOneLine(text: string): boolean {
  return !/[\n\r\u2028\u2029]/.test(text);
}
