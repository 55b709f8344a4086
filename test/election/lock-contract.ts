import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { LeaderElector } from '../../src/election/leader-elector.js';
import { serializeRecord, type LeaderElectionRecord } from '../../src/election/record.js';
import { LockConflictError, LockNotFoundError, type ResourceLock } from '../../src/election/resource-lock.js';

/** What a lock implementation provides to the shared contract suite. */
export interface LockFixture {
  /** A lock on the fixture's record, writing as `identity`. Every call of one fixture shares one record. */
  makeLock(identity: string): ResourceLock;
  /** Deletes the shared record, as an operator would. */
  deleteRecord(): Promise<void>;
  close(): Promise<void>;
}

const signal = (): AbortSignal => AbortSignal.timeout(5000);

function sample(holder: string, transitions = 0): LeaderElectionRecord {
  const now = Date.now();
  return { holderIdentity: holder, leaseDurationSeconds: 15, acquireTime: now - 1234, renewTime: now, leaderTransitions: transitions };
}

/**
 * The behaviour every `ResourceLock` must share, run against each real lock. `setup` is called once per
 * test and must return a fixture with a fresh, empty record.
 */
export function runLockContract(name: string, setup: () => Promise<LockFixture>): void {
  describe(`ResourceLock contract: ${name}`, () => {
    let fixture: LockFixture;
    before(async () => {
      fixture = await setup();
    });
    after(async () => {
      await fixture.close();
    });

    const fresh = async (): Promise<void> => {
      await fixture.deleteRecord();
    };

    it('get on a missing record throws LockNotFoundError', async () => {
      await fresh();
      await assert.rejects(fixture.makeLock('a').get(signal()), LockNotFoundError);
    });

    it('create then get round-trips the record to the millisecond', async () => {
      await fresh();
      const lock = fixture.makeLock('a');
      const record = sample('a', 3);
      await lock.create(record, signal());
      const observed = await fixture.makeLock('b').get(signal());
      assert.deepEqual(observed.record, record);
      assert.equal(observed.raw, serializeRecord(record));
      assert.equal(lock.identity(), 'a');
      assert.ok(lock.describe().length > 0);
    });

    it('create on an existing record throws LockConflictError', async () => {
      await fresh();
      await fixture.makeLock('a').create(sample('a'), signal());
      await assert.rejects(fixture.makeLock('b').create(sample('b'), signal()), LockConflictError);
    });

    it('update on a version another lock handed out is refused', async () => {
      await fresh();
      await fixture.makeLock('a').create(sample('a'), signal());
      const foreign = { generation: (await fixture.makeLock('x').get(signal())).version.generation };
      await assert.rejects(fixture.makeLock('b').update(sample('b'), foreign, signal()), TypeError);
    });

    it('compare-and-swap: of two candidates that observed the same version exactly one wins', async () => {
      await fresh();
      await fixture.makeLock('seed').create(sample(''), signal());
      const a = fixture.makeLock('a');
      const b = fixture.makeLock('b');
      const [seenByA, seenByB] = [await a.get(signal()), await b.get(signal())];
      const results = await Promise.allSettled([a.update(sample('a', 1), seenByA.version, signal()), b.update(sample('b', 1), seenByB.version, signal())]);
      const won = results.filter((r) => r.status === 'fulfilled');
      const lost = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
      assert.equal(won.length, 1);
      assert.equal(lost.length, 1);
      assert.ok(lost[0]!.reason instanceof LockConflictError, `expected LockConflictError, got ${String(lost[0]!.reason)}`);
    });

    it('consecutive updates by the holder succeed on the version it wrote', async () => {
      await fresh();
      const a = fixture.makeLock('a');
      let version = await a.create(sample('a'), signal());
      version = await a.update(sample('a', 0), version, signal());
      await a.update(sample('a', 0), version, signal());
      assert.equal((await fixture.makeLock('x').get(signal())).record.holderIdentity, 'a');
    });

    it('a write based on an old version fails even after the same lock read a newer one', async () => {
      await fresh();
      const a = fixture.makeLock('a');
      const stale = await a.create(sample('a'), signal());
      const b = fixture.makeLock('b');
      await b.update(sample('b', 1), (await b.get(signal())).version, signal());
      // A read for another purpose (a release's check) must not become the base of the stale write.
      await a.get(signal());
      await assert.rejects(a.update(sample('a', 0), stale, signal()), LockConflictError);
      assert.equal((await fixture.makeLock('x').get(signal())).record.holderIdentity, 'b');
    });

    it('update after the record was deleted throws LockNotFoundError or LockConflictError', async () => {
      await fresh();
      const a = fixture.makeLock('a');
      const version = await a.create(sample('a'), signal());
      await fixture.deleteRecord();
      await assert.rejects(a.update(sample('a'), version, signal()), (e: unknown) => e instanceof LockNotFoundError || e instanceof LockConflictError);
    });

    it('generation is shared by observers and changes when the record is recreated', async () => {
      await fresh();
      const a = fixture.makeLock('a');
      const first = (await a.create(sample('a'), signal())).generation;
      assert.ok(first.length > 0);
      const b = fixture.makeLock('b');
      assert.equal((await b.get(signal())).version.generation, first);
      await fixture.deleteRecord();
      assert.notEqual((await a.create(sample('a'), signal())).generation, first);
    });

    it('an already aborted signal rejects without waiting', async () => {
      await fresh();
      const controller = new AbortController();
      controller.abort(new Error('stop'));
      const started = Date.now();
      await assert.rejects(fixture.makeLock('a').get(controller.signal));
      assert.ok(Date.now() - started < 1000);
    });

    it('drives a real elector: acquire, release on cancel, and a follower takes over quickly', async () => {
      await fresh();
      const timing = { leaseDurationMs: 3000, renewDeadlineMs: 2000, retryPeriodMs: 200 };
      const startedA: number[] = [];
      const stop = new AbortController();
      const a = new LeaderElector({
        lock: fixture.makeLock('a'),
        ...timing,
        releaseOnCancel: true,
        callbacks: { onStartedLeading: (_s, term) => void startedA.push(term.leaderTransitions), onStoppedLeading: () => undefined },
      });
      const runA = a.run(stop.signal);
      while (!a.isLeader()) await new Promise((r) => setTimeout(r, 20));
      assert.equal(a.term()?.leaderTransitions, 0);
      assert.ok(a.term()?.generation);

      const followerStop = new AbortController();
      let bLedAt = 0;
      const b = new LeaderElector({
        lock: fixture.makeLock('b'),
        ...timing,
        callbacks: { onStartedLeading: () => void (bLedAt = Date.now()), onStoppedLeading: () => undefined },
      });
      const runB = b.run(followerStop.signal);
      await new Promise((r) => setTimeout(r, 500));
      assert.equal(b.isLeader(), false);
      assert.equal(b.getLeader(), 'a');

      const releasedAt = Date.now();
      stop.abort(new Error('shutdown'));
      await runA;
      while (!bLedAt) await new Promise((r) => setTimeout(r, 20));
      // A release lets the follower in after about one jittered RetryPeriod, not a LeaseDuration.
      assert.ok(bLedAt - releasedAt < 2.2 * timing.retryPeriodMs + 500, `takeover took ${bLedAt - releasedAt} ms`);
      assert.equal(b.term()?.leaderTransitions, 1);
      followerStop.abort();
      await runB;
    });
  });
}
