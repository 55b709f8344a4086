import type { Job, Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { tickJobData } from './scheduled-job.js';
import { directWrites, type WritePath } from '../../src/redis/durability.js';

/**
 * The write path to one server with every write and script passed through `around`, which makes it, or
 * fails, delays or holds it as a failing Redis would (a test's failover): `write` is the write itself.
 */
export function writesThrough(redis: Redis, around: <T>(write: () => Promise<T>) => Promise<T>): WritePath {
  const direct = directWrites(redis);
  return {
    ...direct,
    write: (key, write, decides) => around(() => direct.write(key, write, decides)),
    script: (script, keys, args, decides) => around(() => direct.script(script, keys, args, decides)),
  };
}

/**
 * The write path to one server on which BullMQ adds (the writes leasebeat does not script) fail while
 * `failing()` says so, never reaching Redis, as adds to a primary that died before they landed; `failed`
 * counts them.
 */
export function addsFailingWhile(redis: Redis, failing: () => boolean): WritePath & { readonly failed: number } {
  const direct = directWrites(redis);
  let failed = 0;
  return {
    ...direct,
    write: (key, write, decides) => {
      if (!failing()) return direct.write(key, write, decides);
      failed++;
      return Promise.reject(new Error('the add never landed (its primary died first)'));
    },
    get failed() {
      return failed;
    },
  };
}

/**
 * Lands now the add of tick `tick`'s staged run of `name` (job id `jobId`), as an add a term sent and
 * that reached BullMQ late would.
 */
export function lateStagedAdd(queue: Queue, name: string, tick: number, jobId: string): Promise<Job> {
  return queue.add(name, { ...tickJobData({}, tick), dueAt: tick }, { jobId, delay: Math.max(0, tick - Date.now()) });
}
