import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ElectionConfigError, type LeaderCallbacks, type LeaderElectionConfig } from '../../src/election/config.js';
import { LeaderElector } from '../../src/election/leader-elector.js';
import type { LeaderElectionRecord, Term } from '../../src/election/record.js';
import { LockConflictError } from '../../src/election/resource-lock.js';
import { advanceTogether, ManualClock, settle } from '../support/manual-clock.js';
import { MemoryLeaseStore, MemoryLock } from '../support/memory-lock.js';

const LEASE = 15_000;
const RENEW = 10_000;
const RETRY = 2_000;
/** min(20 ms, RetryPeriod / 10): the longest a candidate waits before contending for a released lease. */
const MAX_STAGGER = 20;
/** A step of the wall clock far beyond every duration of the election. */
const HOUR = 3_600_000;

interface Harness {
  clock: ManualClock;
  store: MemoryLeaseStore;
  elector: LeaderElector;
  started: Term[];
  stopped: number;
  newLeaders: string[];
  leaderSignals: AbortSignal[];
}

function harness(options: Partial<LeaderElectionConfig> & { identity?: string; store?: MemoryLeaseStore; clock?: ManualClock; feed?: boolean } = {}): Harness {
  const clock = options.clock ?? new ManualClock();
  const store = options.store ?? new MemoryLeaseStore();
  const h: Harness = { clock, store, started: [], stopped: 0, newLeaders: [], leaderSignals: [], elector: undefined as unknown as LeaderElector };
  const callbacks: LeaderCallbacks = {
    onStartedLeading: (signal, term) => {
      h.started.push(term);
      h.leaderSignals.push(signal);
    },
    onStoppedLeading: () => void h.stopped++,
    onNewLeader: (id) => void h.newLeaders.push(id),
  };
  h.elector = new LeaderElector({
    lock: new MemoryLock(store, options.identity ?? 'me', { feed: options.feed }),
    leaseDurationMs: LEASE,
    renewDeadlineMs: RENEW,
    retryPeriodMs: RETRY,
    clock,
    random: () => 0,
    callbacks,
    ...options,
  });
  return h;
}

/**
 * Campaigns through the public API, as the scheduler does; `stop` cancels the run and waits for it to end
 * (with `releaseOnCancel`, after the release).
 */
function campaign(h: Harness): { stop: () => Promise<void> } {
  const control = new AbortController();
  const done = h.elector.run(control.signal);
  return {
    stop: async () => {
      control.abort();
      await done;
    },
  };
}

function held(holder: string, clock: ManualClock, extra: Partial<LeaderElectionRecord> = {}): LeaderElectionRecord {
  return { holderIdentity: holder, leaseDurationSeconds: 10, acquireTime: clock.now(), renewTime: clock.now(), leaderTransitions: 0, ...extra };
}

/** L1 and L2 from the store's own write history: transitions never fall, and no token has two holders. */
function assertTermOrder(store: MemoryLeaseStore): void {
  const holders = new Map<string, string>();
  let previous = -1;
  for (const write of store.writes) {
    const { holderIdentity, leaderTransitions } = write.record;
    assert.ok(leaderTransitions >= previous, `transitions went back from ${previous} to ${leaderTransitions} (write by ${write.identity})`);
    previous = leaderTransitions;
    if (holderIdentity === '') continue;
    const token = `${write.generation}/${leaderTransitions}`;
    assert.equal(holders.get(token) ?? holderIdentity, holderIdentity, `token ${token} held by two holders`);
    holders.set(token, holderIdentity);
  }
}

describe('config validation', () => {
  const lock = new MemoryLock(new MemoryLeaseStore(), 'me');
  const callbacks = { onStartedLeading: () => undefined, onStoppedLeading: () => undefined };
  const make = (extra: Partial<LeaderElectionConfig>): LeaderElector => new LeaderElector({ lock, callbacks, ...extra });

  it('applies the client-go defaults 15 s / 10 s / 2 s and a request timeout of RenewDeadline/2', () => {
    const { settings } = make({});
    assert.equal(settings.leaseDurationMs, 15_000);
    assert.equal(settings.renewDeadlineMs, 10_000);
    assert.equal(settings.retryPeriodMs, 2_000);
    assert.equal(settings.requestTimeoutMs, 5_000);
  });

  it('rejects LeaseDuration <= RenewDeadline, naming both values', () => {
    assert.throws(() => make({ leaseDurationMs: 10_000, renewDeadlineMs: 10_000 }), /leaseDurationMs \(10000\) must be greater than renewDeadlineMs \(10000\)/);
  });

  it('rejects RenewDeadline <= 1.2 × RetryPeriod', () => {
    assert.throws(() => make({ renewDeadlineMs: 2_400, retryPeriodMs: 2_000 }), /renewDeadlineMs \(2400\) must be greater than 1.2 × retryPeriodMs/);
    assert.doesNotThrow(() => make({ renewDeadlineMs: 2_401, retryPeriodMs: 2_000 }));
  });

  it('rejects non-positive durations', () => {
    assert.throws(() => make({ retryPeriodMs: 0 }), /retryPeriodMs must be a positive/);
    assert.throws(() => make({ leaseDurationMs: -1 }), /leaseDurationMs must be a positive/);
    assert.throws(() => make({ renewDeadlineMs: Number.NaN }), /renewDeadlineMs must be a positive/);
  });

  it('rejects a request timeout above RenewDeadline / 2', () => {
    assert.throws(() => make({ requestTimeoutMs: 6_000 }), /requestTimeoutMs \(6000\) must be at most/);
  });

  it('requires both leadership callbacks and a non-empty identity', () => {
    assert.throws(() => make({ callbacks: { onStoppedLeading: () => undefined } as unknown as LeaderCallbacks }), /onStartedLeading is required/);
    assert.throws(() => make({ callbacks: { onStartedLeading: () => undefined } as unknown as LeaderCallbacks }), /onStoppedLeading is required/);
    assert.throws(() => make({ lock: new MemoryLock(new MemoryLeaseStore(), '') }), ElectionConfigError);
  });
});

