import type { Redis } from 'ioredis';
import { startChild } from './child.js';
import type { LeaderCost } from './leader-process.js';

/** The leader's own CPU and memory with `count` schedules, measured inside a process of its own. */
export async function measureLeaderCost(redis: Redis, url: string, count: number, windowMs: number): Promise<LeaderCost> {
  await redis.flushall();
  const child = startChild('./leader-process.ts', [url, String(count), String(windowMs)]);
  try {
    const line = await child.line((l) => l.startsWith('{'), 180_000);
    return JSON.parse(line) as LeaderCost;
  } finally {
    await child.stop();
  }
}
