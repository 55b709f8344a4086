import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { KeySpace } from '../../src/redis/keys.js';
import { silentLogger } from '../../src/util/logger.js';
import { RunStopFeed } from '../../src/workers/run-stops.js';
import { useRedis } from '../support/redis-server.js';
import { until } from '../support/until.js';

describe('RunStopFeed on a real Redis', () => {
  const redis = useRedis();

  it('a subscriber ioredis ended for good is opened again: stops published after it are heard', async () => {
    // No retry strategy: on a lost connection ioredis ends the subscriber for good, as its Sentinel
    // failover detector does when a promotion cuts a reconnect short (ioredis #1683). A worker pool on it
    // would no longer hear `cancelOther`/`terminateOther` stops.
    const connection = new Redis({ host: '127.0.0.1', port: redis.server.port, retryStrategy: () => null });
    connection.on('error', () => undefined);
    const keys = new KeySpace();
    const feed = new RunStopFeed(connection, keys, silentLogger);
    const listening = new AbortController();
    let resubscribed = 0;
    const heard: string[] = [];
    feed.listen(listening.signal, { request: (request) => heard.push(request.jobId), resubscribed: () => resubscribed++ });
    try {
      await until('subscribed', () => resubscribed === 1);
      await redis.client.client('KILL', 'TYPE', 'pubsub');
      await until('subscribed again', () => resubscribed === 2);
      const request = { jobId: 'work:1', how: 'cancel', byTick: 2 };
      await until('the stop heard', async () => {
        await redis.client.publish(keys.runStops, JSON.stringify(request));
        return heard.includes('work:1');
      });
      assert.deepEqual([...new Set(heard)], ['work:1']);
    } finally {
      listening.abort();
      connection.disconnect();
    }
  });
});
