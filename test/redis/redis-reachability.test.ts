import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { RedisReachability } from '../../src/redis/redis-reachability.js';
import { ManualClock } from '../support/manual-clock.js';
import { useRedis } from '../support/redis-server.js';
import { TcpProxy } from '../support/tcp-proxy.js';

/** Checked every 250 ms. */
const LIMIT = 1_000;
const HOUR = 3_600_000;

describe('RedisReachability measures unreachability on the monotonic clock', () => {
  const backend = useRedis();
  let proxy: TcpProxy;
  let redis: Redis;

  before(async () => {
    proxy = await TcpProxy.start({ port: backend.server.port });
    redis = new Redis({ port: proxy.port, host: '127.0.0.1', maxRetriesPerRequest: 0 });
    redis.on('error', () => undefined);
    await redis.ping();
  });
  backend.beforeClose(async () => {
    redis.disconnect();
    await proxy.close();
  });

  /** Watches Redis on a fresh manual clock, recording every report of a loss. */
  function watch(): { clock: ManualClock; reachability: RedisReachability; lost: number[]; stop: () => Promise<void> } {
    const clock = new ManualClock();
    const lost: number[] = [];
    const reachability = new RedisReachability(redis, clock, LIMIT, (unreachableForMs) => lost.push(unreachableForMs));
    const watching = new AbortController();
    const done = reachability.watch(watching.signal);
    return {
      clock,
      reachability,
      lost,
      stop: async () => {
        watching.abort();
        await done;
      },
    };
  }

  it('a wall step forward of an hour while Redis answers is no hour of unreachability', async () => {
    const w = watch();
    await redis.ping();
    w.reachability.reached();
    w.clock.set(w.clock.now() + HOUR);
    await w.clock.advance(w.reachability.intervalMs);
    assert.deepEqual(w.lost, []);
    await w.stop();
  });

  it('a wall step back does not hide an outage: the loss is reported one check after the limit of monotonic time', async () => {
    const w = watch();
    proxy.partition('blackhole');
    try {
      w.clock.set(w.clock.now() - HOUR);
      await w.clock.advance(LIMIT);
      assert.deepEqual(w.lost, [], 'not before the limit has passed');
      await w.clock.advance(w.reachability.intervalMs);
      assert.deepEqual(w.lost, [LIMIT + w.reachability.intervalMs]);
    } finally {
      proxy.heal('reset');
      await w.stop();
    }
  });
});
