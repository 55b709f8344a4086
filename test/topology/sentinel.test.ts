import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Redis } from 'ioredis';
import { RedisLeaseLock } from '../../src/election/redis-lock.js';
import type { LeaderElectionRecord } from '../../src/election/record.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { Queue } from 'bullmq';
import { DurabilityError, DurableLock, ReplicaWait } from '../../src/redis/durability.js';
import { KeySpace } from '../../src/redis/keys.js';
import { RedisConnections } from '../../src/redis/redis-topology.js';
import { TickLedger } from '../../src/ledger/tick-ledger.js';
import { createScheduler } from '../../src/scheduler.js';
import type { RedisProcess } from '../support/redis-process.js';
import { startSentinelGroup, type TestSentinelGroup } from '../support/redis-sentinel.js';
import { assertExactlyOnce } from '../support/topology-audit.js';
import { untilAcknowledged } from '../support/acknowledged.js';
import { until } from '../support/until.js';
import { JOB_NAMES, TopologyRun } from './fixtures/runs.js';


const record = (holder: string, transitions: number, now: number): LeaderElectionRecord => ({
  holderIdentity: holder,
  leaseDurationSeconds: 4,
  acquireTime: now,
  renewTime: now,
  leaderTransitions: transitions,
});

describe('Redis Sentinel (1 primary, 2 replicas, 3 sentinels; real processes)', () => {
  let group: TestSentinelGroup;

  /**
   * The primary's port in `sentinel`'s own configuration, once no failover is in progress there; undefined
   * meanwhile, or when it does not answer. (During a failover its leader already advertises the promoted
   * node in get-master-addr-by-name, before it switches and publishes +switch-master.)
   */
  const primaryKnownBy = async (sentinel: RedisProcess): Promise<number | undefined> => {
    const client = sentinel.client({ commandTimeout: 1_000, retryStrategy: () => null });
    try {
      const fields = (await client.call('SENTINEL', 'MASTER', group.masterName)) as string[];
      const field = (name: string): string => fields[fields.indexOf(name) + 1] ?? '';
      return field('flags').includes('failover_in_progress') ? undefined : Number(field('port'));
    } catch {
      return undefined;
    } finally {
      client.disconnect();
    }
  };

  before(async () => {
    group = await startSentinelGroup();
  });
  after(async () => {
    await group.close();
  });

  it('a primary frozen past down-after, resumed and demoted cannot give a stale leader a tick: its writes are never confirmed', { timeout: 90_000 }, async (t) => {
    const keys = new KeySpace('leasebeat', 'frozen');
    const oldPrimary = await group.primary();
    // Leader A talks to the primary's address directly, as a client pinned to an old address (a DNS
    // endpoint, a URL instead of Sentinel) does: the worst case. B reaches Redis through the sentinels.
    const a = oldPrimary.client({ commandTimeout: 3_000, maxRetriesPerRequest: 2 });
    const connections = RedisConnections.fromUrl(group.url);
    const b = connections.open('control') as Redis;
    b.on('error', () => undefined);
    // What A's topology gives it: WAIT for a replica, then ask the sentinels whether that was the primary.
    const primaryCheck = connections.sentinelPrimaryCheck()!;
    const waitA = new ReplicaWait(a, { minReplicas: 1, timeoutMs: 300, primaryCheck });
    const waitB = new ReplicaWait(b, { minReplicas: 1, timeoutMs: 2_000, primaryCheck });
    const lockA = new DurableLock(new RedisLeaseLock({ connection: a, name: 'frozen', identity: 'A' }), 'leasebeat:{frozen}:lease', waitA);
    const lockB = new DurableLock(new RedisLeaseLock({ connection: b, name: 'frozen', identity: 'B' }), 'leasebeat:{frozen}:lease', waitB);
    const ledgerA = new TickLedger(a, keys, waitA);
    const ledgerB = new TickLedger(b, keys, waitB);
    const signal = AbortSignal.timeout(60_000);
    const tick1 = Date.UTC(2026, 0, 1, 0, 0, 1);
    const tick2 = tick1 + 1_000;
    try {
      // Term 0 of A: lease, fence and the first tick, each confirmed by a replica.
      const versionA = await lockA.create(record('A', 0, Date.now()), signal);
      const observed = await lockA.get(signal);
      const tokenA = { generation: (observed.version as unknown as { generation: string }).generation, leaderTransitions: 0 };
      assert.deepEqual(await ledgerA.raiseFence(tokenA, 'A', Date.now()), { ok: true });
      assert.deepEqual(await ledgerA.claim(tokenA, 'job', tick1, 'job@1'), { kind: 'claimed', retry: false });

      // The primary stalls past down-after; the sentinels promote a replica; then it resumes.
      oldPrimary.freeze();
      const promoted = await group.waitForPromotion(oldPrimary);
      oldPrimary.resume();
      // The window of issue 13: the old primary still believes it is the primary and accepts writes.
      assert.equal(((await a.call('ROLE')) as [string])[0], 'master', 'the resumed node still acts as a primary (else this test proves nothing)');

      // A renews its lease and claims the next tick there. Both writes land on the stale primary…
      const renewal = lockA.update(record('A', 0, Date.now()), versionA, signal);
      await assert.rejects(renewal, DurabilityError, 'the renewal is not confirmed: A stops leading at its renew deadline');
      await assert.rejects(ledgerA.claim(tokenA, 'job', tick2, 'job@2'), DurabilityError, 'the claim is not confirmed: A must not add the tick');
      assert.match((await a.hget(keys.ledger('job'), String(tick2))) ?? '', /^claimed\|/, '…the claim did land on the stale primary');
      // A retries as the producer does: still unconfirmed, however often.
      await assert.rejects(ledgerA.claim(tokenA, 'job', tick2, 'job@2'), DurabilityError);

      // B, on the promoted primary, sees A's confirmed term 0 (not A's unconfirmed writes) and takes over.
      // B's control connection replays nothing: a command sent while it follows the promotion fails, and
      // the elector would simply retry. Wait until it has followed for good, as the elector's next rounds
      // would: it may first reach the resumed old primary (whose demotion then kills its clients), and its
      // failover detector drops it again at each sentinel's +switch-master, which a sentinel publishes as it
      // switches (the failover's leader last, once the other replica follows the promoted node). So: every
      // sentinel has switched, then B answers from the promoted node.
      await until('every sentinel to have switched to the promoted node', async () => (await Promise.all(group.sentinels.map(primaryKnownBy))).every((port) => port === promoted.port), 30_000);
      await until("B's connection to follow the promotion", async () => b.stream.remotePort === promoted.port && (await b.ping().then(() => true, () => false)), 30_000);
      const seen = await lockB.get(signal);
      assert.equal(seen.record.holderIdentity, 'A');
      assert.equal(seen.record.leaderTransitions, 0);
      // Until a replica follows the new primary, B's writes are not confirmed either; B retries, as the
      // elector does (re-read, then renew its own record or take over A's).
      await untilAcknowledged('B taking over', async () => {
        const current = await lockB.get(signal);
        const mine = current.record.holderIdentity === 'B';
        await lockB.update(record('B', mine ? current.record.leaderTransitions : current.record.leaderTransitions + 1, Date.now()), current.version, signal);
      });
      const tokenB = { generation: tokenA.generation, leaderTransitions: 1 };
      assert.deepEqual(await ledgerB.raiseFence(tokenB, 'B', Date.now()), { ok: true });
      assert.deepEqual(await ledgerB.claim(tokenB, 'job', tick1, 'job@1'), { kind: 'claimed', retry: true }, 'tick 1 (confirmed by A, never added) is finished by B');
      assert.deepEqual(await ledgerB.claim(tokenB, 'job', tick2, 'job@2'), { kind: 'claimed', retry: false }, 'tick 2 is fresh on the promoted primary: A never had it');

      // The old primary is demoted and resyncs: A's unconfirmed writes vanish, A's token is fenced.
      await group.waitForReplica(oldPrimary);
      await until('the demoted node to resync from the new primary', async () => (await a.hget(keys.fence, 'transitions').catch(() => null)) === '1');
      assert.match((await a.hget(keys.ledger('job'), String(tick2))) ?? '', new RegExp(`^claimed\\|${tokenA.generation}\\|1\\|`), "A's claim of tick 2 is gone; B's stands");
      assert.deepEqual(await ledgerB.claim(tokenA, 'job', tick2 + 1_000, 'job@3', { previousTick: tick2 }), { kind: 'fenced' }, "A's term is fenced on the new primary");
      const lease = await lockB.get(signal);
      assert.deepEqual([lease.record.holderIdentity, lease.record.leaderTransitions], ['B', 1]);
      t.diagnostic(`promoted ${promoted.port} in place of ${oldPrimary.port}; A's renewal and claims on the stale primary were refused (${waitA.stats.unconfirmed} unconfirmed)`);
    } finally {
      a.disconnect();
      b.disconnect();
      primaryCheck.close();
    }
  });

  it('createScheduler on a redis+sentinel:// URL waits for a replica before a tick counts: with the replicas frozen, nothing is added', { timeout: 90_000 }, async (t) => {
    const run = new TopologyRun(group.url, 'sentinel-replicas');
    const scheduler = createScheduler(run.scheduler());
    const observer = RedisConnections.fromUrl(group.url).open('control') as Redis;
    observer.on('error', () => undefined);
    const primary = await group.primary();
    const replicas = group.nodes.filter((node) => node !== primary && node.running);
    try {
      await scheduler.start();
      await until('every job to run a few times', () => run.ranAtLeast(3), 30_000);
      // Frozen for less than RenewDeadline: a leader whose lease alone waited would go on adding ticks
      // meanwhile; the claims must wait too. What was claimed when the replicas froze may still be added.
      const keys = run.keys;
      for (const replica of replicas) replica.freeze();
      const frozenAt = Date.now();
      const claimedBefore = new Set((await Promise.all(JOB_NAMES.map(async (job) => (await observer.hkeys(keys.ledger(job))).map((tick) => `${job}@${tick}`)))).flat());
      await sleep(1_800);
      const resumedAt = Date.now();
      for (const replica of replicas) replica.resume();
      await until('runs of ticks after the replicas came back', () => run.ranSince(resumedAt), 30_000);
      await scheduler.stop();

      // From BullMQ's own records (the fixtures put each job on its own queue, named after it): the jobs
      // added while frozen whose claim no replica could have acknowledged.
      const added: Array<{ id: string; at: number }> = [];
      for (const queue of JOB_NAMES) {
        const bull = new Queue(queue, { connection: observer, prefix: run.bullPrefix });
        for (const job of await bull.getJobs(['completed', 'failed', 'active', 'waiting', 'delayed'])) added.push({ id: job.id!, at: job.timestamp });
        await bull.close();
      }
      const unconfirmed = added.filter(({ id, at }) => at > frozenAt && at < resumedAt && !claimedBefore.has(id));
      const report = await run.audit(observer);
      const duringFreeze = added.filter(({ at }) => at > frozenAt && at < resumedAt);
      t.diagnostic(`${added.length} jobs added; ${duringFreeze.length} while the replicas were frozen, all claimed before; ${JSON.stringify(report.summary)}`);
      assert.deepEqual(unconfirmed, [], 'no job added from a claim made while no replica could acknowledge it');
      assertExactlyOnce(report, 'the ticks of the freeze ran once the replicas were back (catch-up)');
    } finally {
      for (const replica of replicas) replica.resume();
      await scheduler.stop();
      observer.disconnect();
    }
  });

  it('createScheduler on a redis+sentinel:// URL follows a promotion and keeps every tick exactly once across a kill of the primary during steady ticking', { timeout: 90_000 }, async (t) => {
    const run = new TopologyRun(group.url, 'sentinel-run');
    // Only the URL: the connections, the durable lock and ledger are createScheduler's.
    const scheduler = createScheduler(run.scheduler());
    const observer = RedisConnections.fromUrl(group.url).open('control') as Redis;
    observer.on('error', () => undefined);
    try {
      await scheduler.start();
      await until('every job to run a few times', () => run.ranAtLeast(3), 30_000);
      const old = await group.primary();
      const faultAt = Date.now();
      await old.kill();
      const promoted = await group.waitForPromotion(old);
      const promotedMs = Date.now() - faultAt;
      const promotedAt = Date.now();
      await until('runs of ticks after the promotion', () => run.ranSince(promotedAt), 30_000);
      const resumedMs = Date.now() - faultAt;
      const resumedAt = Date.now();
      await until('three more seconds of ticks', () => run.ranSince(resumedAt + 3_000), 30_000);
      await scheduler.stop();

      const ledger = new TickLedger(observer, run.keys);
      const report = await run.audit(observer);
      t.diagnostic(`promoted ${promoted.port} in place of ${old.port}; fault → promotion ${promotedMs} ms, → runs of new ticks ${resumedMs} ms; term ${(await ledger.fence()).leaderTransitions}; ${JSON.stringify(report.summary)}`);
      assertExactlyOnce(report);
    } finally {
      await scheduler.stop();
      observer.disconnect();
    }
  });
});
