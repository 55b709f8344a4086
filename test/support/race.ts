import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { ElectorProcessOptions } from './elector-process.js';

/** A deterministic PRNG (mulberry32), so that a failing schedule of faults can be replayed from its seed. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const nowNs = (): number => Number(process.hrtime.bigint());

interface Term {
  identity: string;
  transitions: number;
  generation: string;
  start: number;
  end?: number;
}

interface Fault {
  kind: 'kill' | 'term';
  identity: string;
  wasLeader: boolean;
  /** On the shared monotonic clock (ns). */
  at: number;
  /** `Date.now()` at the fault: the clock of the lock's write history. */
  wallAt: number;
}

/** One write of the race's lock record, from the lock's own history (the API server's, or Redis's stream). */
export interface LockWrite {
  /** `Date.now()` (or the Redis server's clock) when it was applied. */
  at: number;
  /** `''` for a released lease. */
  holder: string;
}

export interface RaceReport {
  seed: number;
  terms: Term[];
  faults: Fault[];
  /** Milliseconds from a leader's SIGKILL to the next term's start. */
  crashFailoverMs: number[];
  /** Milliseconds from a leader's SIGTERM to the next term's start. */
  releaseFailoverMs: number[];
  overlaps: string[];
  nonIncreasingTransitions: string[];
}

/**
 * A term ends when its leader stops (or is killed), or at its self-fence (last renewal + RenewDeadline)
 * when that came first: after it the producer refuses to enqueue even if a starved event loop has not
 * yet aborted the leader signal.
 *
 * Runs `instances` elector processes through `faults` faults, killing (SIGKILL) or stopping (SIGTERM) one
 * (every other one the leader) every `faultEveryMs` or so and starting a replacement, then checks the timeline: no two
 * terms overlap and leaderTransitions strictly increase from term to term.
 */
export async function runRace(options: {
  seed: number;
  instances: number;
  /** How many faults to inject: a count, not a duration, so a loaded machine (slow restarts) sees as many. */
  faults: number;
  faultEveryMs: number;
  process: Omit<ElectorProcessOptions, 'identity'>;
}): Promise<RaceReport> {
  const random = seededRandom(options.seed);
  /** Electors that are campaigning; `spawned` also holds those still starting. */
  const live = new Map<string, ChildProcess>();
  const spawned = new Set<ChildProcess>();
  const terms: Term[] = [];
  const faults: Fault[] = [];
  const open = new Map<string, Term>();
  let counter = 0;

  /** Starts one elector process and resolves once it is campaigning. */
  const launch = (): Promise<void> => {
    const identity = `elector-${counter++}`;
    const child = spawn(process.execPath, ['--import', 'tsx', new URL('./elector-process.ts', import.meta.url).pathname, JSON.stringify({ ...options.process, identity })], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    spawned.add(child);
    let ready: () => void = () => undefined;
    const isReady = new Promise<void>((resolve) => (ready = resolve));
    createInterface({ input: child.stdout }).on('line', (line) => {
      let message: { event: string; identity: string; t: number; transitions?: number; generation?: string; wall?: number; selfFenceAt?: number };
      try {
        message = JSON.parse(line) as typeof message;
      } catch {
        return;
      }
      if (message.event === 'ready') {
        live.set(identity, child);
        ready();
      } else if (message.event === 'started') {
        const term: Term = { identity, transitions: message.transitions!, generation: message.generation!, start: message.t };
        terms.push(term);
        open.set(identity, term);
      } else if (message.event === 'stopped') {
        const term = open.get(identity);
        const lateBy = Math.max(0, (message.wall ?? 0) - (message.selfFenceAt ?? Infinity));
        if (term) term.end = message.t - lateBy * 1e6;
        open.delete(identity);
      }
    });
    child.on('exit', () => {
      live.delete(identity);
      spawned.delete(child);
      ready();
    });
    return isReady;
  };

  const exited = (child: ChildProcess): Promise<void> =>
    child.exitCode !== null || child.signalCode !== null ? Promise.resolve() : new Promise((r) => child.once('exit', () => r()));

  await Promise.all(Array.from({ length: options.instances }, launch));
  const starting: Array<Promise<void>> = [];
  // The count decides; the deadline only keeps a race whose electors never come up from spinning for ever.
  const deadline = Date.now() + 20 * options.faults * options.faultEveryMs;
  while (faults.length < options.faults && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, options.faultEveryMs * (0.5 + random())));
    // Every other fault aims at the leader (waiting for one to be elected): that is where failover happens.
    const aimAtLeader = faults.length % 2 === 0;
    const electedBy = Date.now() + 10_000;
    while (aimAtLeader && ![...live.keys()].some((id) => open.has(id)) && Date.now() < electedBy) {
      await new Promise((r) => setTimeout(r, 20));
    }
    const identities = [...live.keys()];
    const leader = identities.find((id) => open.has(id));
    const target = aimAtLeader && leader ? leader : identities[Math.floor(random() * identities.length)];
    if (!target) continue;
    const child = live.get(target)!;
    const kind = random() < 0.5 ? 'kill' : 'term';
    const at = nowNs();
    faults.push({ kind, identity: target, wasLeader: open.has(target), at, wallAt: Date.now() });
    child.kill(kind === 'kill' ? 'SIGKILL' : 'SIGTERM');
    if (kind === 'kill') {
      // A killed process leads no more: its term ends at the kill.
      const term = open.get(target);
      if (term) term.end = at;
      open.delete(target);
    }
    await exited(child);
    // The replacement starts while the next fault's wait runs: on a loaded machine a process start takes
    // seconds, and waiting for each in turn would make the race as long as its restarts, not its faults.
    starting.push(launch());
  }
  await Promise.all(starting);
  const children = [...spawned];
  for (const child of children) child.kill('SIGTERM');
  await Promise.all(children.map(exited));
  const finish = nowNs();
  for (const term of open.values()) term.end ??= finish;

  terms.sort((a, b) => a.start - b.start);
  const overlaps: string[] = [];
  const nonIncreasing: string[] = [];
  for (let i = 1; i < terms.length; i++) {
    const previous = terms[i - 1]!;
    const current = terms[i]!;
    if (current.start < (previous.end ?? finish)) {
      overlaps.push(`${current.identity} started ${((previous.end! - current.start) / 1e6).toFixed(1)} ms before ${previous.identity} stopped`);
    }
    if (current.generation === previous.generation && current.transitions <= previous.transitions) {
      nonIncreasing.push(`${previous.identity}#${previous.transitions} -> ${current.identity}#${current.transitions}`);
    }
  }
  const leaderFaults = (kind: Fault['kind']): number[] => {
    const result: number[] = [];
    for (const fault of faults) {
      if (fault.kind !== kind || !fault.wasLeader) continue;
      const next = terms.find((t) => t.start > fault.at);
      if (next) result.push((next.start - fault.at) / 1e6);
    }
    return result;
  };
  return {
    seed: options.seed,
    terms,
    faults,
    crashFailoverMs: leaderFaults('kill'),
    releaseFailoverMs: leaderFaults('term'),
    overlaps,
    nonIncreasingTransitions: nonIncreasing,
  };
}

