import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { until } from './until.js';

/**
 * The ids of the connections blocked in an XREAD on `redis` (CLIENT LIST), once there is one: what a test
 * kills to cut a feed's reader.
 */
export function blockedXreads(redis: Redis, what: string): Promise<string[]> {
  const read = async (): Promise<string[]> =>
    ((await redis.client('LIST')) as string).split('\n').filter((line) => line.includes('cmd=xread')).map((line) => /id=(\d+)/.exec(line)![1]!);
  return until(what, async () => {
    const ids = await read();
    return ids.length > 0 && ids;
  }, 10_000);
}

/**
 * A client of the server on `port` that reconnects a minute after a lost connection, so that a connection
 * cut under it (and each duplicate's) stays waiting to reconnect while a test acts.
 */
export function reconnectingInAMinute(port: number): Redis {
  const client = new Redis({ host: '127.0.0.1', port, retryStrategy: () => 60_000 });
  client.on('error', () => undefined);
  return client;
}

/** Whether `promise` settles within `ms`: a call that hangs for good answers false instead of hanging the test. */
export function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  return Promise.race([promise.then(() => true), sleep(ms, false, { ref: false })]);
}
