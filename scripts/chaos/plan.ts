import { seededRandom } from '../../test/support/race.js';
import { TEST_CLUSTER_NODE_TIMEOUT_MS } from '../../test/support/redis-cluster.js';
import { DEFAULT_SENTINEL_TIMING } from '../../test/support/redis-sentinel.js';
import type { RedisKind } from './topology.js';

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
  /**
   * Freeze the leader with its renewal applied but unanswered: Kubernetes, from inside the API server's
   * write handler (the reply is held, then delivered late, just before or just after SIGCONT), the
   * SIGSTOP sent there (`write`) or already when its proxy sees the PUT go out (`request`); or the reply
   * is sent at once and the SIGSTOP follows the moment it reaches the process's socket (`reply`), or one
   * event-loop turn of the suite later (`reply-next-turn`): the process has been woken by the reply but
   * not yet handled it, and handles it on SIGCONT before its expired timers. (A process stopped while it
   * sleeps in epoll_wait wakes with EINTR and runs its expired timers first: its request timeout then
   * drops a reply held until after the stop.) Redis: during a `CLIENT PAUSE WRITE` that holds the
   * renewal's EVALSHA until the leader is stopped.
   */
  | { kind: 'freeze-in-renewal'; stoppedMs: number; reply: 'before-resume' | 'after-resume'; at: 'request' | 'write' | 'reply' | 'reply-next-turn' }
  /**
   * Cut the leader from its lock (its API proxy, or its Redis proxy for the Redis lock), then freeze it
   * `marginMs` before its renew deadline (judged from its last write in the lock's history), heal, and
   * keep it frozen past the lease.
   */
  | { kind: 'freeze-near-deadline'; marginMs: number; stoppedMs: number }
  /** Restart Redis, then SIGKILL the leader the moment it claims a new tick, before its retries of the failed ones. */
  | { kind: 'redis-restart-kill-leader'; downMs: number; restartAfterMs: number }
  /** Cut only the leader's Redis proxy (it still reaches the API server) for longer than RenewDeadline. */
  | { kind: 'partition-leader-redis-only'; mode: 'blackhole' | 'reject'; forMs: number; heal: 'deliver' | 'reset' }
  /** Every API request slowed to just under the request timeout. */
  | { kind: 'api-latency-near-timeout'; latencyMs: number; forMs: number }
  /** Replicated Redis: SIGKILL the primary serving leasebeat's keys; restart it (it rejoins as a replica) after the promotion. */
  | { kind: 'primary-kill'; restartAfterMs: number }
  /** Replicated Redis: SIGSTOP that primary past the failure detector (a failover happens), then SIGCONT: it comes back believing it is the primary. */
  | { kind: 'primary-freeze'; stoppedMs: number }
  /** Replicated Redis: SIGKILL a replica of that primary, start it again after `downMs`. */
  | { kind: 'replica-restart'; downMs: number }
  /**
   * Issue 18's aimed kills of a replicated Redis (see aimed-faults.ts), each with replication held first
   * so that the promoted replica lacks the write aimed at; the dead primary restarts `restartAfterMs`
   * after the promotion. BullMQ's primary right after a handler returned (the run's finish written there
   * only); BullMQ's primary while a staged run waits in the delayed set, recorded enqueued (or not
   * recorded: its add not confirmed); the ledger's primary right after a claim, before its WAIT is answered.
   */
  | { kind: AimedKillKind; restartAfterMs: number }
);

export const AIMED_KILLS = ['bull-primary-kill-after-handler', 'bull-primary-kill-during-staged-delay', 'ledger-primary-kill-between-claim-and-wait'] as const;
export type AimedKillKind = (typeof AIMED_KILLS)[number];

export type FaultKind = PlannedFault['kind'];

/** The per-request timeout of the election at these timings: the elector's default, RenewDeadline / 2. */
export const requestTimeoutMs = (t: ElectionTimings): number => t.renewDeadlineMs / 2;

