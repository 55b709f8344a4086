import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { FakeLeaseServer } from '../../test/support/fake-lease-server.js';
import { startInstance, type Instance, type LogLine } from '../../test/support/instance.js';
import { startRedis, type TestRedis } from '../../test/support/redis-server.js';
import { TcpProxy } from '../../test/support/tcp-proxy.js';
import { ApiLeaseHistory, RedisLeaseHistory, type LeaseHistory } from './lease-history.js';
import type { ElectionTimings, LockKind } from './plan.js';
import { RenewedClient } from './renewed-client.js';
import { startReplicatedRedis, type RedisKind, type ReplicatedRedis } from './topology.js';

export const LEASE_NAME = 'leasebeat';
export const LEASE_NAMESPACE = 'default';
/** The Redis lock's record, under the default prefix and lease name. */
export const REDIS_LEASE_KEY = `leasebeat:{${LEASE_NAME}}:lease`;

/** How soon the supervisor restarts a process that exited by itself. */
const SUPERVISOR_RESTART_MS = 1000;

/** One process incarnation: its identity, slot and parsed log. */
export interface Incarnation {
  identity: string;
  slot: number;
  instance: Instance;
  startedAt: number;
  /** Set while the process is SIGSTOPped. */
  stopped: boolean;
  exitedAt?: number;
  exitCode?: number | null;
  /** True when the suite asked it to end (SIGKILL, SIGTERM): any other exit is the process's own. */
  ended?: boolean;
}

/**
 * Everything one slot's processes connect through: on a single Redis a proxy to it and, for Kubernetes,
 * an API proxy. A replicated Redis is reached through its URL (sentinels, cluster nodes), with no proxy.
 */
interface Slot {
  index: number;
  redisProxy: TcpProxy | undefined;
  apiProxy: TcpProxy | undefined;
  kubeconfig: string | undefined;
  incarnations: number;
  current: Incarnation | undefined;
  /** Fault watchers of this slot's traffic, by stream. */
  watchers: Record<TrafficStream, Set<TrafficWatcher>>;
}

/**
 * A slot's traffic a fault can watch: what its process sends to Redis, what it sends to the API server,
 * and the API server's replies once they have reached the process's socket.
 */
export type TrafficStream = 'redis-request' | 'redis-reply' | 'api-request' | 'api-reply';
/** Sees one chunk of a slot's traffic and the number of the proxied connection it belongs to. */
export type TrafficWatcher = (chunk: Buffer, connection: number) => void;

export interface ClusterOptions {
  lock: LockKind;
  /** The Redis leasebeat runs on; default one server. */
  redis?: RedisKind;
  instances: number;
  jobsDir: string;
  timings: ElectionTimings;
  /** Extra environment for every process. */
  env?: Record<string, string>;
  /**
   * Sees every chunk a slot's process sends to Redis (with the number of its connection through the
   * slot's proxy: a process holds several), or to the API server (for counting requests).
   */
  onRedisData?: (slot: number, chunk: Buffer, connection: number) => void;
  onApiData?: (slot: number, chunk: Buffer) => void;
}

/**
 * The system under test: a redis-server with AOF (or a Sentinel group, or a Redis Cluster), for Kubernetes
 * the fake Lease API server, and K slots each running one real `leasebeat start` process at a time. On one
 * server every process reaches Redis (and the API server) through its slot's own TCP proxy, so one process
 * can be partitioned alone.
 */
export class ChaosCluster {
  readonly incarnations: Incarnation[] = [];
  private readonly slots: Slot[] = [];
  /** Set once the suite stops the cluster: no more supervisor restarts. */
  private closing = false;
  /** The lock's own write history (ground truth for the lease invariants), followed from the start. */
  readonly history: LeaseHistory;
  /** The suite's own connection to the Redis under test (see `client`). */
  private readonly connection: RenewedClient;
  /** A client of the records' server. */
  readonly recordsClient: Redis;

  private constructor(
    readonly options: ClusterOptions,
    /** The single server under test; undefined on a replicated Redis. */
    readonly single: TestRedis | undefined,
    /** The Sentinel group or Cluster under test, if that is what runs. */
    readonly replicated: ReplicatedRedis | undefined,
    /**
     * Where the chaos jobs record their runs (CHAOS_RECORD_URL): the server under test itself, or beside
     * a replicated Redis a server of its own, which no fault touches (the audit's ground truth of runs).
     */
    readonly records: TestRedis,
    readonly api: FakeLeaseServer | undefined,
    private readonly configDir: string,
  ) {
    this.connection = new RenewedClient(() => this.newClient());
    this.history = api ? new ApiLeaseHistory(api, LEASE_NAMESPACE, LEASE_NAME) : new RedisLeaseHistory(() => this.newClient(), REDIS_LEASE_KEY);
    this.history.start();
    this.recordsClient = records.client();
    this.recordsClient.on('error', () => undefined);
  }

