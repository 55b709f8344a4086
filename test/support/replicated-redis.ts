import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { RedisProcess } from './redis-process.js';
import { TcpProxy } from './tcp-proxy.js';
import { until } from './until.js';

/**
 * A data node for a hand-made replicated topology: a plain `redis-server` (no Sentinel, no Cluster) in
 * `dir`, replicating from `replicaOf` (a port: a server's, or a proxy's in front of it) when given. Full
 * syncs start at once (no diskless delay).
 */
export function startDataNode(dir: string, replicaOf?: number): Promise<RedisProcess> {
  return RedisProcess.start((port) => [
    '--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--dbfilename', `dump-${port}.rdb`, '--save', '', '--appendonly', 'no',
    '--repl-diskless-sync-delay', '0', '--loglevel', 'warning',
    ...(replicaOf === undefined ? [] : ['--replicaof', '127.0.0.1', String(replicaOf)]),
  ]);
}

/** Waits until `primary` (a direct client) reports `replicas` replicas online. */
export async function replicasOnline(primary: Redis, replicas: number, timeoutMs = 20_000): Promise<void> {
  await until(
    `${replicas} replica(s) online`,
    async () => (await primary.info('replication')).split('\n').filter((line) => /^slave\d+:.*state=online/.test(line)).length >= replicas,
    timeoutMs,
  );
}

/**
 * A primary and one replica that replicates from it THROUGH a proxy (`link`): a test holds the
 * replication stream with `link.partition('blackhole')` (a write then stands on the primary alone),
 * lets it go on with `link.heal('deliver')`, or loses what was held with `heal('reset')`.
 */
export interface ReplicatedPrimary {
  primary: RedisProcess;
  replica: RedisProcess;
  /** The proxy the replica's replication connection goes through. */
  link: TcpProxy;
  /** Direct clients (not through any proxy), for ground truth. */
  onPrimary: Redis;
  onReplica: Redis;
  /** The replica's `master_repl_offset` has caught up with the primary's. */
  caughtUp(): Promise<void>;
  close(): Promise<void>;
}

export async function startReplicatedPrimary(): Promise<ReplicatedPrimary> {
  const dir = await mkdtemp(join(tmpdir(), 'leasebeat-replicated-'));
  const primary = await startDataNode(dir);
  const link = await TcpProxy.start({ port: primary.port });
  const replica = await startDataNode(dir, link.port);
  const onPrimary = primary.client({ maxRetriesPerRequest: null });
  const onReplica = replica.client({ maxRetriesPerRequest: null });
  await replicasOnline(onPrimary, 1);
  const offset = async (client: Redis): Promise<number> => Number(/master_repl_offset:(\d+)/.exec(await client.info('replication'))?.[1] ?? -1);
  return {
    primary,
    replica,
    link,
    onPrimary,
    onReplica,
    caughtUp: async () => {
      const target = await offset(onPrimary);
      await until('the replica to catch up with its primary', async () => (await offset(onReplica)) >= target);
    },
    close: async () => {
      onPrimary.disconnect();
      onReplica.disconnect();
      await link.close();
      await Promise.all([primary.kill(), replica.kill()]);
      await rm(dir, { recursive: true, force: true });
    },
  };
}
