import type { Redis } from 'ioredis';
import type { LeaderElectionRecord, LockObservation, LockVersion } from '../election/record.js';
import type { LockFeedListener, ResourceLock } from '../election/resource-lock.js';
import type { KeySpace } from './keys.js';
import { isCluster, keySlot, type RedisClient, type RedisConnections } from './redis-topology.js';
import {
  TickLedger,
  type ClaimOutcome,
  type FencingToken,
  type SkippedRange,
  type SkipRangeOutcome,
  type TickClaim,
  type UnstageOutcome,
  type UnstageReason,
  type TickConfirmation,
} from './tick-ledger.js';

/**
 * Durability of the writes that decide safety, on replicated Redis (Sentinel, Cluster, managed services).
 *
 * Redis replication is asynchronous: a primary acknowledges a write before any replica has it, and a
 * failover promotes a replica that may lack it. For leasebeat that loses exactly the records that make
 * enqueues exactly-once: the lease a leader renewed, the fence it raised, the ticks it claimed. The new
 * primary then hands the same fencing token to another term, and its catch-up re-enqueues ticks that
 * already ran (celery-redbeat #163, and issue 13's runs on a frozen primary).
 *
 * The rule: after each such write, `WAIT minReplicas timeoutMs` on the connection that made it, and
 * treat a write that too few replicas acknowledged as a write that FAILED (`DurabilityError`), even
 * though it may stand on the primary:
 * - lock create/renew/takeover not confirmed → the elector counts the attempt as failed: it does not
 *   start leading, and a leader that cannot get a renewal confirmed within RenewDeadline stops leading;
 * - fence raise not confirmed → the producer does not produce; it retries the raise (with backoff);
 * - claim (or skip record) not confirmed → the tick is not added to BullMQ; the lane retries that tick
 *   before any later one (the re-claim of its own claim answers "claimed, add it" and waits again);
 * - confirm (the `enqueued` record, after the BullMQ add) not confirmed → retried; BullMQ's deterministic
 *   job id makes the repeated add a no-op.
 * A primary frozen past the sentinels' down-after and resumed has lost its replicas (they follow the
 * promoted replica), so every WAIT there answers 0: a leader stuck on it can neither renew nor claim,
 * and nothing it wrote there can have been turned into a run. That closes the hole of issue 13.
 *
 * What WAIT does not give (Redis documents it): a write acknowledged by `n` replicas can still be lost if
 * the failover promotes a replica that was not among them. Sentinel promotes the replica with the largest
 * replication offset among those of equal `replica-priority`, so with equal priorities one acknowledging
 * replica suffices; `minReplicas` = number of replicas removes that condition, at the price of stopping
 * production whenever one replica is down.
 */

/** A write that too few replicas acknowledged in time: to be treated as failed. */
export class DurabilityError extends Error {
  override readonly name = 'DurabilityError';
  constructor(
    readonly what: string,
    readonly acknowledged: number,
    readonly required: number,
  ) {
    super(`${what}: acknowledged by ${acknowledged} of ${required} required replicas in time; treated as not written`);
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
   * Asked after a successful WAIT: is the connection still on the primary the topology agrees on (on
   * Sentinel, a majority of the sentinels)? A write confirmed only by a replica of a deposed primary
   * is not confirmed. See `RedisConnections.sentinelPrimaryCheck`.
   */
  primaryCheck?: { isPrimary(connection: Redis): Promise<boolean> };
}

export const DEFAULT_WAIT_TIMEOUT_MS = 500;

/**
 * Runs `WAIT` after writes, on the connection (the Cluster node) that made them. WAIT covers every write
 * sent before it on the connection, so confirmations share WAITs: at most one is in flight per connection,
 * and the confirmations asked meanwhile are answered by the next one. A burst of claims (a catch-up,
 * several jobs due at one tick) costs a round trip or two, not one each.
 */
export class ReplicaWait {
  readonly minReplicas: number;
  readonly timeoutMs: number;
  private readonly primaryCheck: DurabilitySettings['primaryCheck'];
  /** Per connection: the batch still collecting confirmations (its WAIT not sent yet). */
  private readonly batches = new Map<Redis, Promise<{ acknowledged: number; primary: boolean }>>();
  /** Per connection: the last batch sent, settled or not; the next one is sent after it. */
  private readonly sent = new Map<Redis, Promise<unknown>>();
  /** Counts for the bench and metrics. */
  readonly stats = { waits: 0, confirmed: 0, unconfirmed: 0 };

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

