import { seededRandom } from '../../test/support/race.js';

export type LockKind = 'redis' | 'kubernetes';

/** The election timings every chaos instance runs with (milliseconds). */
export interface ElectionTimings {
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
}

/** Which instance a fault hits, resolved when it is injected: the current leader, or one that is not. */
export type FaultTarget = 'leader' | 'follower';

/** One fault of the seeded schedule. Every number in it comes from the seed. */
export type PlannedFault = { index: number; gapMs: number } & (
  | { kind: 'kill'; target: FaultTarget; restartAfterMs: number }
  | { kind: 'stop'; target: FaultTarget; stoppedMs: number }
  | { kind: 'term'; target: FaultTarget; restartAfterMs: number }
  | { kind: 'redis-restart'; downMs: number }
  | { kind: 'api-5xx'; count: number; status: 500 | 503 }
  | { kind: 'api-latency'; latencyMs: number; forMs: number }
  | { kind: 'api-hang'; count: number; holdMs: number }
  | { kind: 'partition-redis' | 'partition-api'; target: FaultTarget; mode: 'blackhole' | 'reject'; forMs: number; heal: 'deliver' | 'reset' }
);

export type FaultKind = PlannedFault['kind'];

/** The draws a fault kind needs, each from the seeded generator. */
type Draw = (between: (low: number, high: number) => number, pick: <T>(items: readonly T[]) => T, timings: ElectionTimings) => Omit<PlannedFault, 'index' | 'gapMs'>;

const target = (pick: <T>(items: readonly T[]) => T): FaultTarget => pick(['leader', 'leader', 'follower'] as const);

/** The kinds of fault, as a bag: each is drawn once before any is drawn again. */
const BAG: Array<{ name: string; locks: readonly LockKind[]; draw: Draw }> = [
  { name: 'kill-leader', locks: ['redis', 'kubernetes'], draw: (between) => ({ kind: 'kill', target: 'leader', restartAfterMs: between(300, 2000) }) },
  { name: 'kill-follower', locks: ['redis', 'kubernetes'], draw: (between) => ({ kind: 'kill', target: 'follower', restartAfterMs: between(300, 2000) }) },
  {
    name: 'stop',
    locks: ['redis', 'kubernetes'],
    // Longer than the lease, so that a stopped leader wakes up to find another in its place.
    draw: (between, pick, t) => ({ kind: 'stop', target: target(pick), stoppedMs: t.leaseDurationMs + between(500, 2500) }),
  },
  { name: 'term', locks: ['redis', 'kubernetes'], draw: (between, pick) => ({ kind: 'term', target: target(pick), restartAfterMs: between(300, 2000) }) },
  { name: 'redis-restart', locks: ['redis', 'kubernetes'], draw: (between) => ({ kind: 'redis-restart', downMs: between(100, 2500) }) },
  {
    name: 'partition-redis',
    locks: ['redis', 'kubernetes'],
    draw: (between, pick) => ({
      kind: 'partition-redis',
      target: target(pick),
      mode: pick(['blackhole', 'reject'] as const),
      forMs: between(2000, 8000),
      heal: pick(['deliver', 'reset'] as const),
    }),
  },
  { name: 'api-5xx', locks: ['kubernetes'], draw: (between, pick) => ({ kind: 'api-5xx', count: between(5, 30), status: pick([500, 503] as const) }) },
  {
    name: 'api-latency',
    locks: ['kubernetes'],
    // Above RenewDeadline: every request of a renewal round times out.
    draw: (between, _pick, t) => ({ kind: 'api-latency', latencyMs: t.renewDeadlineMs + between(100, 1500), forMs: between(2000, 6000) }),
  },
  { name: 'api-hang', locks: ['kubernetes'], draw: (between) => ({ kind: 'api-hang', count: between(1, 6), holdMs: between(2000, 5000) }) },
  {
    name: 'partition-api',
    locks: ['kubernetes'],
    draw: (between, pick) => ({
      kind: 'partition-api',
      target: target(pick),
      mode: pick(['blackhole', 'reject'] as const),
      forMs: between(2000, 8000),
      heal: pick(['deliver', 'reset'] as const),
    }),
  },
];

/** A rough upper estimate of how long a fault keeps the suite busy, restarts included. */
export function estimatedMs(fault: PlannedFault): number {
  switch (fault.kind) {
    case 'kill':
    case 'term':
      return fault.restartAfterMs + 8000;
    case 'stop':
      return fault.stoppedMs;
    case 'redis-restart':
      return fault.downMs + 1000;
    case 'api-5xx':
      return 3000;
    case 'api-latency':
      return fault.forMs;
    case 'api-hang':
      return fault.holdMs;
    default:
      return fault.forMs;
  }
}

/**
 * The fault schedule for a run: a pure function of its arguments, so `--seed` replays it. Kinds are
 * drawn from a shuffled bag so that even a short run sees most of them; gaps between faults are 3–7 s.
 * The schedule is long enough to fill the run however quickly its faults play out; the run stops
 * injecting when its time is up.
 */
export function planFaults(options: { seed: number; durationMs: number; lock: LockKind; timings: ElectionTimings }): PlannedFault[] {
  const random = seededRandom(options.seed);
  const between = (low: number, high: number): number => low + Math.floor(random() * (high - low + 1));
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
  const kinds = BAG.filter((entry) => entry.locks.includes(options.lock));
  const plan: PlannedFault[] = [];
  let bag: typeof kinds = [];
  let elapsed = 0;
  while (elapsed < options.durationMs) {
    if (bag.length === 0) bag = shuffle([...kinds], random);
    const entry = bag.pop()!;
    const fault = { index: plan.length, gapMs: between(3000, 7000), ...entry.draw(between, pick, options.timings) } as PlannedFault;
    plan.push(fault);
    elapsed += fault.gapMs;
  }
  return plan;
}

function shuffle<T>(items: T[], random: () => number): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [items[i], items[j]] = [items[j]!, items[i]!];
  }
  return items;
}

/** One line per fault, for the printed schedule. */
export function describeFault(fault: PlannedFault): string {
  const head = `#${fault.index} +${fault.gapMs}ms ${fault.kind}`;
  switch (fault.kind) {
    case 'kill':
    case 'term':
      return `${head} ${fault.target}, restart after ${fault.restartAfterMs}ms`;
    case 'stop':
      return `${head} ${fault.target} (SIGSTOP ${fault.stoppedMs}ms, then SIGCONT)`;
    case 'redis-restart':
      return `${head} (down ${fault.downMs}ms, AOF)`;
    case 'api-5xx':
      return `${head} next ${fault.count} requests answer ${fault.status}`;
    case 'api-latency':
      return `${head} +${fault.latencyMs}ms per request for ${fault.forMs}ms`;
    case 'api-hang':
      return `${head} next ${fault.count} requests held ${fault.holdMs}ms`;
    default:
      return `${head} ${fault.target} ${fault.mode} ${fault.forMs}ms, heal ${fault.heal}`;
  }
}
