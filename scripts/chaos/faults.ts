import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { KeySpace } from '../../src/redis/keys.js';
import { TickLedger } from '../../src/ledger/tick-ledger.js';
import type { LeaseWrite } from '../../test/support/fake-lease-server.js';
import type { TestRedis } from '../../test/support/redis-server.js';
import type { TcpProxy } from '../../test/support/tcp-proxy.js';
import { killBullPrimaryAfterHandler, killBullPrimaryDuringStagedDelay, killLedgerPrimaryBetweenClaimAndWait, killPrimary, type AimedKill, type PrimaryFaultOutcome } from './aimed-faults.js';
import { LEASE_NAME, LEASE_NAMESPACE, type ChaosCluster, type Incarnation } from './cluster.js';
import type { FaultKind, PlannedFault } from './plan.js';
import type { ReplicatedRedis } from './topology.js';

/** A fault as it was injected: what it hit, when, and what came of it. */
export interface ExecutedFault {
  index: number;
  kind: FaultKind;
  /** The identity hit, for faults aimed at one process. */
  target?: string;
  /** Whether the target held the lock when the fault was injected. */
  wasLeader: boolean;
  /** `Date.now()` at injection and when the fault was fully undone (restart launched, partition healed...). */
  startedAt: number;
  endedAt: number;
  detail: string;
  /** Replicated Redis: when another node was seen serving the keys the fault hit as the primary. */
  promotedAt?: number;
  /** Issue 18's aimed kills: the instant aimed at, and how close to it the primary died. */
  aim?: AimedKill;
}

/**
 * How the Redis lock's renewal looks on the wire: EVALSHA of updateLease.lua (its sha1), or EVAL of its
 * source after a NOSCRIPT. Read from the tree the instances run, so a changed script is still recognised.
 */
const UPDATE_LEASE_SOURCE = readFileSync(new URL('../../src/election/lua/updateLease.lua', import.meta.url), 'utf8');
const UPDATE_LEASE_SHA = createHash('sha1').update(UPDATE_LEASE_SOURCE).digest('hex');
const UPDATE_LEASE_MARKER = UPDATE_LEASE_SOURCE.slice(0, 60);
/** Bound on waiting for the leader's next renewal (it renews every RetryPeriod). */
const RENEWAL_WAIT_MS = 5_000;
/** The Lease's item path: a PUT to it is a renewal or a takeover. */
const LEASE_PATH = `/apis/coordination.k8s.io/v1/namespaces/${LEASE_NAMESPACE}/leases/${LEASE_NAME}`;
/** Bound on waiting for a held API reply to reach the frozen process before waking it anyway. */
const REPLY_WAIT_MS = 500;
/** Upper bound of a CLIENT PAUSE: it is lifted as soon as the leader is frozen, this only guards a crash of the suite. */
const PAUSE_GUARD_MS = 10_000;
/** Bound on waiting, after Redis is back, for the leader to claim a new tick. */
const CLAIM_WAIT_MS = 5_000;
/** The job whose claims mark "the leader produces again" (ticks every second). */
const STEADY_JOB = 'every-second';

/** How long to wait for a leader to exist before aiming a leader fault elsewhere. */
const LEADER_WAIT_MS = 10_000;
/** How long a SIGTERMed process may take to drain before it is killed (its shutdown timeout is 5 s). */
const TERM_GRACE_MS = 15_000;

/**
 * Injects one planned fault into the cluster and undoes it (restart, SIGCONT, heal, clear). Returns when
 * the fault is over; the system may still be recovering.
 */