describe('acquire and renew (client-go tryAcquireOrRenew scenarios, driven through run)', () => {
  it('acquires from no object: get, create; transitions 0', async () => {
    const h = harness();
    const c = campaign(h);
    await settle();
    assert.equal(h.started.length, 1);
    // The acquisition (get, create), then the first renewal round, which starts at once.
    assert.deepEqual(h.store.verbs(), ['get', 'create', 'update']);
    assert.equal(h.store.writes[0]!.verb, 'create');
    assert.equal(h.store.record?.holderIdentity, 'me');
    assert.equal(h.store.record?.leaderTransitions, 0);
    assert.equal(h.store.record?.leaseDurationSeconds, 15);
    assert.equal(h.elector.isLeader(), true);
    await c.stop();
  });

  it('acquires from an empty spec: get, update; transitions 1', async () => {
    const h = harness();
    h.store.put({ holderIdentity: '', leaseDurationSeconds: 0, acquireTime: 0, renewTime: 0, leaderTransitions: 0 });
    const c = campaign(h);
    await settle();
    assert.deepEqual(h.store.verbs(), ['get', 'update', 'update']);
    assert.equal(h.started[0]!.leaderTransitions, 1);
    assert.equal(h.store.record?.leaderTransitions, 1);
    await c.stop();
  });

  it('acquires a released lease at once (holder "", duration 1)', async () => {
    const h = harness();
    h.store.put(held('', h.clock, { leaseDurationSeconds: 1, leaderTransitions: 4 }));
    const c = campaign(h);
    await settle();
    assert.deepEqual(h.store.verbs(), ['get', 'update', 'update']);
    assert.equal(h.store.record?.holderIdentity, 'me');
    assert.equal(h.store.record?.leaderTransitions, 5);
    await c.stop();
  });

  it('does not acquire a held lease that has not expired: get only', async () => {
    const h = harness();
    h.store.put(held('other', h.clock));
    const c = campaign(h);
    await settle();
    assert.deepEqual(h.store.verbs(), ['get']);
    assert.equal(h.started.length, 0);
    assert.equal(h.elector.getLeader(), 'other');
    assert.equal(h.elector.isLeader(), false);
    await c.stop();
  });

  it("judges expiry by the record's duration (3 s), not the config's (15 s)", async () => {
    const h = harness();
    h.store.put(held('other', h.clock, { leaseDurationSeconds: 3 }));
    const c = campaign(h);
    await h.clock.advance(2_900);
    assert.deepEqual(h.store.verbs(), ['get', 'get'], 'polled at 0 s and 2 s');
    assert.equal(h.started.length, 0);
    // The next poll, at 4 s, finds the 3 s lease expired: long before the configured 15 s.
    await h.clock.advance(RETRY * 2 - 2_900);
    assert.equal(h.started.length, 1);
    assert.equal(h.store.record?.leaderTransitions, 1);
    await c.stop();
  });

  it('acquires once the record has stayed unchanged for its duration (observed time is old)', async () => {
    const h = harness();
    h.store.put(held('other', h.clock, { leaderTransitions: 7 }));
    const c = campaign(h);
    await h.clock.advance(RETRY * 4);
    assert.equal(h.started.length, 0, '8 s after the record was seen, its 10 s have not passed');
    await h.clock.advance(RETRY);
    assert.equal(h.started.length, 1, 'the poll at 10 s takes it over');
    assert.equal(h.store.record?.leaderTransitions, 8);
    await c.stop();
  });

  it('restarts the countdown when the holder renews (the record changed)', async () => {
    const h = harness();
    h.store.put(held('other', h.clock));
    const c = campaign(h);
    await h.clock.advance(9_000);
    h.store.put(held('other', h.clock));
    // The poll at 10 s sees the renewal: the countdown restarts from there, not from the first read.
    await h.clock.advance(9_000);
    assert.equal(h.started.length, 0, 'only 8 s since the record was seen to change');
    await h.clock.advance(RETRY);
    assert.equal(h.started.length, 1, 'taken over at the first poll 10 s after the change was seen');
    await c.stop();
  });

  it('a record naming this identity from before this term is taken over as a new term (client-go would reuse the token)', async () => {
    const h = harness();
    const acquiredAt = h.clock.now() - 60_000;
    // A restarted process with a reused identity (a StatefulSet pod name, say) finds "its" live lease.
    h.store.put(held('me', h.clock, { acquireTime: acquiredAt, leaderTransitions: 2 }));
    const c = campaign(h);
    await settle();
    assert.deepEqual(h.store.verbs(), ['get', 'update', 'update']);
    assert.equal(h.started[0]!.leaderTransitions, 3, 'a new term gets a fencing token of its own');
    assert.equal(h.store.record?.leaderTransitions, 3);
    assert.equal(h.store.record?.acquireTime, h.clock.now());
    await c.stop();
  });

  it('while leading, renewals keep acquireTime and transitions; the fast path writes without a read', async () => {
    const h = harness();
    const stop = new AbortController();
    const done = h.elector.run(stop.signal);
    await settle();
    const acquiredAt = h.store.record!.acquireTime;
    await h.clock.advance(RETRY * 2);
    // Acquire (get, create), then renewal rounds at once and every RetryPeriod, each a single update.
    assert.deepEqual(h.store.verbs(), ['get', 'create', 'update', 'update', 'update']);
    assert.equal(h.store.record?.renewTime, h.clock.now());
    assert.equal(h.store.record?.acquireTime, acquiredAt);
    assert.equal(h.store.record?.leaderTransitions, 0);
    stop.abort();
    await done;
  });

  it('fast path conflict falls back to the slow path: update(409), get, update', async () => {
    const h = harness();
    const stop = new AbortController();
    const done = h.elector.run(stop.signal);
    await settle();
    h.store.resetCalls();
    h.store.failNext('update', new LockConflictError('conflict'));
    await h.clock.advance(RETRY);
    assert.deepEqual(h.store.verbs(), ['update', 'get', 'update']);
    assert.equal(h.store.record?.holderIdentity, 'me');
    assert.equal(h.store.record?.leaderTransitions, 0);
    assert.equal(h.leaderSignals[0]!.aborted, false);
    stop.abort();
    await done;
  });

  it('two candidates racing for an expired lease: exactly one wins and transitions rise by one', async () => {
    const clock = new ManualClock();
    const store = new MemoryLeaseStore();
    store.put(held('gone', clock, { leaderTransitions: 3 }));
    const a = harness({ identity: 'a', store, clock });
    const b = harness({ identity: 'b', store, clock });
    // Every call takes 100 ms: both candidates read the expired record before either one's write lands.
    store.setLatency(100, clock);
    const stop = new AbortController();
    const runs = [a.elector.run(stop.signal), b.elector.run(stop.signal)];
    await clock.advance(11_000);
    assert.deepEqual([a.started.length, b.started.length].sort(), [0, 1]);
    assert.equal(store.record?.leaderTransitions, 4);
    const writers = new Set(store.calls.filter((call) => call.verb === 'update').map((call) => call.identity));
    assert.deepEqual([...writers].sort(), ['a', 'b'], 'both tried to take it over');
    assertTermOrder(store);
    store.setLatency(0, clock);
    stop.abort();
    await Promise.all(runs);
  });

  it('a skew of ±1 h between the lease renewTime and our clock changes nothing', async () => {
    for (const skew of [-HOUR, HOUR]) {
      const h = harness();
      // The holder's clock is an hour off: its renewTime looks ancient (or from the future) to us.
      h.store.put(held('other', h.clock, { renewTime: h.clock.now() + skew, acquireTime: h.clock.now() + skew }));
      const c = campaign(h);
      await h.clock.advance(9_999);
      assert.equal(h.started.length, 0, `skew ${skew}: must not steal a live lease`);
      await h.clock.advance(1);
      assert.equal(h.started.length, 1, `skew ${skew}: takes over after the observed duration`);
      await c.stop();
    }
  });

  it('our own wall clock stepping by ±1 h neither ends nor stretches a live lease: it lasts its duration of monotonic time', async () => {
    for (const step of [-HOUR, HOUR]) {
      const h = harness();
      h.store.put(held('other', h.clock));
      const c = campaign(h);
      await settle();
      h.clock.set(h.clock.now() + step);
      await h.clock.advance(9_999);
      assert.equal(h.started.length, 0, `step ${step}: must not steal a live lease`);
      await h.clock.advance(1);
      assert.equal(h.started.length, 1, `step ${step}: takes over after the observed duration`);
      await c.stop();
    }
  });
});

