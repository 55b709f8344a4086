import type { Cluster, Redis } from 'ioredis';
import type { LeaderElectionRecord, LockObservation, LockVersion } from '../election/record.js';
import type { LockFeedListener, ResourceLock } from '../election/resource-lock.js';
import { serverRunIdScript, type LuaScript } from '../util/lua.js';
import { hashTag, isCluster, keySlot, type RedisClient, type RedisConnections } from './redis-topology.js';

/**
 * Durability of the writes that decide safety, on replicated Redis (Sentinel, Cluster, managed services).
 *
 * Redis replication is asynchronous: a primary acknowledges a write before any replica has it, and a
 * failover promotes a replica that may lack it. For leasebeat that loses exactly the records that make
 * enqueues and runs exactly-once: the lease a leader renewed, the fence it raised, the ticks it claimed,
 * the runs a worker took and finished. The new primary then hands the same fencing token to another
 * term, re-enqueues ticks that already ran, or re-runs a finished run (celery-redbeat #163; issue 13's
 * frozen primary; issue 18's Cluster failover).
 *
 * The rule: after each such write, `WAIT minReplicas timeoutMs`, and treat a write that too few replicas
 * acknowledged as a write that FAILED (`DurabilityError`), even though it may stand on the primary:
 * - lock create/renew/takeover not confirmed → the elector counts the attempt as failed;
 * - fence raise not confirmed → the producer does not produce; it retries the raise;
 * - claim (or skip record, take-back mark, takeover record) not confirmed → the tick is not added to
 *   BullMQ; the lane retries that tick before any later one;
 * - BullMQ add not confirmed on its own server (on Cluster another shard than the ledger's) → the ledger
 *   is not told `enqueued`; the add is retried (the deterministic job id makes it a no-op);
 * - a worker's take of a run not confirmed → the run does not start; its finish not confirmed → the
 *   worker keeps the run (and its lock) and records the finish again until it is (worker-pool.ts).
 *
 * A WAIT counts only if it ran on the server that executed the write, over the same connection:
 * - `WAIT` covers the writes *its connection* made (Redis keeps the offset of each client's last write).
 *   A connection that reconnected (a Sentinel switch, a network blip, ioredis resending the WAIT) is a
 *   new client with no writes: its WAIT answers "all replicas" at once. So the socket the write went out
 *   on must still be the one the WAIT's reply came back on.
 * - A proxy can move a connection to another server without closing it. So every deciding script
 *   returns, in the same atomic step, the run id of the server that ran it (`LuaScript.runStamped`), and
 *   the WAIT is followed on its connection by a read of the run id there: they must be equal. For writes
 *   leasebeat does not script (BullMQ's, the lock's), the run id is read just before the write.
 * - A script that decides without writing (a re-claim answered "settled") must still be covered: the
 *   stamped wrapper always increments a counter in the slot, so the WAIT covers all the script read.
 * A primary frozen past the sentinels' down-after and resumed has lost its replicas (they follow the
 * promoted replica), so every WAIT there answers 0: a leader stuck on it can neither renew nor claim.
 *
 * What WAIT does not give (Redis documents it): a write acknowledged by `n` replicas can still be lost if
 * the failover promotes a replica that was not among them. Sentinel promotes the replica with the largest
 * replication offset among those of equal `replica-priority`, so with equal priorities one acknowledging
 * replica suffices; `minReplicas` = number of replicas removes that condition, at the price of stopping
 * production whenever one replica is down. Nor does it see a proxy that moves a connection to another
 * server and back between a write and its WAIT.
 */

/** A write that too few replicas acknowledged in time, or whose WAIT asked another server: to be treated as failed. */
export class DurabilityError extends Error {
  override readonly name = 'DurabilityError';
  /** Why the write does not count: `reason`, or the replicas' count. */
  readonly why: string;
  constructor(
    readonly what: string,
    readonly acknowledged: number,
    readonly required: number,
    /** Why it does not count, when the replicas' count is not the reason. */
    readonly reason?: string,
  ) {
    const why = reason ?? `acknowledged by ${acknowledged} of ${required} required replicas in time`;
    super(`${what}: ${why}; treated as not written`);
    this.why = why;
  }
}