export async function inject(cluster: ChaosCluster, fault: PlannedFault): Promise<ExecutedFault> {
  const base = { index: fault.index, kind: fault.kind };
  switch (fault.kind) {
    case 'kill': {
      const { victim, wasLeader } = await aim(cluster, fault.target);
      if (!victim) return skippedFault(base, 'no process to hit');
      const startedAt = Date.now();
      await cluster.kill(victim);
      await sleep(fault.restartAfterMs);
      const next = cluster.restart(victim);
      return { ...base, target: victim.identity, wasLeader, startedAt, endedAt: Date.now(), detail: `SIGKILL; restarted as ${next.identity}` };
    }
    case 'term': {
      const { victim, wasLeader } = await aim(cluster, fault.target);
      if (!victim) return skippedFault(base, 'no process to hit');
      const startedAt = Date.now();
      const { code, forced } = await cluster.terminate(victim, TERM_GRACE_MS);
      const exit = forced ? `did not exit within ${TERM_GRACE_MS} ms: killed` : `exit ${code} after ${Date.now() - startedAt} ms`;
      await sleep(fault.restartAfterMs);
      const next = cluster.restart(victim);
      return { ...base, target: victim.identity, wasLeader, startedAt, endedAt: Date.now(), detail: `SIGTERM, ${exit}; restarted as ${next.identity}` };
    }
    case 'stop': {
      const { victim, wasLeader } = await aim(cluster, fault.target);
      if (!victim) return skippedFault(base, 'no process to hit');
      const startedAt = Date.now();
      cluster.stop(victim);
      await sleep(fault.stoppedMs);
      cluster.resume(victim);
      return { ...base, target: victim.identity, wasLeader, startedAt, endedAt: Date.now(), detail: `SIGSTOP for ${fault.stoppedMs} ms, SIGCONT` };
    }
    case 'redis-restart': {
      const holder = await cluster.holder();
      const startedAt = Date.now();
      // SIGTERM: Redis writes its AOF out before exiting, so nothing acknowledged is lost.
      const redis = requireSingle(cluster);
      await redis.stop(false);
      await sleep(fault.downMs);
      await redis.restart();
      return { ...base, target: holder, wasLeader: false, startedAt, endedAt: Date.now(), detail: `redis-server down ${Date.now() - startedAt} ms, restarted from its AOF on the same port` };
    }
    case 'api-5xx': {
      const api = requireApi(cluster);
      const startedAt = Date.now();
      api.failNext(fault.count, { status: fault.status });
      await sleep(3000);
      api.clearFaults();
      return { ...base, wasLeader: false, startedAt, endedAt: Date.now(), detail: `${fault.count} requests answered ${fault.status}` };
    }
    case 'api-latency': {
      const api = requireApi(cluster);
      const startedAt = Date.now();
      api.setLatency(fault.latencyMs);
      await sleep(fault.forMs);
      api.setLatency(0);
      return { ...base, wasLeader: false, startedAt, endedAt: Date.now(), detail: `${fault.latencyMs} ms added to every request for ${fault.forMs} ms` };
    }
    case 'api-hang': {
      const api = requireApi(cluster);
      const startedAt = Date.now();
      api.hangNext(fault.count);
      await sleep(fault.holdMs);
      const held = api.hung().length;
      api.clearFaults();
      // Held writes are applied on release even if their client gave up, as a real apiserver would.
      await api.releaseHung();
      return { ...base, wasLeader: false, startedAt, endedAt: Date.now(), detail: `${held} of the next ${fault.count} requests held ${fault.holdMs} ms, then released` };
    }
    case 'partition-redis':
    case 'partition-api': {
      const { victim, wasLeader } = await aim(cluster, fault.target);
      const proxy = victim && (fault.kind === 'partition-redis' ? cluster.redisProxyOf(victim) : cluster.apiProxyOf(victim));
      if (!victim || !proxy) return skippedFault(base, 'no process to hit');
      const startedAt = Date.now();
      proxy.partition(fault.mode);
      await sleep(fault.forMs);
      proxy.heal(fault.heal);
      const heal = fault.mode === 'blackhole' ? `, healed by ${fault.heal === 'deliver' ? 'delivering the held bytes' : 'resetting its connections'}` : '';
      return { ...base, target: victim.identity, wasLeader, startedAt, endedAt: Date.now(), detail: `${fault.mode} for ${fault.forMs} ms${heal}` };
    }
    case 'partition-leader-redis-only': {
      const { victim, wasLeader } = await aim(cluster, 'leader');
      if (!victim || !wasLeader) return skippedFault(base, 'no leader');
      const proxy = cluster.redisProxyOf(victim);
      const startedAt = Date.now();
      proxy.partition(fault.mode);
      await sleep(fault.forMs);
      proxy.heal(fault.heal);
      const heal = fault.mode === 'blackhole' ? `, healed by ${fault.heal === 'deliver' ? 'delivering the held bytes' : 'resetting its connections'}` : '';
      const api = cluster.api ? '; its API server path stayed open' : '';
      return { ...base, target: victim.identity, wasLeader, startedAt, endedAt: Date.now(), detail: `Redis only: ${fault.mode} for ${fault.forMs} ms${heal}${api}` };
    }
    case 'api-latency-near-timeout': {
      const api = requireApi(cluster);
      const startedAt = Date.now();
      api.setLatency(fault.latencyMs);
      await sleep(fault.forMs);
      api.setLatency(0);
      return { ...base, wasLeader: false, startedAt, endedAt: Date.now(), detail: `${fault.latencyMs} ms added to every request for ${fault.forMs} ms` };
    }
    case 'freeze-in-renewal':
      return cluster.api ? freezeInApiRenewal(cluster, fault, base) : freezeInRedisRenewal(cluster, fault, base);
    case 'freeze-near-deadline':
      return freezeNearDeadline(cluster, fault, base);
    case 'redis-restart-kill-leader':
      return restartRedisThenKillLeader(cluster, fault, base);
    case 'primary-kill': {
      const redis = requireReplicated(cluster);
      const primary = await redis.primary();
      const holder = await cluster.holder();
      // An orchestrator restarts the dead node; it comes back empty and rejoins as a replica.
      const { killedAt: startedAt, promoted, promotedAt } = await killPrimary(redis, primary, 'leasebeat', fault.restartAfterMs);
      return {
        ...base, target: holder, wasLeader: false, startedAt, endedAt: Date.now(), promotedAt,
        detail: `primary ${primary.port} SIGKILLed; ${promoted.port} promoted after ${promotedAt - startedAt} ms; ${primary.port} restarted`,
      };
    }
    case 'primary-freeze': {
      const redis = requireReplicated(cluster);
      const primary = await redis.primary();
      const holder = await cluster.holder();
      const startedAt = Date.now();
      primary.freeze();
      const promotion = redis.waitForPromotion(primary, fault.stoppedMs).then(
        (node) => ({ node, at: Date.now() }),
        () => undefined,
      );
      await sleep(fault.stoppedMs);
      primary.resume();
      const promoted = await promotion;
      return {
        ...base, target: holder, wasLeader: false, startedAt, endedAt: Date.now(), ...(promoted ? { promotedAt: promoted.at } : {}),
        detail: `primary ${primary.port} SIGSTOPped for ${fault.stoppedMs} ms, SIGCONT; ` +
          (promoted ? `${promoted.node.port} promoted after ${promoted.at - startedAt} ms` : 'no promotion while it was stopped'),
      };
    }
    case 'replica-restart': {
      const redis = requireReplicated(cluster);
      const [replica] = await redis.replicasOf(await redis.primary());
      if (!replica) return skippedFault(base, 'the primary has no running replica');
      const startedAt = Date.now();
      await replica.kill();
      await sleep(fault.downMs);
      await replica.launch();
      return { ...base, wasLeader: false, startedAt, endedAt: Date.now(), detail: `replica ${replica.port} SIGKILLed, restarted after ${fault.downMs} ms` };
    }
    case 'bull-primary-kill-after-handler':
      return aimedKill(cluster, base, (redis) => killBullPrimaryAfterHandler(cluster, redis, fault.restartAfterMs));
    case 'bull-primary-kill-during-staged-delay':
      return aimedKill(cluster, base, (redis) => killBullPrimaryDuringStagedDelay(cluster, redis, fault.restartAfterMs));
    case 'ledger-primary-kill-between-claim-and-wait':
      return aimedKill(cluster, base, (redis) => killLedgerPrimaryBetweenClaimAndWait(redis, fault.restartAfterMs));
  }
}

