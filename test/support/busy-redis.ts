import type { TestRedis } from './redis-server.js';
import { until } from './until.js';

/** Spins in a script until Redis' own clock has moved ARGV[1] microseconds on. */
const SPIN = "local t = redis.call('TIME') local s = t[1] * 1000000 + t[2] repeat local n = redis.call('TIME') until n[1] * 1000000 + n[2] - s > tonumber(ARGV[1])";

/**
 * Makes `server` answer BUSY to every other client for about `ms` (a script running past
 * `busy-reply-threshold`, as a slow script or a server stalled mid-failover does), and resolves once it
 * does: with the end of the busy spell, after which the threshold is back at Redis' default.
 */
export async function busyFor(server: TestRedis, ms: number): Promise<{ over: Promise<void> }> {
  const admin = server.client();
  const spinner = server.client();
  await admin.config('SET', 'busy-reply-threshold', '50');
  const spun = spinner.eval(SPIN, 0, String(ms * 1000));
  await until('Redis to answer BUSY', () => admin.ping().then(() => false, (error: Error) => error.message.startsWith('BUSY')), 5_000, 10);
  const over = spun.then(async () => {
    await admin.config('SET', 'busy-reply-threshold', '5000');
    admin.disconnect();
    spinner.disconnect();
  });
  return { over };
}