/** The draws a fault kind needs, each from the seeded generator. */
type Draw = (
  between: (low: number, high: number) => number,
  pick: <T>(items: readonly T[]) => T,
  timings: ElectionTimings,
  lock: LockKind,
) => Omit<PlannedFault, 'index' | 'gapMs'>;

const target = (pick: <T>(items: readonly T[]) => T): FaultTarget => pick(['leader', 'leader', 'follower'] as const);

/** How long the test topologies take to call a silent primary down (sentinels' down-after, cluster node timeout). */
const DETECTOR_MS = Math.max(DEFAULT_SENTINEL_TIMING.downAfterMs, TEST_CLUSTER_NODE_TIMEOUT_MS);
const REPLICATED: readonly RedisKind[] = ['sentinel', 'cluster'];
/** Faults of processes and of the lease API: they need no proxy in front of Redis. */
const ANY_REDIS: readonly RedisKind[] = ['single', ...REPLICATED];

/**
 * The kinds of fault, as a bag: each is drawn once before any is drawn again. `redis` says on which Redis
 * a kind can be injected (default: the single server, whose per-process proxies and restarts it uses).
 */
const BAG: Array<{ name: string; locks: readonly LockKind[]; redis?: readonly RedisKind[]; /** How often it is in each bag; default once. */ copies?: number; draw: Draw }> = [
  {
    name: 'freeze-in-renewal',
    locks: ['redis', 'kubernetes'],
    // Past the lease, so another instance takes over while the renewal's answer is still on its way.
    draw: (between, pick, t) => ({
      kind: 'freeze-in-renewal',
      stoppedMs: t.leaseDurationMs + between(500, 3000),
      reply: pick(['before-resume', 'before-resume', 'after-resume'] as const),
      at: pick(['reply', 'reply', 'reply-next-turn', 'reply-next-turn', 'request', 'write'] as const),
    }),
  },
  {
    name: 'freeze-near-deadline',
    locks: ['redis', 'kubernetes'],
    draw: (between, _pick, t) => ({ kind: 'freeze-near-deadline', marginMs: between(5, 250), stoppedMs: t.leaseDurationMs + between(500, 3000) }),
  },
  {
    name: 'redis-restart-kill-leader',
    locks: ['redis', 'kubernetes'],
    // Long enough for ticks to fail; on the Redis lock short enough that the leader keeps its lease.
    draw: (between, _pick, t, lock) => ({
      kind: 'redis-restart-kill-leader',
      downMs: lock === 'redis' ? between(700, t.renewDeadlineMs - 300) : between(1200, 3500),
      restartAfterMs: between(300, 2000),
    }),
  },
  {
    name: 'partition-leader-redis-only',
    locks: ['redis', 'kubernetes'],
    draw: (between, pick, t) => ({
      kind: 'partition-leader-redis-only',
      mode: pick(['blackhole', 'reject'] as const),
      forMs: t.renewDeadlineMs + between(2000, 6000),
      heal: pick(['deliver', 'reset'] as const),
    }),
  },
  {
    name: 'api-latency-near-timeout',
    locks: ['kubernetes'],
    redis: ANY_REDIS,
    draw: (between, _pick, t) => ({ kind: 'api-latency-near-timeout', latencyMs: requestTimeoutMs(t) - between(20, 150), forMs: between(4000, 10_000) }),
  },
  { name: 'kill-leader', locks: ['redis', 'kubernetes'], redis: ANY_REDIS, draw: (between) => ({ kind: 'kill', target: 'leader', restartAfterMs: between(300, 2000) }) },
  { name: 'kill-follower', locks: ['redis', 'kubernetes'], redis: ANY_REDIS, draw: (between) => ({ kind: 'kill', target: 'follower', restartAfterMs: between(300, 2000) }) },
  {
    name: 'stop',
    locks: ['redis', 'kubernetes'],
    redis: ANY_REDIS,
    // Longer than the lease, so that a stopped leader wakes up to find another in its place.
    draw: (between, pick, t) => ({ kind: 'stop', target: target(pick), stoppedMs: t.leaseDurationMs + between(500, 2500) }),
  },
  { name: 'term', locks: ['redis', 'kubernetes'], redis: ANY_REDIS, draw: (between, pick) => ({ kind: 'term', target: target(pick), restartAfterMs: between(300, 2000) }) },
  // Issue 13's faults of the primary, twice in each bag: they are what a replicated Redis is run for.
  {
    name: 'primary-kill',
    locks: ['redis', 'kubernetes'],
    redis: REPLICATED,
    copies: 2,
    draw: (between) => ({ kind: 'primary-kill', restartAfterMs: between(300, 3000) }),
  },
  {
    name: 'primary-freeze',
    locks: ['redis', 'kubernetes'],
    redis: REPLICATED,
    copies: 2,
    draw: (between) => ({ kind: 'primary-freeze', stoppedMs: DETECTOR_MS + between(500, 3000) }),
  },
  { name: 'replica-restart', locks: ['redis', 'kubernetes'], redis: REPLICATED, draw: (between) => ({ kind: 'replica-restart', downMs: between(300, 3000) }) },
  ...AIMED_KILLS.map((kind) => ({
    name: kind,
    locks: ['redis', 'kubernetes'] as const,
    redis: REPLICATED,
    draw: (between: (low: number, high: number) => number) => ({ kind, restartAfterMs: between(300, 3000) }),
  })),
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
  { name: 'api-5xx', locks: ['kubernetes'], redis: ANY_REDIS, draw: (between, pick) => ({ kind: 'api-5xx', count: between(5, 30), status: pick([500, 503] as const) }) },
  {
    name: 'api-latency',
    locks: ['kubernetes'],
    redis: ANY_REDIS,
    // Above RenewDeadline: every request of a renewal round times out.
    draw: (between, _pick, t) => ({ kind: 'api-latency', latencyMs: t.renewDeadlineMs + between(100, 1500), forMs: between(2000, 6000) }),
  },
  { name: 'api-hang', locks: ['kubernetes'], redis: ANY_REDIS, draw: (between) => ({ kind: 'api-hang', count: between(1, 6), holdMs: between(2000, 5000) }) },
  {
    name: 'partition-api',
    locks: ['kubernetes'],
    redis: ANY_REDIS,
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
    case 'freeze-in-renewal':
      return fault.stoppedMs + 2000;
    case 'freeze-near-deadline':
      return fault.stoppedMs + 2500;
    case 'redis-restart-kill-leader':
      return fault.downMs + fault.restartAfterMs + 9000;
    case 'primary-kill':
      return DETECTOR_MS + fault.restartAfterMs + 8000;
    case 'bull-primary-kill-after-handler':
    case 'bull-primary-kill-during-staged-delay':
    case 'ledger-primary-kill-between-claim-and-wait':
      // Aiming takes up to a few seconds more: a handler's return, the next whole second.
      return DETECTOR_MS + fault.restartAfterMs + 11_000;
    case 'primary-freeze':
      return fault.stoppedMs + 2000;
    case 'replica-restart':
      return fault.downMs + 2000;
    default:
      return fault.forMs;
  }
}

