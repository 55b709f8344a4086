import { setTimeout as sleep } from 'node:timers/promises';
import type { ChaosCluster, Incarnation } from './cluster.js';
import type { FaultKind, PlannedFault } from './plan.js';

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
}

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
      await cluster.redis.stop(false);
      await sleep(fault.downMs);
      await cluster.redis.restart();
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
  }
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