export interface DurabilitySettings {
  /** Replicas that must acknowledge a deciding write. 0 turns WAIT off (one server). */
  minReplicas: number;
  /**
   * How long one WAIT may block. It delays the claim it follows, so it must stay well under a tick's
   * tolerance; and a renewal's WAIT counts in RenewDeadline. Default 500 ms.
   */
  timeoutMs?: number;
  /**
   * Asked after a successful WAIT: is the server that ran the write (by run id) still the primary the
   * topology agrees on (on Sentinel, a majority of the sentinels)? A write confirmed only by a replica of
   * a deposed primary is not confirmed. See `RedisConnections.sentinelPrimaryCheck`.
   */
  primaryCheck?: { isPrimary(connection: Redis, runId: string): Promise<boolean> };
}

export const DEFAULT_WAIT_TIMEOUT_MS = 500;

/**
 * How a module makes its deciding writes: straight to Redis on one server, or confirmed on replicas
 * ({@link ReplicaWait}). `decides` tells, from the reply, whether the write decided something that must
 * outlive a failover (and names it for errors), or nothing (a refusal, a fenced attempt).
 */
export interface WritePath {
  /** Whether writes are confirmed on replicas (a replicated topology), or made and left at that. */
  readonly replicated: boolean;
  /** Runs one of leasebeat's scripts. */
  script<T>(script: LuaScript, keys: string[], args: Array<string | number>, decides?: (reply: T) => string | undefined): Promise<T>;
  /** Makes a write leasebeat does not script itself (a BullMQ add, a lock write) to the server of `key`. */
  write<T>(key: string, write: () => Promise<T>, decides: (result: T) => string | undefined): Promise<T>;
}

/** Writes that no replica is waited for: made, and that is all. */
export const UNCONFIRMED_WRITES: Pick<WritePath, 'write'> = { write: (_key, write) => write() };

/** Writes with no replica to wait for (one server, or durability turned off). */
export function directWrites(redis: Redis): WritePath {
  return { replicated: false, script: (script, keys, args) => script.run(redis, keys, args), ...UNCONFIRMED_WRITES };
}

/** Where a write went: the WAIT that confirms it must reach the same server over the same socket. */
interface WriteStamp {
  /** The connection the write was sent on (on Cluster, the node's). */
  connection: Redis;
  /** Its socket when the write was sent. */
  socket: unknown;
  /** The run id of the server that executed the write. */
  runId: string;
}

/** One WAIT and what it tells, shared by the confirmations that joined it. */
interface WaitResult {
  acknowledged: number;
  /** The run id read right after the WAIT, on its connection. */
  runId: string | undefined;
  /** The socket the replies came back on. */
  socket: unknown;
  primary: boolean;
  /** Set when the WAIT itself failed (a demoted primary refuses it, a closed connection). */
  error?: string;
}

/**
 * Confirms writes on replicas. WAIT covers every write sent before it on the connection, so confirmations
 * share WAITs: at most one is in flight per connection, and the confirmations asked meanwhile are answered
 * by the next one. A burst of claims (a catch-up, several jobs due at one tick) costs a round trip or two,
 * not one each.
 */
export class ReplicaWait implements WritePath {
  readonly minReplicas: number;
  readonly timeoutMs: number;
  private readonly primaryCheck: DurabilitySettings['primaryCheck'];
  /** Per connection: the batch still collecting confirmations (its WAIT not sent yet). */
  private readonly batches = new Map<Redis, Promise<WaitResult>>();
  /** Per connection: the last batch sent, settled or not; the next one is sent after it. */
  private readonly sent = new Map<Redis, Promise<unknown>>();
  /** Counts for the bench and metrics. */
  readonly stats = { waits: 0, confirmed: 0, unconfirmed: 0 };
  /**
   * Per connection: the run id its current socket last answered with (a stamped script, a WAIT's read).
   * A write leasebeat does not script is placed by it, instead of a read before each write: the WAIT's
   * own read after the write must still find it, so no switch came in between.
   */
  private readonly seen = new WeakMap<Redis, { socket: unknown; runId: string }>();