  /** The same confirmation (replicas, timeout, primary check) for writes made on another connection. */
  on(client: RedisClient): ReplicaWait {
    return new ReplicaWait(client, { minReplicas: this.minReplicas, timeoutMs: this.timeoutMs, ...(this.primaryCheck ? { primaryCheck: this.primaryCheck } : {}) });
  }

  /**
   * Resolves once `minReplicas` replicas hold every write made so far on the connection that serves `key`;
   * throws `DurabilityError` when they do not answer within the timeout.
   */
  async confirm(key: string, what: string): Promise<void> {
    if (!this.enabled) return;
    const connection = this.connectionFor(key);
    let batch = this.batches.get(connection);
    if (!batch) {
      // Sent once the previous WAIT on this connection has answered, and on a later turn, so that the
      // confirmations of writes completing meanwhile join it: at most one WAIT in flight per connection.
      const previous = this.sent.get(connection) ?? Promise.resolve();
      batch = previous.then(() => new Promise<void>((resolve) => setImmediate(resolve))).then(async () => {
        this.batches.delete(connection);
        this.stats.waits++;
        const acknowledged = await connection.wait(this.minReplicas, this.timeoutMs);
        // After the WAIT, not beside it: the primary must still be the agreed one once the replicas have
        // the writes, or the replica that acknowledged may be about to resync from a promoted one.
        const primary = acknowledged < this.minReplicas || !this.primaryCheck ? true : await this.primaryCheck.isPrimary(connection);
        return { acknowledged, primary };
      });
      this.batches.set(connection, batch);
      const settled = batch.catch(() => undefined);
      this.sent.set(connection, settled);
      void settled.then(() => {
        if (this.sent.get(connection) === settled) this.sent.delete(connection);
      });
    }
    const { acknowledged, primary } = await batch;
    if (acknowledged < this.minReplicas || !primary) {
      this.stats.unconfirmed++;
      throw new DurabilityError(primary ? what : `${what} (on a node the sentinels no longer agree is the primary)`, acknowledged, this.minReplicas);
    }
    this.stats.confirmed++;
  }

  /** The connection that wrote `key`: the client itself, or on Cluster the node serving its slot. */
  private connectionFor(key: string): Redis {
    if (!isCluster(this.client)) return this.client;
    const cluster = this.client;
    const nodeKey = cluster.slots[keySlot(key)]?.[0];
    const node = nodeKey === undefined ? undefined : cluster.nodes('master').find((n) => `${n.options.host}:${n.options.port}` === nodeKey);
    // No slot map yet (connecting, or refreshing after a failover): WAIT cannot be placed, so the write
    // counts as unconfirmed and the caller retries.
    if (!node) throw new DurabilityError(`WAIT for ${key}: no node known for slot ${keySlot(key)}`, 0, this.minReplicas);
    return node;
  }
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
 * The tick ledger with every deciding write confirmed by `ReplicaWait` before it counts (see the rules at
 * the top of this file). Reads are unchanged.
 */
export class DurableTickLedger extends TickLedger {
  constructor(
    redis: Redis,
    keys: KeySpace,
    private readonly replicas: ReplicaWait,
  ) {
    super(redis, keys);
  }