describe('release at the end of a term (releaseOnCancel)', () => {
  it('a cancel that lands between acquiring and the term starting ends the term at once and releases', async () => {
    const h = harness({ releaseOnCancel: true });
    const control = new AbortController();
    // The lock records 'became leader' after the acquire's last look at the signal: a shutdown (SIGTERM)
    // arriving there is the interleaving that kept a stopping instance producing until its exit budget.
    const lock = (h.elector as unknown as { config: { lock: MemoryLock } }).config.lock;
    const recordEvent = lock.recordEvent.bind(lock);
    lock.recordEvent = (message: string): void => {
      recordEvent(message);
      if (message.endsWith('became leader')) control.abort(new Error('shutdown'));
    };
    const done = h.elector.run(control.signal);
    let ended = false;
    void done.then(() => (ended = true));
    await settle();
    assert.equal(ended, true, 'run() ended: the term saw the cancel');
    assert.ok(h.leaderSignals.every((signal) => signal.aborted), 'the work of the term was told to stop');
    assert.equal(h.store.record?.holderIdentity, '', 'the lease was released');
  });

  it('one write on our own last version, no read: an empty holder, duration 1, the same transitions', async () => {
    const h = harness({ releaseOnCancel: true });
    h.store.put(held('', h.clock, { leaseDurationSeconds: 1, leaderTransitions: 4 }));
    const c = campaign(h);
    await settle();
    h.store.resetCalls();
    await c.stop();
    assert.deepEqual(h.store.verbs(), ['update']);
    assert.equal(h.store.record?.holderIdentity, '');
    assert.equal(h.store.record?.leaseDurationSeconds, 1);
    assert.equal(h.store.record?.leaderTransitions, 5);
    assert.equal(h.elector.isLeader(), false);
  });

  it('a refused write falls back to reading first: update(409), get, update', async () => {
    const h = harness({ releaseOnCancel: true });
    const c = campaign(h);
    await settle();
    h.store.resetCalls();
    h.store.failNext('update', new LockConflictError('conflict'));
    await c.stop();
    assert.deepEqual(h.store.verbs(), ['update', 'get', 'update']);
    assert.equal(h.store.record?.holderIdentity, '');
    assert.equal(h.store.record?.leaseDurationSeconds, 1);
    assert.equal(h.store.record?.leaderTransitions, 0);
  });

  it('after reading, retries on conflict: update(409), get, update(409), get, update', async () => {
    const h = harness({ releaseOnCancel: true });
    const c = campaign(h);
    await settle();
    h.store.resetCalls();
    h.store.failNext('update', new LockConflictError('conflict'));
    h.store.failNext('update', new LockConflictError('conflict'));
    await c.stop();
    assert.deepEqual(h.store.verbs(), ['update', 'get', 'update', 'get', 'update']);
    assert.equal(h.store.record?.holderIdentity, '');
  });

  it('a term ended by another holder: the release reads and writes nothing', async () => {
    const h = harness({ releaseOnCancel: true });
    const c = campaign(h);
    await settle();
    h.store.put(held('other', h.clock, { leaderTransitions: 2 }));
    h.store.resetCalls();
    await h.clock.advance(RETRY);
    assert.equal(h.leaderSignals[0]!.aborted, true);
    // The renewal (update refused, get: held by another), then the release's read; no write.
    assert.deepEqual(h.store.verbs(), ['update', 'get', 'get']);
    assert.equal(h.store.record?.holderIdentity, 'other');
    await c.stop();
  });

  it('from no object: the write finds none, the read confirms it, nothing is written', async () => {
    const h = harness({ releaseOnCancel: true });
    const c = campaign(h);
    await settle();
    h.store.put(undefined);
    h.store.resetCalls();
    await c.stop();
    assert.deepEqual(h.store.verbs(), ['update', 'get']);
    assert.equal(h.store.record, undefined);
  });

  it('leaves the lease to expire when the record cannot be read', async () => {
    const h = harness({ releaseOnCancel: true });
    const c = campaign(h);
    await settle();
    h.store.resetCalls();
    h.store.failNext('update', new Error('503'));
    h.store.failNext('get', new Error('503'));
    await c.stop();
    assert.deepEqual(h.store.verbs(), ['update', 'get']);
    assert.equal(h.store.record?.holderIdentity, 'me');
  });

  it('never clears a holder that took over after our cached record (checks the record it read)', async () => {
    const h = harness({ releaseOnCancel: true });
    const c = campaign(h);
    await settle();
    h.store.put(held('usurper', h.clock, { leaderTransitions: 1 }));
    h.store.resetCalls();
    await c.stop();
    assert.deepEqual(h.store.verbs(), ['update', 'get']);
    assert.equal(h.store.record?.holderIdentity, 'usurper');
  });
});