/** min / median / p99 / max of a sample, for reports. */
export function summarize(values: number[]): string {
  if (values.length === 0) return 'n=0';
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
  return `n=${sorted.length} min=${sorted[0]!.toFixed(0)} ms median=${at(0.5).toFixed(0)} ms p99=${at(0.99).toFixed(0)} ms max=${sorted.at(-1)!.toFixed(0)} ms`;
}

/** Election timings of the race tests: short, so that each failover takes seconds. */
export const RACE_TIMING = { leaseDurationMs: 2000, renewDeadlineMs: 1500, retryPeriodMs: 250 };

/**
 * The race test shared by both locks: 5 electors for 10 seeded kills and graceful stops, reported
 * through `diagnostic` and checked: no overlapping terms, strictly increasing transitions, and, from the
 * lock's own write history (`lockWrites`, oldest first), working releases.
 */
export async function raceAndCheck(
  lock: Pick<ElectorProcessOptions, 'lock' | 'redisUrl' | 'apiServer'>,
  diagnostic: (message: string) => void,
  lockWrites: () => Promise<LockWrite[]>,
): Promise<void> {
  const seed = Number(process.env.RACE_SEED ?? Date.now() % 100_000);
  const report = await runRace({ seed, instances: 5, faults: 10, faultEveryMs: 1800, process: { ...lock, ...RACE_TIMING } });
  diagnostic(`seed ${seed} (replay with RACE_SEED=${seed}); ${report.terms.length} terms, ${report.faults.length} faults`);
  diagnostic(
    `crash failover (SIGKILL of the leader → next term): ${summarize(report.crashFailoverMs)}; ` +
      `bound ${RACE_TIMING.leaseDurationMs + 1.2 * RACE_TIMING.retryPeriodMs} ms`,
  );
  diagnostic(`graceful failover (SIGTERM of the leader → next term): ${summarize(report.releaseFailoverMs)}`);
  assert.deepEqual(report.overlaps, [], 'leadership terms overlapped');
  assert.deepEqual(report.nonIncreasingTransitions, [], 'leaderTransitions did not strictly increase');
  assert.ok(report.terms.length >= 3, `expected several terms, saw ${report.terms.length}`);
  assert.ok(report.crashFailoverMs.length + report.releaseFailoverMs.length >= 2, 'expected at least two leader faults');
  // A leader stopped by SIGTERM releases the lease (ReleaseOnCancel): the write after its last one as
  // holder clears the holder, so the next leader need not wait the lease out. How soon a follower then
  // takes it depends on the machine's load: reported above, not asserted.
  const writes = await lockWrites();
  for (const fault of report.faults.filter(({ kind }) => kind === 'term')) {
    const heldAt = writes.findLastIndex((write) => write.at <= fault.wallAt);
    // Held at the stop by the stopped elector (under load it may have lost the lease just before).
    if (writes[heldAt]?.holder !== fault.identity) continue;
    const next = writes.slice(heldAt + 1).find((write) => write.holder !== fault.identity);
    assert.equal(next?.holder, '', `${fault.identity} held the lease when stopped with SIGTERM and did not release it: ${next ? `${next.holder} took it over` : 'nobody wrote after it'}`);
  }
}