  constructor(
    private readonly client: RedisClient,
    settings: DurabilitySettings,
  ) {
    if (!Number.isInteger(settings.minReplicas) || settings.minReplicas < 0) throw new RangeError(`minReplicas must be a whole number ≥ 0, got ${settings.minReplicas}`);
    this.minReplicas = settings.minReplicas;
    this.timeoutMs = settings.timeoutMs ?? DEFAULT_WAIT_TIMEOUT_MS;
    this.primaryCheck = settings.primaryCheck;
    if (!(this.timeoutMs > 0)) throw new RangeError(`the WAIT timeout must be > 0 ms, got ${this.timeoutMs}`);
  }

  get enabled(): boolean {
    return this.minReplicas > 0;
  }

  get replicated(): boolean {
    return this.enabled;
  }

  /** The same confirmation (replicas, timeout, primary check) for writes made on another connection. */
  on(client: RedisClient): ReplicaWait {
    return new ReplicaWait(client, { minReplicas: this.minReplicas, timeoutMs: this.timeoutMs, ...(this.primaryCheck ? { primaryCheck: this.primaryCheck } : {}) });
  }

  /**
   * Runs `script` stamped with its server's run id and, when `decides` names what it decided, resolves
   * only once `minReplicas` replicas of that server hold it; throws `DurabilityError` otherwise.
   */
  async script<T>(script: LuaScript, keys: string[], args: Array<string | number>, decides?: (reply: T) => string | undefined): Promise<T> {
    if (!this.enabled || !decides) return script.run<T>(this.client as Redis, keys, args);
    const key = keys[0]!;
    const connection = await this.connectedFor(key);
    const socket = connection.stream;
    const { reply, runId } = await script.runStamped<T>(this.client as Redis, keys, args, syncKeyOf(key));
    if (connection.stream === socket) this.seen.set(connection, { socket, runId });
    const what = decides(reply);
    if (what !== undefined) await this.confirm({ connection, socket, runId }, what);
    return reply;
  }

  /**
   * Makes a write leasebeat does not script and confirms it like {@link script}: the run id of the server
   * of `key` is known before the write goes out on its connection (read first, unless the socket answered
   * with it already).
   */
  async write<T>(key: string, write: () => Promise<T>, decides: (result: T) => string | undefined): Promise<T> {
    if (!this.enabled) return write();
    const connection = await this.connectedFor(key);
    const socket = connection.stream;
    const known = this.seen.get(connection);
    const runId = known !== undefined && known.socket === socket ? known.runId : await serverRunIdScript.run<string>(connection, [], []);
    const result = await write();
    const what = decides(result);
    if (what !== undefined) await this.confirm({ connection, socket, runId }, what);
    return result;
  }

  /** Resolves once the write `stamp` describes is on enough replicas of its server; else throws `DurabilityError`. */
  private async confirm(stamp: WriteStamp, what: string): Promise<void> {
    const result = await this.nextWait(stamp.connection);
    const reason = result.error ?? this.refusal(stamp, result);
    if (reason !== undefined || result.acknowledged < this.minReplicas) {
      this.stats.unconfirmed++;
      throw new DurabilityError(what, result.acknowledged, this.minReplicas, reason);
    }
    this.stats.confirmed++;
  }

  /** Why a WAIT that enough replicas answered still does not confirm this write, if it does not. */
  private refusal(stamp: WriteStamp, result: WaitResult): string | undefined {
    if (result.socket !== stamp.socket) return 'the connection was re-established between the write and its WAIT (the write may be only on the server it left)';
    if (result.runId !== stamp.runId) return `the WAIT ran on another server (run id ${result.runId ?? 'unknown'}) than the write (${stamp.runId})`;
    if (!result.primary) return 'the server that took it is no longer the primary the sentinels agree on';
    return undefined;
  }