/** An aimed kill of a primary, as the fault log records it (the target: the handler's instance, else the lock holder then). */
async function aimedKill(cluster: ChaosCluster, base: Base, run: (redis: ReplicatedRedis) => Promise<PrimaryFaultOutcome>): Promise<ExecutedFault> {
  const redis = requireReplicated(cluster);
  const holder = await cluster.holder();
  const result = await run(redis);
  return { ...base, wasLeader: false, target: result.target ?? holder, ...result };
}

function requireSingle(cluster: ChaosCluster): TestRedis {
  if (!cluster.single) throw new Error('this fault restarts the one Redis server: it applies to a single Redis only');
  return cluster.single;
}

function requireReplicated(cluster: ChaosCluster): ReplicatedRedis {
  if (!cluster.replicated) throw new Error('this fault needs a replicated Redis (--redis sentinel|cluster)');
  return cluster.replicated;
}

type Base = { index: number; kind: FaultKind };

/**
 * Kubernetes: from inside the API server's write handler, when the leader's renewal (an update that keeps
 * it as holder) has been applied, SIGSTOP the leader before its reply is sent; hold the reply past the
 * lease, so another instance takes over; then deliver the late reply just before or just after SIGCONT.
 */
async function freezeInApiRenewal(cluster: ChaosCluster, fault: Extract<PlannedFault, { kind: 'freeze-in-renewal' }>, base: Base): Promise<ExecutedFault> {
  const api = requireApi(cluster);
  const { victim } = await aim(cluster, 'leader');
  if (!victim || !(await isHolder(cluster, victim))) return skippedFault(base, 'no leader');
  let startedAt = 0;
  let renewal: LeaseWrite | undefined;
  // `request`: SIGSTOP as soon as the PUT passes the proxy, most likely before the process is back in
  // its event loop's poll (on waking it then reads the late reply before running its expired timers).
  // A PUT that is then refused (a conflict) applies nothing: the process is woken and we wait again.
  let unwatchRequests = (): void => undefined;
  if (fault.at === 'request') {
    let retry: NodeJS.Timeout | undefined;
    unwatchRequests = cluster.watch(victim, 'api-request', (chunk) => {
      if (victim.stopped || renewal || !chunk.toString('latin1').startsWith(`PUT ${LEASE_PATH}`)) return;
      cluster.stop(victim);
      clearTimeout(retry);
      retry = setTimeout(() => {
        if (!renewal && victim.stopped) cluster.resume(victim);
      }, REPLY_WAIT_MS);
    });
  }
  const frozen = new Promise<void>((resolve) => {
    const remove = api.onWrite(
      (w) => w.viaApi && w.op === 'update' && w.spec.holderIdentity === victim.identity && w.previous?.holderIdentity === victim.identity,
      async (write) => {
        renewal = write;
        unwatchRequests();
        startedAt = Date.now();
        if (fault.at === 'reply' || fault.at === 'reply-next-turn') {
          // Answer at once; freeze the process as the answer lands in its socket.
          stopOnReply(cluster, victim, write, fault.at, fault.stoppedMs, resolve);
          return;
        }
        if (!victim.stopped) cluster.stop(victim);
        await sleep(fault.stoppedMs);
        if (fault.reply === 'after-resume') {
          // SIGCONT first: the process wakes to its expired timers, and the reply comes after.
          cluster.resume(victim);
        } else {
          // The reply goes out when this handler returns: SIGCONT once it sits in the process's socket,
          // so that the process wakes to a late reply (a bounded wait, in case the reply is split oddly).
          const marker = `"resourceVersion":"${write.resourceVersion}"`;
          const timers: { fallback?: NodeJS.Timeout; unwatch?: () => void } = {};
          const wake = (): void => {
            clearTimeout(timers.fallback);
            timers.unwatch?.();
            if (victim.stopped) cluster.resume(victim);
          };
          timers.unwatch = cluster.watch(victim, 'api-reply', (chunk) => {
            if (chunk.toString('utf8').includes(marker)) wake();
          });
          timers.fallback = setTimeout(wake, REPLY_WAIT_MS);
        }
        resolve();
      },
      { once: true },
    );
    setTimeout(() => {
      if (renewal) return;
      remove();
      unwatchRequests();
      if (victim.stopped) cluster.resume(victim);
      resolve();
    }, RENEWAL_WAIT_MS).unref();
  });
  await frozen;
  if (!renewal) return skippedFault(base, `the leader renewed nothing within ${RENEWAL_WAIT_MS} ms`);
  // Until it has woken up (the reply-first wake is bounded by REPLY_WAIT_MS).
  for (let waited = 0; victim.stopped && waited < 2 * REPLY_WAIT_MS; waited += 10) await sleep(10);
  await sleep(50);
  const after = await cluster.holder();
  return {
    ...base, target: victim.identity, wasLeader: true, startedAt, endedAt: Date.now(),
    detail: `renewal rv ${renewal.resourceVersion} (transitions ${renewal.spec.leaseTransitions}) applied, leader SIGSTOPped at its ${fault.at} for ` +
      `${fault.stoppedMs} ms${fault.at.startsWith('reply') ? '' : `, reply delivered ${fault.reply}`}; holder now ${after ?? 'none'}`,
  };
}