describe('run: the acquire and renew loops', () => {
  it('retries acquisition every RetryPeriod with up to 1.2 × jitter', async () => {
    const h = harness({ random: () => 1 });
    h.store.put(held('other', h.clock));
    const stop = new AbortController();
    const done = h.elector.run(stop.signal);
    await settle();
    assert.equal(h.store.verbs().length, 1);
    await h.clock.advance(RETRY * 2.2 - 1);
    assert.equal(h.store.verbs().length, 1);
    await h.clock.advance(1);
    assert.equal(h.store.verbs().length, 2);
    stop.abort();
    await done;
    assert.equal(h.stopped, 0, 'onStoppedLeading is not called when this instance never led');
    assert.equal(h.started.length, 0);
  });

  it('leads, renews every RetryPeriod, reports the term, and on cancel stops, then releases', async () => {
    const h = harness({ releaseOnCancel: true });
    const stop = new AbortController();
    const done = h.elector.run(stop.signal);
    await settle();
    assert.equal(h.started.length, 1);
    assert.equal(h.started[0]!.holderIdentity, 'me');
    assert.equal(h.started[0]!.leaderTransitions, 0);
    assert.equal(h.started[0]!.generation, h.store.generation);
    assert.deepEqual(h.newLeaders, ['me']);
    await h.clock.advance(RETRY * 3);
    assert.deepEqual(h.store.verbs(), ['get', 'create', 'update', 'update', 'update', 'update']);
    assert.equal(h.elector.check(0), undefined);
    stop.abort(new Error('shutdown'));
    await done;
    assert.equal(h.leaderSignals[0]!.aborted, true);
    assert.equal(h.stopped, 1);
    assert.equal(h.store.record?.holderIdentity, '');
    assert.deepEqual(h.store.events, ['me became leader', 'me stopped leading']);
  });

  it('a failing round gives up exactly RenewDeadline after it started: RetryPeriod + RenewDeadline after the last good renewal', async () => {
    const h = harness();
    const stop = new AbortController();
    const done = h.elector.run(stop.signal);
    await settle();
    const lastGood = h.elector.lastRenewTime();
    for (let i = 0; i < 20; i++) h.store.failNext('update', new Error('503'));
    for (let i = 0; i < 20; i++) h.store.failNext('get', new Error('503'));
    await h.clock.advance(RETRY + RENEW - 1);
    assert.equal(h.leaderSignals[0]!.aborted, false);
    await h.clock.advance(1);
    assert.equal(h.leaderSignals[0]!.aborted, true);
    assert.equal(h.clock.now() - lastGood, RETRY + RENEW);
    await done;
    assert.equal(h.stopped, 1);
  });

  it('a hung backend cannot stretch a round past its renew deadline (per-request timeout)', async () => {
    const h = harness();
    const stop = new AbortController();
    const done = h.elector.run(stop.signal);
    await settle();
    const lastGood = h.elector.lastRenewTime();
    h.store.hang('update');
    h.store.hang('get');
    await h.clock.advance(RETRY + RENEW);
    assert.equal(h.leaderSignals[0]!.aborted, true);
    assert.ok(h.clock.now() - lastGood <= RETRY + RENEW);
    await done;
  });

  it('releases on cancel while a renewal hangs', async () => {
    const h = harness({ releaseOnCancel: true });
    const stop = new AbortController();
    const done = h.elector.run(stop.signal);
    await settle();
    h.store.hang('update', 1);
    await h.clock.advance(RETRY);
    assert.equal(h.store.verbs().at(-1), 'update');
    stop.abort(new Error('shutdown'));
    await done;
    assert.equal(h.store.record?.holderIdentity, '');
    assert.deepEqual(h.store.events, ['me became leader', 'me stopped leading']);
  });

  it('a third party overwriting the holder ends leadership at the next renewal', async () => {
    const h = harness({ releaseOnCancel: true });
    const stop = new AbortController();
    const done = h.elector.run(stop.signal);
    await settle();
    h.store.put(held('thief', h.clock, { leaderTransitions: 9 }));
    await h.clock.advance(RETRY);
    assert.equal(h.leaderSignals[0]!.aborted, true);
    await done;
    assert.equal(h.stopped, 1);
    assert.equal(h.store.record?.holderIdentity, 'thief', 'release must not clear the new holder');
    assert.deepEqual(h.newLeaders, ['me', 'thief']);
  });

  it('the lease deleted while leading: the old term ends and, re-campaigning, a new generation begins', async () => {
    const h = harness({ recampaign: true });
    const stop = new AbortController();
    const done = h.elector.run(stop.signal);
    await settle();
    const first = h.started[0]!;
    h.store.put(undefined);
    await h.clock.advance(RETRY);
    assert.equal(h.leaderSignals[0]!.aborted, true);
    await h.clock.advance(RETRY * 3);
    assert.equal(h.started.length, 2);
    assert.notEqual(h.started[1]!.generation, first.generation);
    // The renewal that found no record recreated it (transitions 0) and ended the old term; the next
    // campaign takes that record over as a term of its own.
    assert.equal(h.started[1]!.leaderTransitions, 1);
    stop.abort();
    await done;
    assert.equal(h.stopped, 2);
  });

  it('without recampaign, run returns after one term', async () => {
    const h = harness();
    const done = h.elector.run(new AbortController().signal);
    await settle();
    h.store.put(held('thief', h.clock, { leaderTransitions: 1 }));
    await h.clock.advance(RETRY);
    await done;
    assert.equal(h.started.length, 1);
    assert.equal(h.stopped, 1);
  });

  it('a follower reports each new leader and takes over a released lease', async () => {
    const clock = new ManualClock();
    const store = new MemoryLeaseStore();
    const leader = harness({ identity: 'a', store, clock, releaseOnCancel: true });
    const follower = harness({ identity: 'b', store, clock });
    const stopLeader = new AbortController();
    const stopFollower = new AbortController();
    const leaderRun = leader.elector.run(stopLeader.signal);
    await settle();
    const followerRun = follower.elector.run(stopFollower.signal);
    await clock.advance(RETRY);
    stopLeader.abort();
    await leaderRun;
    await clock.advance(RETRY * 3);
    assert.equal(follower.elector.isLeader(), true);
    // The released record and the takeover fall in one attempt, so '' is never the reported holder here.
    assert.deepEqual(follower.newLeaders, ['a', 'b']);
    assert.equal(follower.started[0]!.leaderTransitions, 1);
    stopFollower.abort();
    await followerRun;
  });
});