  override async raiseFence(token: FencingToken, holder: string, now: number): Promise<{ ok: true } | { ok: false; fence: FencingToken }> {
    const result = await super.raiseFence(token, holder, now);
    // A refusal decides nothing new; only a raise must outlive a failover before the term produces.
    if (result.ok) await this.replicas.confirm(this.keys.fence, `fence raise to ${token.generation}/${token.leaderTransitions}`);
    return result;
  }

  override async claimTicks(token: FencingToken, claims: TickClaim[]): Promise<ClaimOutcome[]> {
    const outcomes = await super.claimTicks(token, claims);
    // One WAIT covers the whole batch (one script on one connection). Even `settled` is confirmed: it may
    // be the answer to our own claim whose WAIT failed before, and the lane moves past the tick on it.
    const decided = outcomes.some((outcome) => outcome.kind !== 'fenced' && outcome.kind !== 'hole');
    if (decided) await this.replicas.confirm(this.keys.ledger(claims[0]!.job), `claims of ${describeTicks(claims)}`);
    return outcomes;
  }

  override async confirmTicks(confirmations: TickConfirmation[], now: number): Promise<void> {
    await super.confirmTicks(confirmations, now);
    if (confirmations.length > 0) await this.replicas.confirm(this.keys.ledger(confirmations[0]!.job), `enqueued records of ${describeTicks(confirmations)}`);
  }

  override async markUnstaging(token: FencingToken, job: string, tick: number, jobId: string, reason: UnstageReason, queue: string): Promise<'marked' | 'settled' | 'fenced'> {
    const outcome = await super.markUnstaging(token, job, tick, jobId, reason, queue);
    // The mark is what tells the next leader to finish the take-back: it must be on a replica before
    // the run is pulled from BullMQ's delayed set.
    if (outcome === 'marked') await this.replicas.confirm(this.keys.ledger(job), `take-back of ${job}@${tick}`);
    return outcome;
  }

  override async settleUnstaging(job: string, tick: number, outcome: UnstageOutcome): Promise<boolean> {
    const moved = await super.settleUnstaging(job, tick, outcome);
    if (moved) await this.replicas.confirm(this.keys.ledger(job), `take-back of ${job}@${tick} (${outcome})`);
    return moved;
  }

  override async skipRange(token: FencingToken, job: string, range: SkippedRange): Promise<SkipRangeOutcome> {
    const outcome = await super.skipRange(token, job, range);
    if (outcome === 'recorded') await this.replicas.confirm(this.keys.skips(job), `skip record of ${job} ${range.from}..${range.to}`);
    return outcome;
  }
}

/** The ticks a message names: the one tick, or how many. */
function describeTicks(ticks: ReadonlyArray<{ job: string; tick: number }>): string {
  return ticks.length === 1 ? `${ticks[0]!.job}@${ticks[0]!.tick}` : `${ticks.length} ticks`;
}

/**
 * A Redis lease lock whose writes (create, renew, takeover, release) count only once `ReplicaWait`
 * confirms them: an unconfirmed write throws `DurabilityError`, which the elector treats as a failed
 * attempt. So a term exists only if its record would survive a failover, and a leader cut off with a
 * stale primary cannot renew. `key` is the lease's key (for the slot on Cluster).
 */
export class DurableLock implements ResourceLock {
  readonly watch?: (signal: AbortSignal, listener: LockFeedListener) => void;

  constructor(
    private readonly inner: ResourceLock,
    private readonly key: string,
    private readonly replicas: ReplicaWait,
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

  async create(record: LeaderElectionRecord, signal: AbortSignal): Promise<LockVersion> {
    const version = await this.inner.create(record, signal);
    await this.replicas.confirm(this.key, `lease create for ${record.holderIdentity}`);
    return version;
  }

  async update(record: LeaderElectionRecord, base: LockVersion, signal: AbortSignal): Promise<LockVersion> {
    const version = await this.inner.update(record, base, signal);
    await this.replicas.confirm(this.key, `lease write for ${record.holderIdentity || '(release)'} (transitions ${record.leaderTransitions})`);
    return version;
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