/** Whether a kind of the bag can be injected with this lock on this Redis. */
const applies = (entry: (typeof BAG)[number], lock: LockKind, redis: RedisKind): boolean => entry.locks.includes(lock) && (entry.redis ?? ['single']).includes(redis);

/** The names of the fault kinds a lock on a Redis can be given (for `--faults` and `lead`). */
export function faultKinds(lock: LockKind, redis: RedisKind = 'single'): string[] {
  return BAG.filter((entry) => applies(entry, lock, redis)).map((entry) => entry.name);
}

/**
 * The fault schedule for a run: a pure function of its arguments, so `--seed` replays it. Kinds are
 * drawn from a shuffled bag so that even a short run sees most of them; gaps between faults are 3–7 s.
 * The schedule is long enough to fill the run however quickly its faults play out; the run stops
 * injecting when its time is up.
 */
export function planFaults(options: {
  seed: number;
  durationMs: number;
  lock: LockKind;
  /** The Redis under test; default one server. */
  redis?: RedisKind;
  timings: ElectionTimings;
  /** Only these kinds (bag names, see {@link faultKinds}); default all of the lock's. */
  only?: readonly string[];
  /** These kinds first, in this order, before the bag: so that a short run surely sees them. */
  lead?: readonly string[];
}): PlannedFault[] {
  const random = seededRandom(options.seed);
  const between = (low: number, high: number): number => low + Math.floor(random() * (high - low + 1));
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
  const redis = options.redis ?? 'single';
  const kinds = BAG.filter((entry) => applies(entry, options.lock, redis) && (!options.only || options.only.includes(entry.name)));
  for (const name of [...(options.only ?? []), ...(options.lead ?? [])]) {
    if (!BAG.some((entry) => entry.name === name && applies(entry, options.lock, redis))) throw new Error(`no fault kind ${name} for the ${options.lock} lock on ${redis} Redis`);
  }
  if (kinds.length === 0) throw new Error('no fault kinds to draw from');
  const plan: PlannedFault[] = [];
  const leading = (options.lead ?? []).map((name) => BAG.find((entry) => entry.name === name)!);
  let bag: typeof kinds = [];
  let elapsed = 0;
  while (elapsed < options.durationMs) {
    if (bag.length === 0) bag = shuffle(kinds.flatMap((entry) => Array<typeof entry>(entry.copies ?? 1).fill(entry)), random);
    const entry = leading.shift() ?? bag.pop()!;
    const fault = { index: plan.length, gapMs: between(3000, 7000), ...entry.draw(between, pick, options.timings, options.lock) } as PlannedFault;
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
    case 'freeze-in-renewal':
      return `${head} leader stopped at its renewal's ${fault.at} for ${fault.stoppedMs}ms` + (fault.at.startsWith('reply') ? '' : `, reply delivered ${fault.reply}`);
    case 'freeze-near-deadline':
      return `${head} leader cut from its lock, stopped ${fault.marginMs}ms before its renew deadline for ${fault.stoppedMs}ms`;
    case 'redis-restart-kill-leader':
      return `${head} Redis down ${fault.downMs}ms, leader SIGKILLed at its first claim after, restart after ${fault.restartAfterMs}ms`;
    case 'partition-leader-redis-only':
      return `${head} leader's Redis only: ${fault.mode} ${fault.forMs}ms, heal ${fault.heal}`;
    case 'api-latency-near-timeout':
      return `${head} +${fault.latencyMs}ms per request (just under the request timeout) for ${fault.forMs}ms`;
    case 'primary-kill':
      return `${head} SIGKILL of the primary holding leasebeat's keys, restarted ${fault.restartAfterMs}ms after the promotion`;
    case 'primary-freeze':
      return `${head} SIGSTOP of the primary holding leasebeat's keys for ${fault.stoppedMs}ms (past the failure detector), then SIGCONT`;
    case 'replica-restart':
      return `${head} SIGKILL of a replica of that primary, restarted after ${fault.downMs}ms`;
    case 'bull-primary-kill-after-handler':
      return `${head} replication of BullMQ's primary held, SIGKILL once a handler returned and the run's finish was written, restarted ${fault.restartAfterMs}ms after the promotion`;
    case 'bull-primary-kill-during-staged-delay':
      return `${head} SIGKILL of BullMQ's primary while a staged run waits in the delayed set, recorded enqueued (replication held where the ledger is elsewhere), restarted ${fault.restartAfterMs}ms after the promotion`;
    case 'ledger-primary-kill-between-claim-and-wait':
      return `${head} replication of the ledger's primary held, SIGKILL once a claim was written, before its WAIT is answered, restarted ${fault.restartAfterMs}ms after the promotion`;
    default:
      return `${head} ${fault.target} ${fault.mode} ${fault.forMs}ms, heal ${fault.heal}`;
  }
}