describe('check (healthz)', () => {
  it('a follower is always healthy', async () => {
    const h = harness();
    // An hour's lease: the holder never renews in this test, and its lease still does not expire.
    h.store.put(held('other', h.clock, { leaseDurationSeconds: 3_600 }));
    const c = campaign(h);
    await h.clock.advance(LEASE * 10);
    assert.equal(h.elector.isLeader(), false);
    assert.equal(h.elector.check(0), undefined);
    await c.stop();
  });

  it('a leader is healthy until LeaseDuration + tolerance passes without renewal', async () => {
    const h = harness();
    const c = campaign(h);
    await settle();
    // The process stalls (nothing runs, so nothing renews).
    h.clock.freeze(LEASE + 20_000);
    assert.equal(h.elector.check(20_000), undefined);
    h.clock.freeze(1);
    assert.match(h.elector.check(20_000)?.message ?? '', /failed to renew leadership/);
    await c.stop();
  });
});
describe('safety under faults', () => {
  const FAST = { leaseDurationMs: 4_000, renewDeadlineMs: 3_000, retryPeriodMs: 500 };

  it('a leader frozen while its renewal reply is on the wire never takes the lease back when it resumes', async () => {
    const store = new MemoryLeaseStore();
    const clockA = new ManualClock();
    const clockB = new ManualClock(clockA.now());
    const a = harness({ identity: 'a', store, clock: clockA, ...FAST, releaseOnCancel: true, recampaign: true });
    const b = harness({ identity: 'b', store, clock: clockB, ...FAST, releaseOnCancel: true, recampaign: true });
    const stop = new AbortController();
    const runs = [a.elector.run(stop.signal)];
    await settle();
    runs.push(b.elector.run(stop.signal));
    await advanceTogether([clockA, clockB], 1_000);
    assert.equal(a.started.length, 1);

    // A's next renewal takes effect, but its reply stays on the wire: A is frozen from here on.
    const held = store.holdReply('update', 'a');
    let deliver: (() => void) | undefined;
    void held.then((release) => (deliver = release));
    while (!deliver) await advanceTogether([clockA, clockB], 50);
    await advanceTogether([clockB], FAST.leaseDurationMs + 2_000);
    assert.equal(store.record?.holderIdentity, 'b');
    const takeover = store.writes.length;

    // A resumes. An idle Node process wakes in its I/O poll phase, so the late reply is taken in before
    // any timer runs; A's next write is slow, so its (overdue) round deadline fires while it is in flight.
    store.hang('update', 1, 'a');
    clockA.freeze(clockB.now() - clockA.now());
    deliver();
    await settle();
    await advanceTogether([clockA, clockB], 5_000);

    assert.deepEqual(store.writes.slice(takeover).filter((w) => w.identity === 'a'), [], 'A wrote after B took over');
    assert.equal(store.record?.holderIdentity, 'b');
    assert.equal(b.leaderSignals[0]!.aborted, false, 'B kept leading');
    assert.equal(a.leaderSignals[0]!.aborted, true);
    assert.equal(a.started.length, 1, 'A did not start a second term');
    assertTermOrder(store);
    stop.abort();
    await Promise.all(runs);
  });

  it('a late renewal reply counts from when the renewal was sent, not when its reply arrived', async () => {
    const h = harness(FAST);
    const stop = new AbortController();
    const done = h.elector.run(stop.signal);
    await settle();
    const held = h.store.holdReply('update', 'me');
    let deliver: (() => void) | undefined;
    void held.then((release) => (deliver = release));
    while (!deliver) await h.clock.advance(50);
    const sentAt = h.clock.now();
    h.clock.freeze(2_500);
    deliver();
    await settle();
    assert.equal(h.elector.lastRenewTime(), sentAt);
    // The lease counts from sentAt: LeaseDuration after it, the leader's health check sees it lapse.
    h.clock.freeze(FAST.leaseDurationMs + 1 - 2_500);
    assert.match(h.elector.check(0)?.message ?? '', /failed to renew leadership/);
    stop.abort();
    await done;
  });

  it('API latency just under the request timeout does not cost leadership: each round has the full RenewDeadline', async () => {
    const h = harness({ releaseOnCancel: true });
    const stop = new AbortController();
    const done = h.elector.run(stop.signal);
    await settle();
    // 3 s per call against a 5 s request timeout: a renewal whose fast path conflicts takes 9 s in all,
    // which fits a round's 10 s but not the time left since the last good renewal began.
    h.store.setLatency(3_000, h.clock);
    h.store.failNext('update', new LockConflictError('conflict'));
    await h.clock.advance(120_000);
    assert.equal(h.leaderSignals[0]!.aborted, false, 'leadership survived slow but successful renewals');
    assert.equal(h.started.length, 1);
    assert.equal(h.store.record?.holderIdentity, 'me');
    stop.abort();
    h.store.setLatency(0, h.clock);
    await done;
  });

  it('resign ends the term and releases the lease; the resigner stands aside for a lease duration so another takes over', async () => {
    const clock = new ManualClock();
    const store = new MemoryLeaseStore();
    const a = harness({ identity: 'a', store, clock, releaseOnCancel: true, recampaign: true });
    const b = harness({ identity: 'b', store, clock, releaseOnCancel: true, recampaign: true });
    const stop = new AbortController();
    const runs = [a.elector.run(stop.signal)];
    await settle();
    runs.push(b.elector.run(stop.signal));
    await clock.advance(RETRY);
    assert.equal(b.elector.resign('not leading'), false, 'a follower has nothing to resign');
    assert.equal(a.elector.resign('cannot reach Redis'), true);
    await settle();
    assert.equal(a.leaderSignals[0]!.aborted, true);
    assert.match((a.leaderSignals[0]!.reason as Error).message, /resigned: cannot reach Redis/);
    assert.equal(a.stopped, 1);
    await clock.advance(RETRY * 3);
    assert.equal(b.started.length, 1, 'the follower took the released lease within a few RetryPeriods');
    assert.equal(b.started[0]!.leaderTransitions, 1);
    assert.equal(a.started.length, 1);
    // Without a healthy rival the resigner leads again once it has stood aside for a lease duration.
    b.elector.resign('test');
    await clock.advance(LEASE + RETRY * 3);
    assert.equal(a.started.length, 2);
    assertTermOrder(store);
    stop.abort();
    await Promise.all(runs);
  });

  it('a term that ended without a release never hands its token to the next term of the same process', async () => {
    const h = harness({ releaseOnCancel: true, recampaign: true });
    const stop = new AbortController();
    const done = h.elector.run(stop.signal);
    await settle();
    // The backend hangs through a whole round and through the release: the record still names us.
    h.store.hang('update');
    h.store.hang('get');
    await h.clock.advance(RETRY + RENEW + RENEW / 2);
    assert.equal(h.leaderSignals[0]!.aborted, true);
    assert.equal(h.stopped, 1);
    assert.equal(h.store.record?.holderIdentity, 'me');
    h.store.clearFaults();
    await h.clock.advance(RENEW);
    assert.equal(h.started.length, 2);
    assert.equal(h.started[1]!.leaderTransitions, 1, 'the next term has a token of its own');
    assertTermOrder(h.store);
    stop.abort();
    await done;
  });
});