/**
 * SIGSTOPs the victim as soon as the renewal's reply has been handed to its socket (or one turn of this
 * event loop later), keeps it stopped for `stoppedMs`, then SIGCONTs it and calls `done`.
 */
function stopOnReply(cluster: ChaosCluster, victim: Incarnation, write: LeaseWrite, at: 'reply' | 'reply-next-turn', stoppedMs: number, done: () => void): void {
  const marker = `"resourceVersion":"${write.resourceVersion}"`;
  const freeze = (): void => {
    clearTimeout(fallback);
    unwatch();
    if (!victim.stopped && victim.exitedAt === undefined) cluster.stop(victim);
    setTimeout(() => {
      if (victim.stopped) cluster.resume(victim);
      done();
    }, stoppedMs);
  };
  const unwatch = cluster.watch(victim, 'api-reply', (chunk) => {
    if (!chunk.toString('utf8').includes(marker)) return;
    if (at === 'reply') freeze();
    else setImmediate(freeze);
  });
  // A reply split so that the marker spans two chunks: freeze a little later rather than never.
  const fallback = setTimeout(freeze, REPLY_WAIT_MS);
}

/**
 * Redis lock: `CLIENT PAUSE WRITE` until the leader's renewal (EVALSHA of updateLease) has been sent and
 * is held by the pause. `request` / `write`: SIGSTOP the leader at once / once the command has reached
 * Redis, `CLIENT UNPAUSE` (the renewal executes, its reply waits for the frozen process). `reply` /
 * `reply-next-turn`: `CLIENT UNPAUSE` with the leader running, and SIGSTOP it as the renewal's reply
 * lands in its socket (or a turn later). Then keep it frozen past the lease and SIGCONT.
 */