  static async start(options: ClusterOptions): Promise<ChaosCluster> {
    const kind = options.redis ?? 'single';
    // AOF: a Redis restart (SIGTERM) loses nothing acknowledged, the lock's history stream included.
    const records = await startRedis({ appendonly: true });
    const replicated = kind === 'single' ? undefined : await startReplicatedRedis(kind);
    const api = options.lock === 'kubernetes' ? await FakeLeaseServer.start() : undefined;
    const configDir = await mkdtemp(join(tmpdir(), 'leasebeat-chaos-'));
    const cluster = new ChaosCluster(options, replicated ? undefined : records, replicated, records, api, configDir);
    for (let index = 0; index < options.instances; index++) cluster.slots.push(await cluster.createSlot(index));
    return cluster;
  }

  /** A direct client (no proxy) to the Redis under test, for the suite's own reads and writes. */
  get client(): Redis {
    return this.connection.client;
  }

  /** The URL of the Redis under test, as a user would configure it (the one server, the sentinels or the cluster's nodes). */
  get url(): string {
    return this.replicated?.url ?? this.records.url;
  }

  /** A new client to the Redis under test (following failovers on a replicated one); the caller disconnects it. */
  newClient(): Redis {
    const client = this.replicated ? this.replicated.client() : this.records.client();
    client.on('error', () => undefined);
    return client;
  }

  /** BullMQ's key prefix on the Redis under test. */
  get bullPrefix(): string {
    return this.replicated?.bullPrefix ?? 'bull';
  }

  /** Starts one process in every slot. */
  startAll(): void {
    for (const slot of this.slots) this.launch(slot);
  }

  /** The processes running now (stopped ones included). */
  live(): Incarnation[] {
    return this.slots.flatMap((slot) => (slot.current ? [slot.current] : []));
  }

  /** The identity in the lock record right now, if any. */
  async holder(): Promise<string | undefined> {
    if (this.api) return this.api.lease(LEASE_NAMESPACE, LEASE_NAME)?.spec.holderIdentity || undefined;
    return (await this.client.hget(REDIS_LEASE_KEY, 'holderIdentity')) || undefined;
  }

  /** The running incarnation with this identity, if any. */
  byIdentity(identity: string | undefined): Incarnation | undefined {
    return this.live().find((i) => i.identity === identity);
  }

  /** Calls `watcher` with every chunk of one stream of the incarnation's slot, until the returned function is called. */
  watch(incarnation: Incarnation, stream: TrafficStream, watcher: TrafficWatcher): () => void {
    const watchers = this.slots[incarnation.slot]!.watchers[stream];
    watchers.add(watcher);
    return () => watchers.delete(watcher);
  }

  /** The live, running process that holds the lock, if one does. */
  async leader(): Promise<Incarnation | undefined> {
    const holder = await this.holder();
    return this.live().find((i) => i.identity === holder && !i.stopped);
  }

  /** Kills the process (SIGKILL) and waits for it to exit. */
  async kill(incarnation: Incarnation): Promise<void> {
    incarnation.ended = true;
    incarnation.instance.child.kill('SIGKILL');
    await this.exited(incarnation);
  }

  /** Sends SIGTERM and waits for a clean exit, killing the process if it hangs past `graceMs`. */
  async terminate(incarnation: Incarnation, graceMs: number): Promise<{ code: number | null; forced: boolean }> {
    incarnation.ended = true;
    incarnation.instance.child.kill('SIGTERM');
    const code = await Promise.race([incarnation.instance.exited(), new Promise<'hung'>((r) => setTimeout(() => r('hung'), graceMs))]);
    if (code !== 'hung') {
      await this.exited(incarnation);
      return { code, forced: false };
    }
    await this.kill(incarnation);
    return { code: null, forced: true };
  }

  stop(incarnation: Incarnation): void {
    incarnation.stopped = true;
    incarnation.instance.child.kill('SIGSTOP');
  }

  resume(incarnation: Incarnation): void {
    incarnation.instance.child.kill('SIGCONT');
    incarnation.stopped = false;
  }

  /** Starts a new process (a new identity) in the slot of an exited one. */
  restart(exited: Incarnation): Incarnation {
    return this.launch(this.slots[exited.slot]!);
  }

  /** The slot's proxy to the single Redis (faults that need one are drawn only there). */
  redisProxyOf(incarnation: Incarnation): TcpProxy {
    const proxy = this.slots[incarnation.slot]!.redisProxy;
    if (!proxy) throw new Error('this fault needs a proxy in front of Redis: it applies to a single Redis only');
    return proxy;
  }

  apiProxyOf(incarnation: Incarnation): TcpProxy | undefined {
    return this.slots[incarnation.slot]!.apiProxy;
  }

  /** Every log line of every incarnation, with its identity. */
  logs(): Array<{ identity: string; line: LogLine }> {
    return this.incarnations.flatMap((i) => i.instance.logs.map((line) => ({ identity: i.identity, line })));
  }

  /** Stops every process gracefully, killing any that hangs past `graceMs`. */
  async stopAll(graceMs = 15_000): Promise<void> {
    this.closing = true;
    await Promise.all(
      this.live().map(async (incarnation) => {
        if (incarnation.stopped) this.resume(incarnation);
        await this.terminate(incarnation, graceMs);
      }),
    );
  }

