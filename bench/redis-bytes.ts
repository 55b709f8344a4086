/**
 * Issue 30's Redis rows: what N stored schedules cost Redis, and how fast they are written. Each system
 * writes N schedules of one kind (`upsertJobScheduler`, or a tree's own `schedules.upsert`), 32 in flight,
 * into a fresh redis-server; the bytes are its `used_memory` after the writer exited minus before, over N.
 */
import { rm } from 'node:fs/promises';
import type { Redis } from 'ioredis';
import { startRedis } from '../test/support/redis-server.js';
import { upsertSchedules, type UpsertKind } from './schedule-upserts.js';
import { jobTypeFolder } from './schedules-leader-process.js';
import type { System, Tree, Trees } from './trees.js';

export const BYTES_SCHEDULES = 1_000_000;
export const BYTES_IN_FLIGHT = 32;
/** Hand-written crons spread over the day, and intervals: the two ways users store many schedules. */
export type BytesKind = Exclude<UpsertKind, 'burst'>;
export const BYTES_KINDS: BytesKind[] = ['cron-spread', 'every-1h'];

export interface RedisBytesRun {
  system: System;
  kind: BytesKind;
  bytesPerSchedule?: number;
  upsertsPerSecond?: number;
  /** Set when the tree cannot store runtime schedules. */
  unsupported?: string;
}

export interface RedisBytesResult {
  commit: string;
  baseline?: Pick<Tree, 'label' | 'commit'>;
  schedules: number;
  inFlight: number;
  runs: RedisBytesRun[];
}

const usedMemory = async (redis: Redis): Promise<number> => Number(/used_memory:(\d+)/.exec(await redis.info('memory'))?.[1]);

/** Each kind, the systems one after the other (this checkout, the baseline, BullMQ). */
export async function measureRedisBytes(trees: Trees, schedules: number, progress: (line: string) => void): Promise<RedisBytesResult> {
  const runs: RedisBytesRun[] = [];
  const systems: Array<[System, Tree | undefined]> = [['leasebeat', trees.current], ...(trees.baseline ? [['baseline', trees.baseline] as [System, Tree]] : []), ['bullmq', undefined]];
  for (const kind of BYTES_KINDS) {
    for (const [system, tree] of systems) {
      const run = await store(system, tree, kind, schedules);
      const figures = run.unsupported ?? `${run.bytesPerSchedule?.toFixed(0)} B per schedule, ${Math.round(run.upsertsPerSecond ?? NaN)} upserts/s`;
      progress(`  ${system} ${kind} ${schedules}: ${figures}`);
      runs.push(run);
    }
  }
  return {
    commit: trees.current.label,
    ...(trees.baseline ? { baseline: { label: trees.baseline.label, commit: trees.baseline.commit } } : {}),
    schedules,
    inFlight: BYTES_IN_FLIGHT,
    runs,
  };
}

async function store(system: System, tree: Tree | undefined, kind: BytesKind, count: number): Promise<RedisBytesRun> {
  const server = await startRedis();
  const redis = server.client();
  const jobsDir = await jobTypeFolder();
  try {
    const before = await usedMemory(redis);
    const stored = await upsertSchedules(tree?.dir ?? 'bullmq', server.url, kind, count, BYTES_IN_FLIGHT, jobsDir);
    if (stored.unsupported) return { system, kind, unsupported: stored.unsupported };
    return { system, kind, bytesPerSchedule: ((await usedMemory(redis)) - before) / count, upsertsPerSecond: stored.perSecond };
  } finally {
    redis.disconnect();
    await server.close();
    await rm(jobsDir, { recursive: true, force: true });
  }
}
