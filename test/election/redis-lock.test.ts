import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Redis } from 'ioredis';
import { RedisLeaseLock } from '../../src/election/redis-lock.js';
import { startRedis, type TestRedis } from '../support/redis-server.js';
import { runLockContract } from './lock-contract.js';

runLockContract('RedisLeaseLock', async () => {
  const server = await startRedis();
  const redis = server.client();
  return {
    makeLock: (identity) => new RedisLeaseLock({ connection: redis, name: 'contract', identity }),
    deleteRecord: async () => void (await redis.del('leasebeat:{contract}:lease')),
    close: async () => {
      redis.disconnect();
      await server.close();
    },
  };
});

describe('RedisLeaseLock specifics', () => {
  let server: TestRedis;
  let redis: Redis;
  before(async () => {
    server = await startRedis();
    redis = server.client();
  });
  after(async () => {
    redis.disconnect();
    await server.close();
  });

  it('hash-tags the key with the lease name and honours the prefix', () => {
    const lock = new RedisLeaseLock({ connection: redis, name: 'jobs', prefix: 'acme' });
    assert.equal(lock.key, 'acme:{jobs}:lease');
    assert.equal(lock.describe(), 'redis/jobs');
  });

  it('defaults the identity to hostname_uuid, unique per instance', () => {
    const a = new RedisLeaseLock({ connection: redis, name: 'x' }).identity();
    const b = new RedisLeaseLock({ connection: redis, name: 'x' }).identity();
    assert.match(a, /^.+_[0-9a-f-]{36}$/);
    assert.notEqual(a, b);
  });

  it('a request to an unreachable Redis rejects as soon as its signal aborts', async () => {
    const { Redis } = await import('ioredis');
    const dead = new Redis({ port: 1, lazyConnect: true, maxRetriesPerRequest: null, retryStrategy: () => 50 });
    dead.on('error', () => undefined);
    const lock = new RedisLeaseLock({ connection: dead, name: 'x', identity: 'a' });
    const started = Date.now();
    await assert.rejects(lock.get(AbortSignal.timeout(100)));
    assert.ok(Date.now() - started < 1000);
    dead.disconnect();
  });
});