async function freezeInRedisRenewal(cluster: ChaosCluster, fault: Extract<PlannedFault, { kind: 'freeze-in-renewal' }>, base: Base): Promise<ExecutedFault> {
  const { victim } = await aim(cluster, 'leader');
  if (!victim || !(await isHolder(cluster, victim))) return skippedFault(base, 'no leader');
  const onReply = fault.at === 'reply' || fault.at === 'reply-next-turn';
  let connection: number | undefined;
  let notify = (): void => undefined;
  const renewalSent = new Promise<void>((resolve) => (notify = resolve));
  const unwatch = cluster.watch(victim, 'redis-request', (chunk, link) => {
    const text = chunk.toString('latin1');
    if (connection !== undefined || !(text.includes(UPDATE_LEASE_SHA) || text.includes(UPDATE_LEASE_MARKER))) return;
    connection = link;
    // At once, most likely still in the event-loop pass that sent it.
    if (fault.at === 'request') cluster.stop(victim);
    notify();
  });
  // The first chunk delivered on the renewal's connection after the UNPAUSE is its reply: the
  // connection's commands are answered in order, and the ones behind it were held by the pause too.
  let unpaused = false;
  let replied = false;
  let frozenOnReply = (): void => undefined;
  const stoppedOnReply = new Promise<void>((resolve) => (frozenOnReply = resolve));
  const unwatchReplies = cluster.watch(victim, 'redis-reply', (_chunk, link) => {
    if (!onReply || !unpaused || replied || link !== connection) return;
    replied = true;
    const freeze = (): void => {
      if (!victim.stopped && victim.exitedAt === undefined) cluster.stop(victim);
      frozenOnReply();
    };
    if (fault.at === 'reply') freeze();
    else setImmediate(freeze);
  });
  const startedAt = Date.now();
  await cluster.client.call('CLIENT', 'PAUSE', String(PAUSE_GUARD_MS), 'WRITE');
  try {
    await Promise.race([renewalSent, sleep(RENEWAL_WAIT_MS)]);
    // The proxy forwards it: give it a moment to reach Redis and block there before the UNPAUSE.
    if (connection !== undefined) await sleep(20);
    if (connection !== undefined && fault.at === 'write') cluster.stop(victim);
  } finally {
    unwatch();
    unpaused = true;
    await cluster.client.call('CLIENT', 'UNPAUSE');
  }
  const pausedMs = Date.now() - startedAt;
  if (connection !== undefined && onReply) await Promise.race([stoppedOnReply, sleep(REPLY_WAIT_MS)]);
  unwatchReplies();
  if (connection === undefined || !victim.stopped) {
    if (victim.stopped) cluster.resume(victim);
    return { ...base, target: victim.identity, wasLeader: true, startedAt, endedAt: Date.now(), detail: `skipped: no renewal held by CLIENT PAUSE, or no reply seen (${fault.at})` };
  }
  await sleep(fault.stoppedMs);
  cluster.resume(victim);
  await sleep(50);
  const after = await cluster.holder();
  return {
    ...base, target: victim.identity, wasLeader: true, startedAt, endedAt: Date.now(),
    detail: `CLIENT PAUSE WRITE ${pausedMs} ms held the leader's renewal; SIGSTOP at its ${fault.at}, frozen ${fault.stoppedMs} ms, SIGCONT; holder now ${after ?? 'none'}`,
  };
}

