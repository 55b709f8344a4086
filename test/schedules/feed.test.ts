import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { ScheduleFeed, type ScheduleChange } from '../../src/schedules/feed.js';
import { ScheduleStore } from '../../src/schedules/store.js';
import { directWrites } from '../../src/redis/durability.js';
import { KeySpace } from '../../src/redis/keys.js';
import { silentLogger } from '../../src/util/logger.js';
import { useRedis } from '../support/redis-server.js';
import { until } from '../support/until.js';
import { blockedXreads, reconnectingInAMinute, settlesWithin } from '../support/blocked-reads.js';

const spec = (every: string): never => ({ job: 'work', every }) as never;

describe('ScheduleFeed on a real Redis', () => {
  const redis = useRedis({ flush: true });
  let store: ScheduleStore;
  let feed: ScheduleFeed;
  const changes: ScheduleChange[][] = [];
  let resyncs = 0;
  before(() => {
    store = new ScheduleStore(redis.client, new KeySpace(), directWrites(redis.client));
  });
  redis.beforeClose(() => feed?.stop());

  async function follow(client: Redis = redis.client): Promise<void> {
    await feed?.stop();
    changes.length = 0;
    resyncs = 0;
    feed = new ScheduleFeed(client, store, silentLogger);
    feed.on('change', (batch) => changes.push(batch));
    feed.on('resync', () => resyncs++);
    await feed.start();
  }
  const seen = (id: string): Array<number | undefined> => changes.flat().filter((change) => change.id === id).map((change) => change.record?.version);

  it('holds no schedules: it passes on every write and removal with the record read after it', async () => {
    await store.upsert('a', spec('1h'), 't');
    await follow();
    // Written before it started: applied, and not passed on (whoever needs it reads it).
    assert.equal(feed.applied((await store.get('a'))!), true);
    assert.equal(changes.length, 0);
    await store.upsert('a', spec('2h'), 't');
    await until('the edit', () => seen('a').includes(2));
    assert.equal(feed.applied((await store.get('a'))!), true);
    await store.upsert('b', spec('1h'), 't');
    await store.remove('b', 't');
    await until('the removal, passed on as no record', () => seen('b').includes(undefined));
    // The same spec again is no write: nothing is passed on (b's two entries may still come in two batches).
    const before = changes.flat().length;
    await store.upsert('a', spec('2h'), 't');
    await store.upsert('c', spec('1h'), 't');
    await until('c', () => seen('c').length > 0);
    assert.deepEqual(changes.flat().slice(before).map((change) => change.id).filter((id) => id !== 'b'), ['c']);
  });

  it('after its connection is cut it reads on from the last entry it saw: a write made meanwhile is not missed', async () => {
    await follow();
    const [reader] = await blockedXreads(redis.client, 'the blocked XREAD');
    await redis.client.client('KILL', 'ID', reader!);
    // Written while the reader reconnects: the stream is read on from the entry it saw last.
    await store.upsert('while-down', spec('1h'), 't');
    await until('the write made while it was down', () => seen('while-down').includes(1));
  });

  it('a reader connection ioredis ended for good is opened again: the writes after it are passed on', async () => {
    // No retry strategy: on a lost connection ioredis ends the client for good, as its Sentinel failover
    // detector does when a promotion cuts a reconnect short (ioredis #1683). Seen in a Sentinel chaos run:
    // the leader's feed answered "Connection is closed." from then on, and a removed schedule kept running.
    const ending = new Redis({ host: '127.0.0.1', port: redis.server.port, retryStrategy: () => null });
    ending.on('error', () => undefined);
    try {
      await follow(ending);
      const [reader] = await blockedXreads(redis.client, 'the blocked XREAD');
      await redis.client.client('KILL', 'ID', reader!);
      // Its read failed: it may have missed writes, and says so once it follows the stream again.
      await until('a resync', () => resyncs === 1);
      await store.upsert('after-the-end', spec('1h'), 't');
      await until('the write made after the reader ended', () => seen('after-the-end').includes(1));
      await store.remove('after-the-end', 't');
      await until('its removal', () => seen('after-the-end').includes(undefined));
    } finally {
      await feed.stop();
      ending.disconnect();
    }
  });

  // Seen in CI (test/service/cannot-produce.test.ts): a scheduler's stop() hung for good. Its feed's reader
  // was waiting to reconnect (its connection reset) when stop() disconnected it: ioredis then drops the
  // reconnect and never settles the XREAD it holds for resending, and stop() awaited the read.
  it('stops at once while its reader waits to reconnect, the blocked read held for resending', { timeout: 30_000 }, async () => {
    // Reconnects a minute after a lost connection: the reader stays waiting while stop() is called.
    const slow = reconnectingInAMinute(redis.server.port);
    try {
      await follow(slow);
      const [reader] = await blockedXreads(redis.client, 'the blocked XREAD');
      await redis.client.client('KILL', 'ID', reader!);
      // The feed's own connection, private: only its state tells that the read is held for resending.
      const own = (feed as unknown as { reader: Redis }).reader;
      await until('the reader to wait to reconnect', () => own.status === 'reconnecting');
      assert.equal(await settlesWithin(feed.stop(), 10_000), true, 'stop() returned');
    } finally {
      slow.disconnect();
    }
  });

  it('says it may have missed changes when the entries after the last one it read were trimmed away', async () => {
    await store.upsert('x', spec('1h'), 't');
    await follow();
    await store.upsert('x', spec('3h'), 't');
    await until('x v2', () => seen('x').includes(2));
    assert.equal(resyncs, 0);
    await redis.client.xtrim(store.keys.scheduleChanges, 'MAXLEN', 0);
    await store.upsert('y', spec('1h'), 't');
    await until('a resync', () => resyncs === 1);
    // Positioned at the newest entry again: what follows is passed on as before.
    await store.upsert('z', spec('1h'), 't');
    await until('z', () => seen('z').includes(1));
  });
});
