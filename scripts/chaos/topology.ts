import type { Redis } from 'ioredis';
import { KeySpace } from '../../src/redis/keys.js';
import { CLUSTER_BULL_PREFIX, keySlot, RedisConnections } from '../../src/redis/redis-topology.js';
import { startRedisCluster, type TestRedisCluster } from '../../test/support/redis-cluster.js';
import type { RedisProcess } from '../../test/support/redis-process.js';
import { startSentinelGroup, type TestSentinelGroup } from '../../test/support/redis-sentinel.js';

/** The Redis the chaos suite runs leasebeat on: one server (behind per-process proxies), or a replicated topology. */
export type RedisKind = 'single' | 'sentinel' | 'cluster';
export const REDIS_KINDS: readonly RedisKind[] = ['single', 'sentinel', 'cluster'];

/**
 * Whose keys a fault aims at: leasebeat's (lease, fence, ledger: `leasebeat:{<lease>}:…`) or BullMQ's
 * (`{leasebeat-bull}:…` on Cluster). On Sentinel both sit on the one primary; on Cluster on two shards.
 */
export type Shard = 'leasebeat' | 'bull';

/**
 * A replicated Redis under test (Sentinel group or Cluster), with the faults issue 13 names: the primary
 * that holds leasebeat's keys killed or frozen past the failure detector, a replica restarted; and those
 * of issue 18, aimed at the primary of one shard.
 * Instances reach it through its URL, as users configure it: there is no per-process proxy in between.
 */
export interface ReplicatedRedis {
  kind: Exclude<RedisKind, 'single'>;
  /** What `LEASEBEAT_REDIS_URL` is set to. */
  url: string;
  /** BullMQ's prefix there (hash-tagged on Cluster, as leasebeat chooses it). */
  bullPrefix: string;
  /** How long a silent primary has before the failover starts (down-after, node timeout). */
  detectorMs: number;
  /** A new client for the suite's own reads, following failovers; the caller disconnects it. */
  client(): Redis;
  /** The primary that serves a shard's keys now; default leasebeat's (lease, fence, ledger). */
  primary(shard?: Shard): Promise<RedisProcess>;
  /** The replicas of `primary` that are running. */
  replicasOf(primary: RedisProcess): Promise<RedisProcess[]>;
  /** Waits until another node serves the shard's keys (default leasebeat's) as the primary; returns it. */
  waitForPromotion(old: RedisProcess, timeoutMs?: number, shard?: Shard): Promise<RedisProcess>;
  close(): Promise<void>;
}

/** A key of each shard on Cluster: leasebeat's keys (default prefix and lease name) share the fence's slot, BullMQ's the prefix's. */
const SHARD_KEYS: Record<Shard, string> = { leasebeat: new KeySpace().fence, bull: `${CLUSTER_BULL_PREFIX}:any` };

export async function startReplicatedRedis(kind: Exclude<RedisKind, 'single'>): Promise<ReplicatedRedis> {
  return kind === 'sentinel' ? sentinelUnderTest(await startSentinelGroup()) : clusterUnderTest(await startRedisCluster());
}

function followingClient(url: string): Redis {
  // Retries commands across a failover, unlike leasebeat's control connection: the suite's reads must
  // not fail because a failover is under way.
  const client = RedisConnections.fromUrl(url).open('worker') as Redis;
  client.on('error', () => undefined);
  return client;
}

function sentinelUnderTest(group: TestSentinelGroup): ReplicatedRedis {
  return {
    kind: 'sentinel',
    url: group.url,
    bullPrefix: 'bull',
    detectorMs: group.timing.downAfterMs,
    client: () => followingClient(group.url),
    primary: () => group.primary(),
    replicasOf: (primary) => Promise.resolve(group.nodes.filter((node) => node !== primary && node.running)),
    waitForPromotion: (old, timeoutMs) => group.waitForPromotion(old, timeoutMs),
    close: () => group.close(),
  };
}

function clusterUnderTest(cluster: TestRedisCluster): ReplicatedRedis {
  const slot = (shard: Shard = 'leasebeat'): number => keySlot(SHARD_KEYS[shard]);
  return {
    kind: 'cluster',
    url: cluster.url,
    bullPrefix: CLUSTER_BULL_PREFIX,
    detectorMs: cluster.nodeTimeoutMs,
    client: () => followingClient(cluster.url),
    primary: (shard) => cluster.primaryOf(slot(shard)),
    replicasOf: (primary) => cluster.replicasOf(primary),
    waitForPromotion: (old, timeoutMs, shard) => cluster.waitForFailover(old, slot(shard), timeoutMs),
    close: () => cluster.close(),
  };
}