/**
 * Cuts the leader from its lock (its API proxy; for the Redis lock its Redis proxy), so that its renewals
 * fail; then SIGSTOPs it `marginMs` before its renew deadline would pass, counted from its last write in
 * the lock's history (the attempt began before the write, so the real deadline is a little earlier
 * still); heals the cut while it is frozen and keeps it frozen past the lease.
 */
async function freezeNearDeadline(cluster: ChaosCluster, fault: Extract<PlannedFault, { kind: 'freeze-near-deadline' }>, base: Base): Promise<ExecutedFault> {
  const { victim } = await aim(cluster, 'leader');
  if (!victim || !(await isHolder(cluster, victim))) return skippedFault(base, 'no leader');
  const proxy: TcpProxy = cluster.apiProxyOf(victim) ?? cluster.redisProxyOf(victim);
  const startedAt = Date.now();
  proxy.partition('blackhole');
  // Let the history catch up with any write that got through before the cut.
  await sleep(60);
  if ('refresh' in cluster.history) await cluster.history.refresh().catch(() => undefined);
  const last = cluster.history.lastWriteBy(victim.identity);
  const freezeAt = (last?.at ?? startedAt) + cluster.options.timings.renewDeadlineMs - fault.marginMs;
  await sleep(Math.max(0, freezeAt - Date.now()));
  const lateBy = Date.now() - freezeAt;
  cluster.stop(victim);
  proxy.heal('deliver');
  await sleep(fault.stoppedMs);
  cluster.resume(victim);
  return {
    ...base, target: victim.identity, wasLeader: true, startedAt, endedAt: Date.now(),
    detail: `cut from its lock ${proxy === cluster.apiProxyOf(victim) ? '(API)' : '(Redis)'}; last lease write ${last ? new Date(last.at).toISOString() : 'unknown'}; ` +
      `SIGSTOP at deadline − ${fault.marginMs} ms${lateBy > 5 ? ` (${lateBy} ms late)` : ''}, healed, frozen ${fault.stoppedMs} ms, SIGCONT`,
  };
}

