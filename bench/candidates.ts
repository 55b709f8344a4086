import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { KubernetesLeaseLock } from '../src/election/kubernetes-lock.js';
import { LeaderElector } from '../src/election/leader-elector.js';
import type { LeaderElectionRecord, LockVersion } from '../src/election/record.js';
import { RedisLeaseLock } from '../src/election/redis-lock.js';
import type { LockFeedListener, ResourceLock } from '../src/election/resource-lock.js';
import type { ElectionTimings, LockKind } from '../scripts/chaos/plan.js';
import { FakeLeaseServer } from '../test/support/fake-lease-server.js';
import { startRedis, type TestRedis } from '../test/support/redis-server.js';

export interface CandidatesResult {
  lock: LockKind;
  candidates: number;
  /** Release (the leader's run cancelled) → the next `onStartedLeading`, per trial. */
  takeoverMs: number[];
  /** How many candidates started leading within a trial, per trial: must be 1 each time. */
  winners: number[];
  /**
   * The most writes (create/update attempts, failed ones included) any one candidate sent in one trial:
   * a winner's until it led (its renewals are not contention), a loser's until the trial settled.
   */
  maxWritesPerCandidate: number;
  /** All candidates' writes in one trial, per trial. */
  writesPerTrial: number[];
}

/** After a takeover, writes are still counted for this long (losers that wrote late would show here). */
const SETTLE_MS = 500;

/** A lock that counts the writes its candidate sends, around a real one. */
class CountingLock implements ResourceLock {
  writes = 0;
  readonly watch?: (signal: AbortSignal, listener: LockFeedListener) => void;

  constructor(private readonly inner: ResourceLock) {
    if (inner.watch) this.watch = (signal, listener) => inner.watch!(signal, listener);
  }

  get(signal: AbortSignal) {
    return this.inner.get(signal);
  }

  create(record: LeaderElectionRecord, signal: AbortSignal): Promise<LockVersion> {
    this.writes++;
    return this.inner.create(record, signal);
  }

  update(record: LeaderElectionRecord, base: LockVersion, signal: AbortSignal): Promise<LockVersion> {
    this.writes++;
    return this.inner.update(record, base, signal);
  }

  recordEvent(message: string): void {
    this.inner.recordEvent(message);
  }

  identity(): string {
    return this.inner.identity();
  }

  describe(): string {
    return this.inner.describe();
  }
}

interface Candidate {
  lock: CountingLock;
  elector: LeaderElector;
  stop: AbortController;
  run: Promise<void>;
  ledAt: number;
  writesWhenLed: number;
}

/**
 * `count` electors in this process, each with its own connection, contend for one lease; each trial
 * releases the leader (cancels its run, as a SIGTERM does) and measures how soon the next one leads,
 * how many led, and how many writes every candidate sent. The released candidate comes back under a new
 * identity, as a restarted pod would.
 */
export async function measureCandidates(lock: LockKind, count: number, trials: number, timings: ElectionTimings, log: (line: string) => void): Promise<CandidatesResult> {
  const redisServer: TestRedis | undefined = lock === 'redis' ? await startRedis() : undefined;
  const api = lock === 'kubernetes' ? await FakeLeaseServer.start() : undefined;
  const connections: Redis[] = [];
  let generation = 0;
  const makeLock = (identity: string): ResourceLock => {
    if (api) return new KubernetesLeaseLock({ namespace: 'default', name: 'candidates', identity, kubeConfig: api.kubeConfig() });
    const connection = redisServer!.client();
    connection.on('error', () => undefined);
    connections.push(connection);
    return new RedisLeaseLock({ connection, name: 'candidates', identity });
  };
  const spawn = (): Candidate => {
    const identity = `candidate-${generation++}`;
    const counting = new CountingLock(makeLock(identity));
    const stop = new AbortController();
    const candidate: Candidate = { lock: counting, stop, ledAt: 0, writesWhenLed: 0, run: Promise.resolve(), elector: undefined as unknown as LeaderElector };
    candidate.elector = new LeaderElector({
      lock: counting,
      ...timings,
      releaseOnCancel: true,
      callbacks: {
        onStartedLeading: () => {
          candidate.ledAt = Date.now();
          candidate.writesWhenLed = counting.writes;
        },
        onStoppedLeading: () => undefined,
      },
    });
    candidate.run = candidate.elector.run(stop.signal);
    return candidate;
  };
  const candidates = Array.from({ length: count }, spawn);
  const result: CandidatesResult = { lock, candidates: count, takeoverMs: [], winners: [], maxWritesPerCandidate: 0, writesPerTrial: [] };
  try {
    for (let trial = 0; trial < trials; trial++) {
      const leader = await steady(candidates, timings);
      for (const c of candidates) c.lock.writes = 0;
      const others = candidates.filter((c) => c !== leader);
      for (const c of others) c.ledAt = 0;
      const releasedAt = Date.now();
      leader.stop.abort();
      await leader.run;
      const deadline = Date.now() + 10 * timings.leaseDurationMs;
      while (!others.some((c) => c.ledAt > 0) && Date.now() < deadline) await sleep(1);
      await sleep(SETTLE_MS);
      const led = others.filter((c) => c.ledAt > 0);
      const first = Math.min(...led.map((c) => c.ledAt));
      result.takeoverMs.push(led.length > 0 ? first - releasedAt : NaN);
      result.winners.push(led.length);
      const writes = others.map((c) => (c.ledAt > 0 ? c.writesWhenLed : c.lock.writes));
      result.maxWritesPerCandidate = Math.max(result.maxWritesPerCandidate, ...writes);
      result.writesPerTrial.push(writes.reduce((sum, n) => sum + n, 0));
      log(`  ${lock} candidates #${trial + 1}: ${result.takeoverMs.at(-1)} ms, ${led.length} winner(s), writes ${result.writesPerTrial.at(-1)} (max ${Math.max(...writes)} by one)`);
      candidates.splice(candidates.indexOf(leader), 1, spawn());
    }
  } finally {
    for (const c of candidates) c.stop.abort();
    await Promise.all(candidates.map((c) => c.run));
    for (const connection of connections) connection.disconnect();
    await redisServer?.close();
    await api?.close();
  }
  return result;
}

/** Waits for one leader, with every other candidate following long enough to be on a live feed. */
async function steady(candidates: Candidate[], timings: ElectionTimings): Promise<Candidate> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const leaders = candidates.filter((c) => c.elector.term() !== undefined);
    if (leaders.length === 1 && candidates.every((c) => c.elector.getLeader() === leaders[0]!.elector.identity)) {
      await sleep(2 * timings.retryPeriodMs);
      return leaders[0]!;
    }
    if (Date.now() > deadline) throw new Error('no single leader followed by every candidate within 30 s');
    await sleep(20);
  }
}
