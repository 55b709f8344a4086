import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { LeaderElector } from '../../src/election/leader-elector.js';
import type { LeaderElectionRecord, Term } from '../../src/election/record.js';
import { RedisLeaseLock } from '../../src/election/redis-lock.js';
import { LockConflictError } from '../../src/election/resource-lock.js';
import { leaderAndFollower, slowPollTiming, takeoverAfterRelease } from '../support/contenders.js';
import { startRedis, type TestRedis } from '../support/redis-server.js';
import { until } from '../support/until.js';
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

  const signal = (): AbortSignal => AbortSignal.timeout(5000);
  const record = (holder: string, transitions = 0): LeaderElectionRecord => ({
    holderIdentity: holder, leaseDurationSeconds: 15, acquireTime: 1000, renewTime: 2000, leaderTransitions: transitions,
  });

  it('appends every successful write, and only those, to the history stream written by the same script', async () => {
    const a = new RedisLeaseLock({ connection: redis, name: 'history', identity: 'a' });
    const b = new RedisLeaseLock({ connection: redis, name: 'history', identity: 'b' });
    assert.equal(a.historyKey, 'leasebeat:{history}:lease:history');
    const created = await a.create(record('a'), signal());
    const renewed = await a.update(record('a'), created, signal());
    await assert.rejects(b.update(record('b', 1), created, signal()), LockConflictError);
    await b.update(record('b', 1), (await b.get(signal())).version, signal());
    const history = await a.history();
    assert.deepEqual(history.map((h) => [h.op, h.record.holderIdentity, h.record.leaderTransitions, h.version]), [
      ['create', 'a', 0, 1], ['update', 'a', 0, 2], ['update', 'b', 1, 3],
    ]);
    assert.ok(history.every((h) => h.generation === renewed.generation && h.record.leaseDurationSeconds === 15));
    assert.ok(history.every((h, i) => i === 0 || h.at >= history[i - 1]!.at));
  });

  it('a damaged record reads as damaged and is replaced, under a new generation, only while unchanged', async () => {
    const key = 'leasebeat:{damaged}:lease';
    await redis.del(key);
    await redis.hset(key, 'holderIdentity', 'ghost', 'leaderTransitions', '4');
    const lock = new RedisLeaseLock({ connection: redis, name: 'damaged', identity: 'a' });
    const seen = await lock.get(signal());
    assert.match(seen.damaged ?? '', /missing leaseDurationSeconds, acquireTime, renewTime, generation, version/);
    await redis.hset(key, 'renewTime', '5');
    await assert.rejects(lock.update(record('a', 5), seen.version, signal()), LockConflictError, 'it changed since it was read');
    const again = await lock.get(signal());
    const version = await lock.update(record('a', 5), again.version, signal());
    assert.ok(version.generation.length > 0);
    const repaired = await lock.get(signal());
    assert.equal(repaired.damaged, undefined);
    assert.equal(repaired.record.holderIdentity, 'a');
    assert.equal(repaired.version.generation, version.generation);
  });

  it('an elector takes over a damaged record once it stayed unchanged for a lease duration, never before', async () => {
    const key = 'leasebeat:{damaged-elector}:lease';
    await redis.del(key);
    // A partial hash: no version and no generation, e.g. written by hand or by an older tool.
    await redis.hset(key, 'holderIdentity', 'ghost', 'leaseDurationSeconds', '1', 'leaderTransitions', '4');
    const timing = { leaseDurationMs: 1500, renewDeadlineMs: 1000, retryPeriodMs: 100 };
    let takeover: { term: Term; afterMs: number } | undefined;
    const started = Date.now();
    const elector = new LeaderElector({
      lock: new RedisLeaseLock({ connection: redis, name: 'damaged-elector', identity: 'a' }),
      ...timing,
      callbacks: { onStartedLeading: (_signal, term) => void (takeover ??= { term, afterMs: Date.now() - started }), onStoppedLeading: () => undefined },
    });
    const stop = new AbortController();
    const run = elector.run(stop.signal);
    try {
      const { term, afterMs } = await until('the damaged record to be taken over', () => takeover, 10_000);
      // The damaged record's own duration (1 s) is not trusted: the configured lease duration is waited.
      assert.ok(afterMs >= timing.leaseDurationMs, `took over after ${afterMs} ms`);
      assert.equal(term.leaderTransitions, 5);
      const fields = await redis.hgetall(key);
      assert.equal(fields.holderIdentity, 'a');
      assert.equal(fields.leaderTransitions, '5');
      // A new generation with a version count of its own (the renewals since have moved it on).
      assert.ok(Number(fields.version) >= 1, `version ${fields.version}`);
      assert.ok(fields.generation);
      assert.equal(fields.generation, term.generation);
    } finally {
      stop.abort();
      await run;
    }
  });

  describe('change feed', () => {
    const timing = { leaseDurationMs: 3000, renewDeadlineMs: 2000, retryPeriodMs: 200 };
    const connections: Redis[] = [];
    after(() => connections.forEach((c) => c.disconnect()));

    /** A lock on its own connection, so that a test can cut one candidate off as a crash would. */
    function lockOn(name: string, identity: string): { lock: RedisLeaseLock; connection: Redis } {
      const connection = server.client();
      connection.on('error', () => undefined);
      connections.push(connection);
      return { lock: new RedisLeaseLock({ connection, name, identity }), connection };
    }

    it('publishes every write; a release wakes the follower long before its next poll', async () => {
      const leaderLock = lockOn('feed-release', 'a').lock;
      const subscribers = async (): Promise<boolean> => {
        const [, count] = (await redis.pubsub('NUMSUB', leaderLock.channel)) as [string, number];
        return count >= 2;
      };
      const tookMs = await takeoverAfterRelease(leaderLock, lockOn('feed-release', 'b').lock, subscribers);
      assert.ok(tookMs < slowPollTiming.retryPeriodMs / 2, `took over ${tookMs} ms after the release began`);
    });

    it('a crashed leader is taken over at its lease expiry, to within a few tens of ms', async () => {
      const a = lockOn('feed-crash', 'a');
      const { leader, follower } = await leaderAndFollower(a.lock, lockOn('feed-crash', 'b').lock, timing, 700);
      // A crash from the outside: a's connection goes away, so it neither renews nor releases.
      a.connection.disconnect();
      const history = await new RedisLeaseLock({ connection: redis, name: 'feed-crash' }).history();
      const lastWriteByA = history.filter((h) => h.record.holderIdentity === 'a').at(-1)!.at;
      await until('b to lead', () => follower.ledAt > 0);
      const afterLastRenewal = follower.ledAt - lastWriteByA;
      assert.ok(afterLastRenewal >= timing.leaseDurationMs - 50, `b took over only ${afterLastRenewal} ms after a's last renewal`);
      assert.ok(afterLastRenewal < timing.leaseDurationMs + 150, `b took over ${afterLastRenewal} ms after a's last renewal`);
      await Promise.all([leader.stop(), follower.stop()]);
    });

    it('a subscriber ioredis ended for good is opened again, and the feed reports itself live', async () => {
      // No retry strategy: on a lost connection ioredis ends the subscriber for good, as its Sentinel
      // failover detector does when a promotion cuts a reconnect short (ioredis #1683).
      const connection = new Redis({ host: '127.0.0.1', port: server.port, retryStrategy: () => null });
      connection.on('error', () => undefined);
      connections.push(connection);
      const lock = new RedisLeaseLock({ connection, name: 'feed-ended', identity: 'a' });
      const live: boolean[] = [];
      const watching = new AbortController();
      lock.watch(watching.signal, { live: (up) => live.push(up), change: () => undefined });
      try {
        await until('the feed live', () => live.at(-1) === true);
        await redis.client('KILL', 'TYPE', 'pubsub');
        await until('the feed down', () => live.includes(false));
        await until('the feed live again', () => live.at(-1) === true);
      } finally {
        watching.abort();
      }
    });

    it('a dropped subscriber (lost messages) resyncs; the takeover still happens exactly once', async () => {
      const { leader, follower } = await leaderAndFollower(lockOn('feed-lost', 'a').lock, lockOn('feed-lost', 'b').lock, timing, 500);
      await redis.client('KILL', 'TYPE', 'pubsub');
      await leader.stop();
      await until('b to lead', () => follower.ledAt > 0, timing.leaseDurationMs + 2_000);
      await new Promise((resolve) => setTimeout(resolve, 500));
      assert.equal(follower.terms, 1);
      const history = await new RedisLeaseLock({ connection: redis, name: 'feed-lost' }).history();
      const holders = new Map<number, Set<string>>();
      for (const h of history) if (h.record.holderIdentity) holders.set(h.record.leaderTransitions, (holders.get(h.record.leaderTransitions) ?? new Set()).add(h.record.holderIdentity));
      assert.deepEqual([...holders.values()].map((set) => [...set]), [['a'], ['b']]);
      await follower.stop();
    });
  });
});