  /** The WAIT that will answer a confirmation asked now on `connection`: the one collecting, or a new one. */
  private nextWait(connection: Redis): Promise<WaitResult> {
    let batch = this.batches.get(connection);
    if (batch) return batch;
    // Sent once the previous WAIT on this connection has answered, and on a later turn, so that the
    // confirmations of writes completing meanwhile join it: at most one WAIT in flight per connection.
    const previous = this.sent.get(connection) ?? Promise.resolve();
    batch = previous.then(() => new Promise<void>((resolve) => setImmediate(resolve))).then(() => {
      this.batches.delete(connection);
      return this.waitOn(connection);
    });
    this.batches.set(connection, batch);
    const settled = batch.catch(() => undefined);
    this.sent.set(connection, settled);
    void settled.then(() => {
      if (this.sent.get(connection) === settled) this.sent.delete(connection);
    });
    return batch;
  }

  /** One WAIT, followed on the same connection by a read of the server's run id. */
  private async waitOn(connection: Redis): Promise<WaitResult> {
    this.stats.waits++;
    let replies: Array<[Error | null, unknown]> | null;
    try {
      replies = await connection.pipeline().wait(this.minReplicas, this.timeoutMs).eval(serverRunIdScript.source, 0).exec();
    } catch (error) {
      return { acknowledged: 0, runId: undefined, socket: undefined, primary: false, error: `WAIT failed: ${String(error)}` };
    }
    const socket = connection.stream;
    const [[waitError, acknowledged] = [null, 0], [runIdError, runId] = [null, undefined]] = replies ?? [];
    if (waitError || runIdError) return { acknowledged: 0, runId: undefined, socket, primary: false, error: `WAIT failed: ${String(waitError ?? runIdError)}` };
    const ran = typeof runId === 'string' ? runId : undefined;
    if (ran !== undefined) this.seen.set(connection, { socket, runId: ran });
    const enough = Number(acknowledged) >= this.minReplicas;
    // After the WAIT, not beside it: the primary must still be the agreed one once the replicas have the
    // writes, or the replica that acknowledged may be about to resync from a promoted one.
    const primary = !enough || !this.primaryCheck || ran === undefined ? true : await this.primaryCheck.isPrimary(connection, ran);
    return { acknowledged: Number(acknowledged), runId: ran, socket, primary };
  }

  /**
   * {@link connectionFor}, connected: a write sent before its connection is up (a Cluster opens a node's
   * connection on its first command; a client may still be connecting) would go out on a socket that was
   * not there when the write was stamped, and count as re-established.
   */
  private async connectedFor(key: string): Promise<Redis> {
    // A lazy Cluster client (the admin's) has no slot map before its first command: connect it first.
    if (isCluster(this.client) && this.client.status === 'wait') await this.client.connect();
    // After a failover the slot map may name no live node for the key. A write that is never sent would
    // never correct it: a read of the key's slot makes the client follow the cluster and refresh its map.
    if (isCluster(this.client) && !this.nodeOf(this.client, key)) await this.client.exists(key).catch(() => undefined);
    const connection = this.connectionFor(key);
    if (connection.status === 'wait') await connection.connect();
    else if (connection.status !== 'ready') await connection.ping();
    return connection;
  }

  /** The primary the Cluster client's slot map names for `key`, if it knows one. */
  private nodeOf(cluster: Cluster, key: string): Redis | undefined {
    const nodeKey = cluster.slots[keySlot(key)]?.[0];
    return nodeKey === undefined ? undefined : cluster.nodes('master').find((n) => `${n.options.host}:${n.options.port}` === nodeKey);
  }

  /** The connection that serves `key`: the client itself, or on Cluster the node serving its slot. */
  private connectionFor(key: string): Redis {
    if (!isCluster(this.client)) return this.client;
    const node = this.nodeOf(this.client, key);
    // No slot map yet (connecting, or refreshing after a failover): WAIT cannot be placed, so the write
    // is not sent and the caller retries.
    if (!node) throw new DurabilityError(`WAIT for ${key}: no node known for slot ${keySlot(key)}`, 0, this.minReplicas, 'no node is known for its slot yet');
    return node;
  }
}