/**
 * Restarts Redis (ticks due meanwhile fail and wait in the leader's memory for a retry), then SIGKILLs the
 * leader the moment it has claimed a new tick of the per-second job, before those retries run.
 */
async function restartRedisThenKillLeader(cluster: ChaosCluster, fault: Extract<PlannedFault, { kind: 'redis-restart-kill-leader' }>, base: Base): Promise<ExecutedFault> {
  const { victim } = await aim(cluster, 'leader');
  if (!victim || !(await isHolder(cluster, victim))) return skippedFault(base, 'no leader');
  const ledger = new TickLedger(cluster.client, new KeySpace());
  const before = (await ledger.jobState(STEADY_JOB)).lastScheduledTick ?? 0;
  const redis = requireSingle(cluster);
  const startedAt = Date.now();
  await redis.stop(false);
  await sleep(fault.downMs);
  await redis.restart();
  const upAt = Date.now();
  // A fresh connection: the shared client may still be backing off its reconnects.
  const probe = redis.client();
  probe.on('error', () => undefined);
  const probeLedger = new TickLedger(probe, new KeySpace());
  let claimed: number | undefined;
  try {
    const deadline = Date.now() + CLAIM_WAIT_MS;
    while (Date.now() < deadline && victim.exitedAt === undefined) {
      const last = (await probeLedger.jobState(STEADY_JOB).catch(() => undefined))?.lastScheduledTick;
      // A tick due after Redis was back, not a retry of one that failed during the outage.
      if (last !== undefined && last > before && last >= upAt - 200) {
        claimed = last;
        break;
      }
      await sleep(5);
    }
  } finally {
    probe.disconnect();
  }
  const killedAfter = Date.now() - upAt;
  if (victim.exitedAt === undefined) await cluster.kill(victim);
  await sleep(fault.restartAfterMs);
  const next = cluster.restart(victim);
  return {
    ...base, target: victim.identity, wasLeader: true, startedAt, endedAt: Date.now(),
    detail: `redis-server down ${upAt - startedAt} ms; leader SIGKILLed ${killedAfter} ms after Redis was back, ` +
      `${claimed ? `right after it claimed ${new Date(claimed).toISOString()}` : 'without a new claim seen'}; restarted as ${next.identity}`,
  };
}

async function isHolder(cluster: ChaosCluster, incarnation: Incarnation): Promise<boolean> {
  return (await cluster.holder()) === incarnation.identity && !incarnation.stopped && incarnation.exitedAt === undefined;
}

/** Resolves a fault's target: the current leader (waiting a while for one), or a running follower. */
async function aim(cluster: ChaosCluster, target: 'leader' | 'follower'): Promise<{ victim: Incarnation | undefined; wasLeader: boolean }> {
  if (target === 'leader') {
    const deadline = Date.now() + LEADER_WAIT_MS;
    for (;;) {
      const leader = await cluster.leader();
      if (leader) return { victim: leader, wasLeader: true };
      if (Date.now() > deadline) break;
      await sleep(50);
    }
  }
  const holder = await cluster.holder();
  const followers = cluster.live().filter((i) => i.identity !== holder && !i.stopped);
  // Deterministic among candidates: the lowest slot, so a replay hits the same slot.
  const victim = followers.sort((a, b) => a.slot - b.slot)[0];
  return { victim, wasLeader: false };
}

function requireApi(cluster: ChaosCluster): NonNullable<ChaosCluster['api']> {
  if (!cluster.api) throw new Error('API server faults need --lock kubernetes');
  return cluster.api;
}

function skippedFault(base: { index: number; kind: FaultKind }, why: string): ExecutedFault {
  const now = Date.now();
  return { ...base, wasLeader: false, startedAt: now, endedAt: now, detail: `skipped: ${why}` };
}
