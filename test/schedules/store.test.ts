import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import { directWrites } from '../../src/redis/durability.js';
import { KeySpace } from '../../src/redis/keys.js';
import type { StoredSpec } from '../../src/schedules/spec.js';
import { ScheduleStore } from '../../src/schedules/store.js';
import { useRedis } from '../support/redis-server.js';

describe('ScheduleStore: the versions writes ended, kept until a leader has recorded their ticks (real Redis)', () => {
  const redis = useRedis({ flush: true });
  let store: ScheduleStore;
  beforeEach(() => {
    store = new ScheduleStore(redis.client, new KeySpace(), directWrites(redis.client));
  });
  const spec = (n: number): StoredSpec => ({ job: 'work', every: `${n}s` });

  it('keeps each version an edit or a removal ended, oldest first, with the time of the write that ended it', async () => {
    assert.deepEqual(await store.replaced('s'), [], 'a new schedule ended no version');
    await store.upsert('s', spec(1), 'test');
    await store.upsert('s', spec(2), 'test');
    await store.upsert('s', spec(2), 'test');
    await store.remove('s');
    const replaced = await store.replaced('s');
    assert.deepEqual(replaced.map(({ removed, record }) => [removed, record.version, record.spec.every]), [[false, 1, '1s'], [true, 2, '2s']], 'an upsert of the same spec ends nothing');
    assert.ok(replaced[0]!.endedAt === replaced[1]!.record.updatedAt, 'a version ends at the write of the next one');
    assert.ok(replaced[1]!.endedAt >= replaced[0]!.endedAt);
  });

  it('keeps at most 8: the oldest goes first', async () => {
    for (let n = 1; n <= 11; n++) await store.upsert('s', spec(n), 'test');
    assert.deepEqual((await store.replaced('s')).map(({ record }) => record.version), [3, 4, 5, 6, 7, 8, 9, 10]);
  });

  it('reads the one-version entry earlier builds wrote as a chain of one, and goes on from it', async () => {
    await store.upsert('old', spec(1), 'test');
    const record = (await redis.client.hget(store.keys.schedules, 'old'))!;
    await redis.client.hset(store.keys.schedulePrevious, 'old', `1000|edit|${record}`);
    assert.deepEqual((await store.replaced('old')).map(({ endedAt, removed, record: { version } }) => [endedAt, removed, version]), [[1000, false, 1]]);
    await store.upsert('old', spec(2), 'test');
    assert.deepEqual((await store.replaced('old')).map(({ record: { version } }) => version), [1, 1]);
    await store.forgetPrevious('old', 1000);
    assert.deepEqual((await store.replaced('old')).map(({ endedAt }) => endedAt > 1000), [true]);
  });

  it('forgets the versions ended by writes up to an instant, and keeps the later ones', async () => {
    for (let n = 1; n <= 4; n++) await store.upsert('s', spec(n), 'test');
    const chain = await store.replaced('s');
    assert.deepEqual(chain.map(({ record }) => record.version), [1, 2, 3]);
    // Writes in one millisecond end their versions at one instant: forgotten together.
    const cut = chain[1]!.endedAt;
    await store.forgetPrevious('s', cut);
    const kept = chain.filter(({ endedAt }) => endedAt > cut).map(({ record }) => record.version);
    assert.deepEqual((await store.replaced('s')).map(({ record }) => record.version), kept);
    assert.ok(!kept.includes(1) && !kept.includes(2));
    await store.forgetPrevious('s', Date.now() + 60_000);
    assert.deepEqual(await store.replaced('s'), []);
  });
});