/**
 * The counter a stamped script increments, in the slot of `key`: beside the key's hash tag (so on Cluster
 * it is on the same node), or under the key's first segment (its prefix) on one server.
 */
export function syncKeyOf(key: string): string {
  const tag = hashTag(key);
  if (tag !== undefined) return `${key.slice(0, key.indexOf('{') + tag.length + 2)}:leasebeat-sync`;
  const colon = key.indexOf(':');
  return `${colon > 0 ? key.slice(0, colon) : key}:leasebeat-sync`;
}

/**
 * The `ReplicaWait` a topology calls for, for writes made on `client` (the control connection): the
 * topology's `minReplicas` (URL `minReplicas=`, else 1 on Sentinel and Cluster, 0 on one server) and on
 * Sentinel the check that the node is the primary the sentinels agree on. `close()` ends the sentinel
 * connections of that check.
 */
export function replicaWaitFor(
  connections: RedisConnections,
  client: RedisClient,
  overrides: Partial<Omit<DurabilitySettings, 'primaryCheck'>> = {},
): { wait: ReplicaWait; close(): void } {
  const minReplicas = overrides.minReplicas ?? connections.defaultMinReplicas();
  const timeoutMs = overrides.timeoutMs ?? connections.topology.waitTimeoutMs;
  const check = minReplicas > 0 ? connections.sentinelPrimaryCheck() : undefined;
  const wait = new ReplicaWait(client, { minReplicas, ...(timeoutMs ? { timeoutMs } : {}), ...(check ? { primaryCheck: check } : {}) });
  return { wait, close: () => check?.close() };
}

/**
 * A lease lock whose writes (create, renew, takeover, release) count only once `replicas` confirm them:
 * an unconfirmed write throws `DurabilityError`, which the elector treats as a failed attempt. So a term
 * exists only if its record would survive a failover, and a leader cut off with a stale primary cannot
 * renew. `key` is the lease's key (for the slot on Cluster).
 */
export class DurableLock implements ResourceLock {
  readonly watch?: (signal: AbortSignal, listener: LockFeedListener) => void;

  constructor(
    private readonly inner: ResourceLock,
    private readonly key: string,
    private readonly replicas: WritePath,
  ) {
    const watch = inner.watch?.bind(inner);
    if (watch) {
      // Our own writes are published on the feed too. After an unconfirmed write the elector must not
      // take that change as news and try again at once (it would take the lease over from itself, each
      // time with a new term: a hot loop of transitions while the replicas are away); only we write our
      // identity, so a change naming us is never news to a candidate.
      this.watch = (signal, listener) =>
        watch(signal, {
          live: (live) => listener.live(live),
          change: (observation) => {
            if (observation.record.holderIdentity !== inner.identity()) listener.change(observation);
          },
        });
    }
  }

  get(signal: AbortSignal): Promise<LockObservation> {
    return this.inner.get(signal);
  }

  create(record: LeaderElectionRecord, signal: AbortSignal): Promise<LockVersion> {
    return this.replicas.write(this.key, () => this.inner.create(record, signal), () => `lease create for ${record.holderIdentity}`);
  }

  update(record: LeaderElectionRecord, base: LockVersion, signal: AbortSignal): Promise<LockVersion> {
    return this.replicas.write(
      this.key,
      () => this.inner.update(record, base, signal),
      () => `lease write for ${record.holderIdentity || '(release)'} (transitions ${record.leaderTransitions})`,
    );
  }

  recordEvent(message: string): void {
    this.inner.recordEvent(message);
  }

  identity(): string {
    return this.inner.identity();
  }

  describe(): string {
    return this.inner.describe();
  }
}

/** The ticks a message names: the one tick, or how many. */
export function describeTicks(ticks: ReadonlyArray<{ job: string; tick: number }>): string {
  return ticks.length === 1 ? `${ticks[0]!.job}@${ticks[0]!.tick}` : `${ticks.length} ticks`;
}
