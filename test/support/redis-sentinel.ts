import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { RedisProcess, removeTopology } from './redis-process.js';
import { until } from './until.js';

/** Timing of the test group: fast enough for CI, and what the failover tests reason about. */
export interface SentinelTiming {
  /** `down-after-milliseconds`: how long the primary may be silent before it is considered down. */
  downAfterMs: number;
  failoverTimeoutMs: number;
}

export const DEFAULT_SENTINEL_TIMING: SentinelTiming = { downAfterMs: 1_000, failoverTimeoutMs: 5_000 };

/**
 * A Sentinel group on this machine: one primary, two replicas and three sentinels (`redis-server
 * --sentinel`, quorum 2), each on a free loopback port, started and stopped by the test that owns it.
 */
export interface TestSentinelGroup {
  readonly masterName: string;
  /** `redis+sentinel://…/<masterName>`: what a user configures. */
  readonly url: string;
  readonly timing: SentinelTiming;
  readonly sentinels: RedisProcess[];
  /** The data nodes, the first one being the initial primary. */
  readonly nodes: RedisProcess[];
  /** The primary as the sentinels see it now. */
  primary(): Promise<RedisProcess>;
  /** Waits until the sentinels name a primary other than `old` and it answers as a primary; returns it. */
  waitForPromotion(old: RedisProcess, timeoutMs?: number): Promise<RedisProcess>;
  /** Waits until `node` reports itself a replica (a resumed old primary is demoted). */
  waitForReplica(node: RedisProcess, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

export async function startSentinelGroup(options: { masterName?: string; timing?: SentinelTiming } = {}): Promise<TestSentinelGroup> {
  const masterName = options.masterName ?? 'leasebeat-test';
  const timing = options.timing ?? DEFAULT_SENTINEL_TIMING;
  const dir = await mkdtemp(join(tmpdir(), 'leasebeat-sentinel-'));
  // With AOF, as production must run them: a data node killed and restarted comes back with its data. An
  // empty one (no persistence) can be promoted by the sentinels from a stale view of its offset, losing
  // every write it had acknowledged (Redis' "replication safety when persistence is off").
  const dataArgs = (port: number, extra: string[] = []): string[] => [
    '--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--dbfilename', `dump-${port}.rdb`, '--save', '',
    '--appendonly', 'yes', '--appendfsync', 'everysec', '--appenddirname', `appendonly-${port}`,
    '--maxmemory-policy', 'noeviction', '--loglevel', 'warning', '--repl-diskless-sync-delay', '0', ...extra,
  ];
  const started: RedisProcess[] = [];
  try {
    const primary = await RedisProcess.start((port) => dataArgs(port));
    started.push(primary);
    const replicas = await Promise.all([0, 1].map(() => RedisProcess.start((port) => dataArgs(port, ['--replicaof', '127.0.0.1', String(primary.port)]))));
    started.push(...replicas);
    const nodes = [primary, ...replicas];
    const sentinels = await Promise.all(
      [0, 1, 2].map(() =>
        RedisProcess.start(async (port) => {
          // Sentinel rewrites its config file (discovered replicas and sentinels), so each gets its own.
          const file = join(dir, `sentinel-${port}.conf`);
          await writeFile(
            file,
            [
              `port ${port}`,
              'bind 127.0.0.1',
              `dir ${dir}`,
              'loglevel warning',
              `sentinel monitor ${masterName} 127.0.0.1 ${primary.port} 2`,
              `sentinel down-after-milliseconds ${masterName} ${timing.downAfterMs}`,
              `sentinel failover-timeout ${masterName} ${timing.failoverTimeoutMs}`,
              `sentinel parallel-syncs ${masterName} 1`,
              '',
            ].join('\n'),
          );
          return [file, '--sentinel'];
        }),
      ),
    );
    started.push(...sentinels);

    const ask = async <T>(question: (client: Redis) => Promise<T>): Promise<T> => {
      let lastError: unknown;
      for (const sentinel of sentinels) {
        if (!sentinel.running) continue;
        const client = sentinel.client({ commandTimeout: 1_000, retryStrategy: () => null });
        try {
          return await question(client);
        } catch (error) {
          lastError = error;
        } finally {
          client.disconnect();
        }
      }
      throw lastError instanceof Error ? lastError : new Error('no sentinel answered');
    };
    const primaryPort = async (): Promise<number> =>
      Number(((await ask((c) => c.call('SENTINEL', 'get-master-addr-by-name', masterName))) as [string, string])[1]);
    const roleOf = async (node: RedisProcess): Promise<string | undefined> => {
      const client = node.client({ commandTimeout: 500, retryStrategy: () => null });
      try {
        return ((await client.call('ROLE')) as [string])[0];
      } catch {
        return undefined;
      } finally {
        client.disconnect();
      }
    };

    // WAIT needs the replicas attached and in sync, not just configured.
    await until(
      'both replicas to be online at the primary',
      async () => {
        const client = primary.client({ commandTimeout: 1_000, retryStrategy: () => null });
        try {
          return ((await client.info('replication')).match(/state=online/g) ?? []).length === 2;
        } finally {
          client.disconnect();
        }
      },
      30_000,
    );
    // Ready for a failover only once every sentinel knows both replicas (in sync) and the other sentinels.
    await until(
      'the sentinels to discover the replicas and each other',
      async () => {
        const views = await Promise.all(
          sentinels.map(async (sentinel) => {
            const client = sentinel.client({ commandTimeout: 1_000, retryStrategy: () => null });
            try {
              const known = (await client.call('SENTINEL', 'replicas', masterName)) as string[][];
              const peers = (await client.call('SENTINEL', 'sentinels', masterName)) as string[][];
              const online = known.filter((fields) => !String(fields[fields.indexOf('flags') + 1]).includes('down'));
              return online.length === 2 && peers.length === 2;
            } finally {
              client.disconnect();
            }
          }),
        );
        return views.every(Boolean);
      },
      30_000,
    );

    const byPort = (port: number): RedisProcess => {
      const node = nodes.find((n) => n.port === port);
      if (!node) throw new Error(`the sentinels name ${port}, which is not a node of this group`);
      return node;
    };
    return {
      masterName,
      timing,
      url: `redis+sentinel://${sentinels.map((s) => `127.0.0.1:${s.port}`).join(',')}/${masterName}`,
      sentinels,
      nodes,
      primary: async () => byPort(await primaryPort()),
      waitForPromotion: async (old, timeoutMs = 30_000) =>
        until(
          `a replica to be promoted in place of ${old.port}`,
          async () => {
            const port = await primaryPort().catch(() => old.port);
            return port !== old.port && (await roleOf(byPort(port))) === 'master' ? byPort(port) : undefined;
          },
          timeoutMs,
        ),
      waitForReplica: async (node, timeoutMs = 30_000) => {
        await until(`${node.port} to become a replica`, async () => (await roleOf(node)) === 'slave', timeoutMs);
      },
      close: async () => {
        for (const node of started) node.resume();
        await removeTopology(started, dir);
      },
    };
  } catch (error) {
    await removeTopology(started, dir);
    throw error;
  }
}