  /** Stops every process, then the servers and proxies, and removes the kubeconfig files. */
  async close(): Promise<void> {
    await this.stopAll();
    await this.history.stop();
    if (this.history instanceof RedisLeaseHistory) this.history.close();
    for (const slot of this.slots) {
      await slot.redisProxy?.close();
      await slot.apiProxy?.close();
    }
    await this.api?.close();
    this.connection.close();
    this.recordsClient.disconnect();
    await this.replicated?.close();
    await this.records.close();
    await rm(this.configDir, { recursive: true, force: true });
  }

  private async createSlot(index: number): Promise<Slot> {
    const { onRedisData, onApiData } = this.options;
    const watchers: Slot['watchers'] = { 'redis-request': new Set(), 'redis-reply': new Set(), 'api-request': new Set(), 'api-reply': new Set() };
    const notify = (stream: TrafficStream, chunk: Buffer, connection: number): void => {
      for (const watcher of watchers[stream]) watcher(chunk, connection);
    };
    const redisProxy = this.single
      ? await TcpProxy.start({ port: this.single.port }, {
          onClientData: (chunk, connection) => {
            onRedisData?.(index, chunk, connection);
            notify('redis-request', chunk, connection);
          },
          onDelivered: (chunk, connection) => notify('redis-reply', chunk, connection),
        })
      : undefined;
    if (!this.api) return { index, redisProxy, apiProxy: undefined, kubeconfig: undefined, incarnations: 0, current: undefined, watchers };
    const apiProxy = await TcpProxy.start({ port: Number(new URL(this.api.url).port) }, {
      onClientData: (chunk, connection) => {
        onApiData?.(index, chunk);
        notify('api-request', chunk, connection);
      },
      onDelivered: (chunk, connection) => notify('api-reply', chunk, connection),
    });
    const kubeconfig = join(this.configDir, `kubeconfig-${index}.json`);
    await writeFile(kubeconfig, JSON.stringify(kubeconfigFor(`http://127.0.0.1:${apiProxy.port}`)));
    return { index, redisProxy, apiProxy, kubeconfig, incarnations: 0, current: undefined, watchers };
  }

  private launch(slot: Slot): Incarnation {
    const { timings, lock } = this.options;
    const identity = `chaos-${slot.index}-${slot.incarnations++}`;
    const env: Record<string, string> = {
      LEASEBEAT_REDIS_URL: slot.redisProxy ? `redis://127.0.0.1:${slot.redisProxy.port}` : this.replicated!.url,
      LEASEBEAT_JOBS_DIR: this.options.jobsDir,
      LEASEBEAT_LOCK: lock,
      LEASEBEAT_LEASE_NAME: LEASE_NAME,
      LEASEBEAT_LEASE_NAMESPACE: LEASE_NAMESPACE,
      LEASEBEAT_LEASE_DURATION: `${timings.leaseDurationMs}ms`,
      LEASEBEAT_RENEW_DEADLINE: `${timings.renewDeadlineMs}ms`,
      LEASEBEAT_RETRY_PERIOD: `${timings.retryPeriodMs}ms`,
      LEASEBEAT_SHUTDOWN_TIMEOUT: '5s',
      CHAOS_RECORD_URL: this.records.url,
      ...(slot.kubeconfig ? { KUBECONFIG: slot.kubeconfig } : {}),
      ...this.options.env,
    };
    const incarnation: Incarnation = { identity, slot: slot.index, instance: startInstance(identity, env), startedAt: Date.now(), stopped: false };
    void incarnation.instance.exited().then((code) => {
      incarnation.exitedAt ??= Date.now();
      incarnation.exitCode = code;
      if (slot.current === incarnation) slot.current = undefined;
      // A supervisor's job (a Deployment's restartPolicy): a process that ended by itself, e.g. `start`
      // refusing to run while Redis does not answer, is started again, or the cluster would shrink.
      if (!incarnation.ended && !this.closing) {
        setTimeout(() => {
          if (!this.closing && slot.current === undefined) this.launch(slot);
        }, SUPERVISOR_RESTART_MS).unref();
      }
    });
    slot.current = incarnation;
    this.incarnations.push(incarnation);
    return incarnation;
  }

  private async exited(incarnation: Incarnation): Promise<void> {
    await incarnation.instance.exited();
    incarnation.exitedAt ??= Date.now();
    const slot = this.slots[incarnation.slot]!;
    if (slot.current === incarnation) slot.current = undefined;
  }
}

/** A kubeconfig for a plain-HTTP API server; client-node accepts http only with TLS verification off. */
function kubeconfigFor(server: string): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'fake', cluster: { server, 'insecure-skip-tls-verify': true } }],
    users: [{ name: 'fake', user: { token: 'fake-token' } }],
    contexts: [{ name: 'fake', context: { cluster: 'fake', user: 'fake', namespace: LEASE_NAMESPACE } }],
    'current-context': 'fake',
  };
}
