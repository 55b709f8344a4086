import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { ScheduleFeed } from '../../src/schedules/feed.js';
import { ScheduleStore } from '../../src/schedules/store.js';
import { directWrites } from '../../src/redis/durability.js';
import { KeySpace } from '../../src/redis/keys.js';
import { silentLogger } from '../../src/util/logger.js';
import { useRedis } from '../support/redis-server.js';
import { until } from '../support/until.js';

const spec = (every: string): never => ({ job: 'work', every }) as never;

describe('ScheduleFeed on a real Redis', () => {
  const redis = useRedis({ flush: true });
  let store: ScheduleStore;
  let feed: ScheduleFeed;
  const changes: string[][] = [];
  before(() => {
    store = new ScheduleStore(redis.client, new KeySpace(), directWrites(redis.client));
  });
  redis.beforeClose(() => feed?.stop());

  async function follow(): Promise<void> {
    await feed?.stop();
    changes.length = 0;
    feed = new ScheduleFeed(redis.client, store, silentLogger);
    feed.on('change', (ids) => changes.push(ids));
    await feed.start();
  }

  it('loads what is stored, then reports every write and removal as it happens', async () => {
    await store.upsert('a', spec('1h'), 't');
    await store.upsert('b', spec('1h'), 't');
    await follow();
    assert.deepEqual([...feed.records.keys()].sort(), ['a', 'b']);
    await store.upsert('a', spec('2h'), 't');
    await until('the edit', () => feed.records.get('a')?.version === 2);
    await store.remove('b');
    await until('the removal', () => !feed.records.has('b'));
    // The same spec again is no write: nothing is reported.
    const seen = changes.length;
    await store.upsert('a', spec('2h'), 't');
    await store.upsert('c', spec('1h'), 't');
    await until('c', () => feed.records.has('c'));
    assert.deepEqual(changes.slice(seen), [['c']]);
  });

  it('after its connection is cut it reads on from the last entry it saw: a write made meanwhile is not missed', async () => {
    await follow();
    const readers = async (): Promise<string[]> =>
      (await redis.client.client('LIST') as string).split('\n').filter((line) => line.includes('cmd=xread')).map((line) => /id=(\d+)/.exec(line)![1]!);
    const [reader] = await until('the blocked XREAD', async () => (await readers()).length > 0 && readers());
    await redis.client.client('KILL', 'ID', reader!);
    // Written while the reader reconnects: the stream is read on from the entry it saw last.
    await store.upsert('while-down', spec('1h'), 't');
    await until('the write made while it was down', () => feed.records.has('while-down'));
  });

  it('loads everything again when the entries after the last one it read were trimmed away', async () => {
    await store.upsert('x', spec('1h'), 't');
    await follow();
    await store.upsert('x', spec('3h'), 't');
    await until('x v2', () => feed.records.get('x')?.version === 2);
    // A change whose entry the stream lost (trimmed before the follower read it): only a full load finds it.
    const lost = await redis.client.hget(store.keys.schedules, 'x');
    await redis.client.hset(store.keys.schedules, 'lost', lost!.replace('"every":"3h"', '"every":"4h"'));
    await redis.client.zadd(store.keys.scheduleIds, 0, 'lost');
    await redis.client.xtrim(store.keys.scheduleChanges, 'MAXLEN', 0);
    await store.upsert('y', spec('1h'), 't');
    await until('the lost change, found by loading everything again', () => feed.records.get('lost')?.spec.every === '4h');
    assert.ok(feed.records.has('y'));
  });
});