describe('followers on a change feed (no polling)', () => {
  /** Starts `count` electors on one store, the first one leading; returns them and a stop function. */
  async function cluster(count: number, extra: Omit<Partial<LeaderElectionConfig>, 'clock'> = {}) {
    const clock = new ManualClock();
    const store = new MemoryLeaseStore();
    const stop = new AbortController();
    const members = Array.from({ length: count }, (_, i) =>
      harness({ identity: `m${i}`, store, clock, feed: true, releaseOnCancel: true, recampaign: true, ...extra }));
    const stops = members.map(() => new AbortController());
    const runs = members.map((m, i) => m.elector.run(AbortSignal.any([stop.signal, stops[i]!.signal])));
    await settle();
    await clock.advance(RETRY);
    return {
      clock,
      store,
      members,
      /** Freezes one member as a crash would look from outside: none of its requests gets through any more. */
      crash: (i: number) => {
        for (const verb of ['get', 'create', 'update'] as const) store.hang(verb, Infinity, `m${i}`);
      },
      release: async (i: number) => {
        stops[i]!.abort();
        await runs[i];
      },
      /** Stops everyone; time moves on so that a frozen member's bounded release can give up. */
      stopAll: async () => {
        stop.abort();
        let done = false;
        void Promise.all(runs).then(() => (done = true));
        while (!done) await clock.advance(RETRY);
      },
    };
  }

  const reads = (store: MemoryLeaseStore, identity: string): number => store.calls.filter((c) => c.identity === identity && c.verb === 'get').length;
  const writesBy = (store: MemoryLeaseStore, identity: string): number => store.calls.filter((c) => c.identity === identity && c.verb !== 'get').length;

  it('followers do not read the lease while the leader renews, and take over a crashed leader at its expiry to the millisecond', async () => {
    const c = await cluster(2, { leaseDurationMs: LEASE, renewDeadlineMs: RENEW, retryPeriodMs: RETRY });
    const [leader, follower] = c.members as [Harness, Harness];
    assert.equal(leader.started.length, 1);
    const readsBefore = reads(c.store, 'm1');
    await c.clock.advance(RETRY * 10);
    assert.equal(reads(c.store, 'm1'), readsBefore, 'no reads: renewals arrive on the feed');
    // A crash right after a renewal: the follower saw that renewal, and takes over LeaseDuration later.
    const lastRenewal = c.store.writes.at(-1)!;
    assert.equal(lastRenewal.identity, 'm0');
    const renewedAt = c.clock.now();
    c.crash(0);
    await c.clock.advance(LEASE);
    assert.equal(follower.started.length, 0, 'not before the lease has expired');
    await c.clock.advance(10);
    assert.equal(follower.started.length, 1);
    const takeover = c.store.writes.at(-1)!;
    assert.equal(takeover.identity, 'm1');
    assert.ok(takeover.record.acquireTime - renewedAt <= LEASE + 10, `took over ${takeover.record.acquireTime - renewedAt} ms after the last renewal`);
    assert.equal(reads(c.store, 'm1'), readsBefore, 'the takeover was a single compare-and-swap on the feed\'s version');
    await c.stopAll();
  });

  it('a release wakes the follower at once: it takes over within its small stagger, without a read', async () => {
    const c = await cluster(2);
    const [, follower] = c.members as [Harness, Harness];
    const releasedAt = c.clock.now();
    const readsBefore = reads(c.store, 'm1');
    await c.release(0);
    await c.clock.advance(MAX_STAGGER + 1);
    assert.equal(follower.started.length, 1);
    assert.ok(c.store.writes.at(-1)!.record.acquireTime - releasedAt <= MAX_STAGGER);
    assert.equal(reads(c.store, 'm1'), readsBefore);
    await c.stopAll();
  });

  it('20 candidates and a release: one winner, one term, at most one write per candidate', async () => {
    const c = await cluster(20);
    c.store.resetCalls();
    const before = c.store.writes.length;
    await c.release(0);
    await c.clock.advance(MAX_STAGGER + 1);
    const winners = c.members.filter((m) => m.started.length > 0 && m.elector.isLeader());
    assert.equal(winners.length, 1);
    const holders = new Set(c.store.writes.slice(before).map((w) => w.record.holderIdentity).filter((h) => h !== ''));
    assert.deepEqual([...holders], [winners[0]!.elector.identity], 'one holder after the release');
    // The winner writes its takeover and its first renewal round; a loser at most its one failed attempt.
    for (let i = 1; i < 20; i++) {
      const limit = c.members[i] === winners[0] ? 2 : 1;
      assert.ok(writesBy(c.store, `m${i}`) <= limit, `m${i} wrote ${writesBy(c.store, `m${i}`)} times`);
    }
    await c.stopAll();
  });

  it('a lost release notification only makes the takeover slower: it happens at the expiry of the last renewal seen', async () => {
    const c = await cluster(2);
    const [, follower] = c.members as [Harness, Harness];
    c.store.dropChanges = true;
    const releasedAt = c.clock.now();
    await c.release(0);
    await c.clock.advance(RETRY * 2);
    assert.equal(follower.started.length, 0, 'it did not hear of the release');
    await c.clock.advance(LEASE);
    assert.equal(follower.started.length, 1);
    assert.ok(c.clock.now() - releasedAt <= LEASE + RETRY * 2 + 10);
    await c.stopAll();
  });

  it('lost renewal notifications never let a follower steal a live lease: its write is refused and it reads', async () => {
    const c = await cluster(2);
    const [leader, follower] = c.members as [Harness, Harness];
    c.store.dropChanges = true;
    await c.clock.advance(LEASE * 3);
    assert.equal(follower.started.length, 0);
    assert.equal(leader.leaderSignals[0]!.aborted, false, 'the leader kept its lease');
    assert.ok(reads(c.store, 'm1') > 0, 'the follower fell back to reading after its write was refused');
    await c.stopAll();
  });

  it('a write whose reply is lost backs off a RetryPeriod: its own record on the feed does not set off a loop of takeovers', async () => {
    const c = await cluster(2);
    const [, follower] = c.members as [Harness, Harness];
    // Every write by m1 lands and then fails (a timeout, an unconfirmed write): the feed echoes each one.
    c.store.failAfterApplying('update', 'm1', new Error('timed out'), 5);
    c.store.resetCalls();
    await c.release(0);
    await c.clock.advance(RETRY / 2);
    assert.equal(writesBy(c.store, 'm1'), 1, 'one write, then a back-off, not a write per echo');
    const releasedAt = c.clock.now() - RETRY / 2;
    let ledAt = 0;
    while (follower.started.length === 0 && c.clock.now() - releasedAt < RETRY * 20) {
      await c.clock.advance(RETRY / 4);
      if (follower.started.length > 0) ledAt = c.clock.now();
    }
    assert.equal(follower.started.length, 1, 'it leads once a write is acknowledged');
    // Five lost replies, each followed by a (jitter-free here) RetryPeriod of back-off, then the sixth write.
    assert.ok(ledAt - releasedAt >= 5 * RETRY, `led ${ledAt - releasedAt} ms after the release`);
    assert.equal(c.store.writes.filter((w) => w.identity === 'm1' && w.record.holderIdentity === 'm1').length >= 6, true);
    await c.stopAll();
  });

  it('with the feed down, followers poll every jittered RetryPeriod, as client-go does', async () => {
    const c = await cluster(2);
    c.store.setFeedsLive(false);
    await settle();
    const readsBefore = reads(c.store, 'm1');
    await c.clock.advance(RETRY * 10);
    const polls = reads(c.store, 'm1') - readsBefore;
    assert.ok(polls >= 9 && polls <= 10, `${polls} reads in 10 RetryPeriods`);
    await c.stopAll();
  });
});

