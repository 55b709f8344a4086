import { execFile } from 'node:child_process';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { RedisProcess, removeTopology } from './redis-process.js';
import { useSuiteResource, type SuiteResource } from './suite-resource.js';
import { until } from './until.js';

const run = promisify(execFile);

/** Cluster node timeout of the test cluster: how long a silent primary has before its replica takes over. */
export const TEST_CLUSTER_NODE_TIMEOUT_MS = 1_000;

/**
 * A Redis Cluster on this machine: three primaries and three replicas (`redis-cli --cluster create …
 * --cluster-replicas 1 --cluster-yes`), each on a free loopback port, started and stopped by the test.
 */
export interface TestRedisCluster {
  /** `redis+cluster://…`: what a user configures. */
  readonly url: string;
  readonly nodes: RedisProcess[];
  /** `cluster-node-timeout`: how long a silent primary has before its replica takes over. */
  readonly nodeTimeoutMs: number;
  /** The running nodes that replicate `primary` now (as each reports itself). */
  replicasOf(primary: RedisProcess): Promise<RedisProcess[]>;
  /** The primary serving `slot` now (as that node itself reports). */
  primaryOf(slot: number): Promise<RedisProcess>;
  /** Waits until a node other than `old` serves `slot` as a primary and the cluster state is ok. */
  waitForFailover(old: RedisProcess, slot: number, timeoutMs?: number): Promise<RedisProcess>;
  close(): Promise<void>;
}

/** A Redis Cluster for the calling suite: started in a `before` hook, closed in an `after` hook. */
export function useRedisCluster(): SuiteResource<TestRedisCluster> {
  return useSuiteResource('useRedisCluster: the cluster', startRedisCluster, (cluster) => cluster.close());
}

export async function startRedisCluster(): Promise<TestRedisCluster> {
  const dir = await mkdtemp(join(tmpdir(), 'leasebeat-cluster-'));
  const nodes: RedisProcess[] = [];
  try {
    nodes.push(
      ...(await Promise.all(
        Array.from({ length: 6 }, () =>
          RedisProcess.start((port) => [
            '--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--cluster-enabled', 'yes',
            '--cluster-config-file', `nodes-${port}.conf`, '--cluster-node-timeout', String(TEST_CLUSTER_NODE_TIMEOUT_MS),
            // Replicas sync at once (the default waits 5 s for more replicas): a replica that never synced
            // will not fail over. With AOF, as production must run them: a node restarted comes back with
            // its data, not empty (an empty primary rejoining would serve its slots without them).
            '--dbfilename', `dump-${port}.rdb`, '--save', '', '--repl-diskless-sync-delay', '0',
            '--appendonly', 'yes', '--appendfsync', 'everysec', '--appenddirname', `appendonly-${port}`, '--loglevel', 'warning',
          ]),
        ),
      )),
    );
    await run('redis-cli', ['--cluster', 'create', ...nodes.map((n) => `127.0.0.1:${n.port}`), '--cluster-replicas', '1', '--cluster-yes'], { timeout: 60_000 });
    const clusterInfo = async (node: RedisProcess): Promise<string> => {
      const client = node.client({ commandTimeout: 1_000, retryStrategy: () => null });
      try {
        return (await client.call('CLUSTER', 'INFO')) as string;
      } catch {
        return '';
      } finally {
        client.disconnect();
      }
    };
    const slotOwner = async (slot: number, among: RedisProcess[]): Promise<RedisProcess | undefined> => {
      for (const node of among) {
        if (!node.running) continue;
        const client = node.client({ commandTimeout: 1_000, retryStrategy: () => null });
        try {
          const ranges = (await client.call('CLUSTER', 'SLOTS')) as Array<[number, number, [string, number]]>;
          const owner = ranges.find(([from, to]) => from <= slot && slot <= to)?.[2][1];
          const found = nodes.find((n) => n.port === owner);
          if (found) return found;
        } catch {
          // try the next node
        } finally {
          client.disconnect();
        }
      }
      return undefined;
    };
    await until('every node to report cluster_state:ok with all replicas attached', async () => {
      const infos = await Promise.all(nodes.map(clusterInfo));
      return infos.every((info) => info.includes('cluster_state:ok') && info.includes('cluster_known_nodes:6'));
    }, 30_000);
    await until('every replica to be in sync with its primary', async () => {
      const links = await Promise.all(
        nodes.map(async (node) => {
          const client = node.client({ commandTimeout: 1_000, retryStrategy: () => null });
          try {
            const info = await client.info('replication');
            return info.includes('role:master') ? /slave0:.*state=online/.test(info) : info.includes('master_link_status:up');
          } catch {
            return false;
          } finally {
            client.disconnect();
          }
        }),
      );
      return links.every(Boolean);
    }, 30_000);
    return {
      url: `redis+cluster://${nodes.slice(0, 3).map((n) => `127.0.0.1:${n.port}`).join(',')}`,
      nodes,
      nodeTimeoutMs: TEST_CLUSTER_NODE_TIMEOUT_MS,
      replicasOf: async (primary) => {
        const following = await Promise.all(
          nodes.map(async (node) => {
            if (node === primary || !node.running) return false;
            const client = node.client({ commandTimeout: 1_000, retryStrategy: () => null });
            try {
              const role = (await client.call('ROLE')) as [string, string, number];
              return role[0] === 'slave' && Number(role[2]) === primary.port;
            } catch {
              return false;
            } finally {
              client.disconnect();
            }
          }),
        );
        return nodes.filter((_, index) => following[index]);
      },
      primaryOf: async (slot) => {
        const owner = await slotOwner(slot, nodes);
        if (!owner) throw new Error(`no node serves slot ${slot}`);
        return owner;
      },
      waitForFailover: async (old, slot, timeoutMs = 30_000) =>
        until(
          `a replica to take slot ${slot} over from ${old.port}`,
          async () => {
            const owner = await slotOwner(slot, nodes.filter((n) => n !== old));
            return owner && owner !== old && (await clusterInfo(owner)).includes('cluster_state:ok') ? owner : undefined;
          },
          timeoutMs,
        ),
      close: async () => {
        await removeTopology(nodes, dir);
      },
    };
  } catch (error) {
    await removeTopology(nodes, dir);
    throw error;
  }
}