describe('wall-clock steps: every duration is measured on the monotonic clock', () => {
  it("a follower's wall clock stepping forward past LeaseDuration does not make it take over a lease that is still renewed", async () => {
    const store = new MemoryLeaseStore();
    const clockA = new ManualClock();
    const clockB = new ManualClock(clockA.now());
    const a = harness({ identity: 'a', store, clock: clockA });
    const b = harness({ identity: 'b', store, clock: clockB });
    const stop = new AbortController();
    const runs = [a.elector.run(stop.signal)];
    await settle();
    // A's next renewal is slow: its fast path times out and the slow path renews 5 s late. Meanwhile B,
    // polling, sees the record unchanged, and its wall clock steps an hour ahead.
    store.hang('update', 1, 'a');
    await advanceTogether([clockA, clockB], RETRY / 2);
    runs.push(b.elector.run(stop.signal));
    await advanceTogether([clockA, clockB], RETRY * 1.5);
    clockB.set(clockB.now() + HOUR);
    await advanceTogether([clockA, clockB], LEASE);
    assert.equal(b.started.length, 0, 'B took over a lease that A renewed');
    assert.equal(a.leaderSignals[0]!.aborted, false, 'A kept leading');
    assert.equal(store.record?.holderIdentity, 'a');
    assertTermOrder(store);
    stop.abort();
    await Promise.all(runs);
  });

  it("a follower's wall clock stepping back an hour does not delay its takeover of a crashed leader", async () => {
    const store = new MemoryLeaseStore();
    const clock = new ManualClock();
    const leader = harness({ identity: 'a', store, clock: new ManualClock(clock.now()), feed: true });
    const follower = harness({ identity: 'b', store, clock, feed: true });
    const stop = new AbortController();
    const runs = [leader.elector.run(stop.signal)];
    await settle();
    runs.push(follower.elector.run(stop.signal));
    await settle();
    // The leader is gone from here on (its clock never moves again); the follower saw its last renewal now.
    clock.set(clock.now() - HOUR);
    await clock.advance(LEASE);
    assert.equal(follower.started.length, 0, 'not before the lease has expired');
    await clock.advance(10);
    assert.equal(follower.started.length, 1, 'took over LeaseDuration after the last renewal it saw');
    stop.abort();
    await Promise.all(runs);
  });

  it('the renew deadline (renewedWithin, and now() − lastRenewTime()) follows monotonic time, and a wall step forward (a resumed suspend) closes the self-fence until the next renewal', async () => {
    const h = harness();
    const stop = new AbortController();
    const done = h.elector.run(stop.signal);
    await settle();
    const sinceRenewal = (): number => h.clock.now() - h.elector.lastRenewTime();
    h.clock.set(h.clock.now() + HOUR);
    assert.equal(sinceRenewal(), 0);
    // A host resumed from a suspend sees its wall clock jump while the monotonic one stood still.
    assert.equal(h.elector.renewedWithin(RENEW), false, 'a step forward closes the self-fence');
    await h.clock.advance(RETRY);
    assert.equal(h.elector.renewedWithin(RENEW), true, 'the next renewal opens it again');
    // From the next round on, renewals hang; the wall clock steps back two hours.
    h.store.hang('update');
    h.store.hang('get');
    h.clock.set(h.clock.now() - 2 * HOUR);
    await h.clock.advance(RENEW - 1);
    assert.equal(h.elector.renewedWithin(RENEW), true);
    await h.clock.advance(1);
    assert.equal(sinceRenewal(), RENEW);
    assert.equal(h.elector.renewedWithin(RENEW), false, 'a step back does not keep the self-fence open');
    assert.notEqual(h.elector.term(), undefined, 'the elector still leads (its round has RenewDeadline of its own): only the self-fence stops the work now');
    stop.abort();
    await done;
  });

  it("a leader's health check follows monotonic time: a wall step forward is no failure, a step back hides no stalled renewal", async () => {
    const h = harness();
    const stop = new AbortController();
    const done = h.elector.run(stop.signal);
    await settle();
    h.clock.set(h.clock.now() + HOUR);
    assert.equal(h.elector.check(0), undefined, 'renewed 0 ms ago');
    // The event loop stalls for LeaseDuration (nothing runs, so nothing renews) and the wall clock steps back.
    h.clock.set(h.clock.now() - 2 * HOUR);
    h.clock.freeze(LEASE + 1);
    assert.match(h.elector.check(0)?.message ?? '', /last renewal 15001 ms ago/);
    stop.abort();
    await done;
  });

  it('a resigner stands aside for LeaseDuration of monotonic time, whichever way its wall clock steps', async () => {
    for (const step of [-HOUR, HOUR]) {
      const h = harness({ releaseOnCancel: true, recampaign: true });
      const stop = new AbortController();
      const done = h.elector.run(stop.signal);
      await settle();
      h.elector.resign('test');
      h.clock.set(h.clock.now() + step);
      await h.clock.advance(LEASE - 1);
      assert.equal(h.started.length, 1, `step ${step}: stood aside`);
      await h.clock.advance(RETRY);
      assert.equal(h.started.length, 2, `step ${step}: campaigns again after standing aside`);
      stop.abort();
      await done;
    }
  });
});
