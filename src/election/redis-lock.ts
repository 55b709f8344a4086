import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { ownConnection } from '../util/stay-connected.js';
import { raceAbort } from '../util/abort.js';
import { silentLogger } from '../util/logger.js';
import { LuaScript } from '../util/lua.js';
import { defaultIdentity } from './identity.js';
import { serializeRecord, type LeaderElectionRecord, type LockObservation, type LockVersion } from './record.js';
import { LockConflictError, LockNotFoundError, type LockFeedListener, type ResourceLock } from './resource-lock.js';

const readLease = new LuaScript(new URL('./lua/readLease.lua', import.meta.url));
const createLease = new LuaScript(new URL('./lua/createLease.lua', import.meta.url));
const updateLease = new LuaScript(new URL('./lua/updateLease.lua', import.meta.url));

/** How many writes the lease's history stream keeps (approximately: XADD MAXLEN ~). */
export const LEASE_HISTORY_LENGTH = 10_000;

/** Options of a `RedisLeaseLock`. */
export interface RedisLeaseLockOptions {
  /** The application's ioredis client; the lock does not close it. */
  connection: Redis;
  /** Name of the lease, shared by all candidates. */
  name: string;
  identity?: string;
  /** Key prefix. Default `leasebeat`. */
  prefix?: string;
  /**
   * On replicated Redis: refuse to continue a record written before the last change of primary (its
   * replication id); such a record is taken over like a damaged one, under a new generation. See
   * updateLease.lua. Default false (one server, whose restarts would otherwise each cost a lease duration).
   */
  replicationEpochs?: boolean;
}

/** A version of the Redis record: its counter, or the fingerprint of a record that could not be decoded. */
class RedisLeaseVersion implements LockVersion {
  constructor(
    readonly generation: string,
    /** The `version` field, or `damaged:<sha1 of the stored fields>`. */
    readonly token: string,
  ) {}
}

/** One write of the lease, as its history stream recorded it. */
export interface LeaseHistoryEntry {
  /** Redis time of the write, in ms (from the stream id). */
  at: number;
  op: 'create' | 'update';
  record: LeaderElectionRecord;
  generation: string;
  version: number;
}

const REQUIRED_FIELDS = ['holderIdentity', 'leaseDurationSeconds', 'acquireTime', 'renewTime', 'leaderTransitions', 'generation', 'version'] as const;

/**
 * The Kubernetes Lease record kept in a Redis hash, for deployments without a cluster. Compare-and-swap
 * runs in one Lua script on a version field. Every creation draws a new generation id, so a deleted and
 * recreated record (whose transitions restart at 0) can never repeat an earlier fencing token.
 *
 * Every successful write is appended, by the same script, to a capped stream beside the record: the
 * lock's own write history, for audits and the status page's timeline of terms.
 *
 * The keys are `<prefix>:{<name>}:lease` and `…:lease:history`; the hash tag keeps them in one slot on
 * Redis Cluster.
 */
export class RedisLeaseLock implements ResourceLock {
  readonly key: string;
  readonly historyKey: string;
  /** Pub/sub channel on which every write publishes the new record (the change feed). */
  readonly channel: string;
  private readonly redis: Redis;
  private readonly name: string;
  private readonly holder: string;
  private readonly replicationEpochs: boolean;

  constructor(options: RedisLeaseLockOptions) {
    this.redis = options.connection;
    this.replicationEpochs = options.replicationEpochs ?? false;
    this.name = options.name;
    this.holder = options.identity ?? defaultIdentity();
    this.key = `${options.prefix ?? 'leasebeat'}:{${options.name}}:lease`;
    this.historyKey = `${this.key}:history`;
    this.channel = `${this.key}:changes`;
  }

  async get(signal: AbortSignal): Promise<LockObservation> {
    const reply = await raceAbort(readLease.run<string[]>(this.redis, [this.key], []), signal);
    if (reply.length === 0) throw new LockNotFoundError(`lease ${this.describe()} not found`);
    const [fingerprint, epoch, ...flat] = reply;
    const fields = new Map<string, string>();
    for (let i = 0; i + 1 < flat.length; i += 2) fields.set(flat[i]!, flat[i + 1]!);
    const record: LeaderElectionRecord = {
      holderIdentity: fields.get('holderIdentity') ?? '',
      leaseDurationSeconds: Number(fields.get('leaseDurationSeconds')),
      acquireTime: Number(fields.get('acquireTime')),
      renewTime: Number(fields.get('renewTime')),
      leaderTransitions: Number(fields.get('leaderTransitions')),
    };
    const damaged = damage(fields) ?? (this.replicationEpochs && fields.get('epoch') !== epoch ? `written before the last change of Redis primary (replication id ${epoch})` : undefined);
    if (damaged) {
      // Compared by content: the elector sees the record "change" only when someone rewrites it.
      return { record, raw: `damaged:${fingerprint}`, version: new RedisLeaseVersion('', `damaged:${fingerprint}`), damaged };
    }
    return { record, raw: serializeRecord(record), version: new RedisLeaseVersion(fields.get('generation')!, fields.get('version')!) };
  }

  async create(record: LeaderElectionRecord, signal: AbortSignal): Promise<LockVersion> {
    const generation = randomUUID();
    const result = await raceAbort(
      createLease.run<number>(this.redis, [this.key, this.historyKey], [...recordArgs(record), generation, LEASE_HISTORY_LENGTH, this.channel]),
      signal,
    );
    if (result === -1) throw new LockConflictError(`lease ${this.describe()} already exists`);
    return new RedisLeaseVersion(generation, String(result));
  }

  async update(record: LeaderElectionRecord, base: LockVersion, signal: AbortSignal): Promise<LockVersion> {
    if (!(base instanceof RedisLeaseVersion)) throw new TypeError(`lease ${this.describe()}: update based on a version this lock did not return`);
    const generation = base.token.startsWith('damaged:') ? randomUUID() : base.generation;
    const result = await raceAbort(
      updateLease.run<number>(
        this.redis,
        [this.key, this.historyKey],
        [base.token, base.generation, ...recordArgs(record), generation, LEASE_HISTORY_LENGTH, this.channel, this.replicationEpochs ? '1' : '0'],
      ),
      signal,
    );
    if (result === -2) throw new LockNotFoundError(`lease ${this.describe()} not found`);
    if (result === -1) throw new LockConflictError(`lease ${this.describe()} was modified concurrently`);
    return new RedisLeaseVersion(generation, String(result));
  }

  /**
   * The change feed: a subscriber connection of its own on the lease's channel. Pub/sub delivers at most
   * once, so whenever the subscriber (re)connects the feed reports itself down, reads the record afresh
   * and only then reports itself live again.
   */
  watch(signal: AbortSignal, listener: LockFeedListener): void {
    if (signal.aborted) return;
    // Connection errors surface as `close` and a reconnect; the feed just reports itself down meanwhile
    // (to the elector, which says so: the revival itself is not logged again).
    const subscriber = ownConnection(this.redis, { maxRetriesPerRequest: null }, () => signal.aborted, silentLogger);
    subscriber.on('close', () => listener.live(false));
    subscriber.on('message', (channel: string, message: string) => {
      if (channel !== this.channel) return;
      const observation = this.fromChange(message);
      if (observation) listener.change(observation);
    });
    const catchUp = async (): Promise<void> => {
      try {
        await subscriber.subscribe(this.channel);
        listener.change(await this.get(AbortSignal.timeout(5_000)));
        listener.live(true);
      } catch (error) {
        // No record yet is a fine start: the first write will be published.
        if (error instanceof LockNotFoundError) listener.live(true);
      }
    };
    subscriber.on('ready', () => void catchUp());
    subscriber.connect().catch(() => undefined);
    signal.addEventListener('abort', () => subscriber.disconnect(), { once: true });
  }

  /** The lease's write history, oldest first (at most the last `count` writes). */
  async history(count = LEASE_HISTORY_LENGTH): Promise<LeaseHistoryEntry[]> {
    const entries = await this.redis.xrevrange(this.historyKey, '+', '-', 'COUNT', count);
    return entries.reverse().map(([id, flat]) => {
      const fields = new Map<string, string>();
      for (let i = 0; i + 1 < flat.length; i += 2) fields.set(flat[i]!, flat[i + 1]!);
      return {
        at: Number(id.split('-')[0]),
        op: fields.get('op') === 'create' ? 'create' : 'update',
        record: {
          holderIdentity: fields.get('holder') ?? '',
          leaseDurationSeconds: Number(fields.get('duration')),
          acquireTime: Number(fields.get('acquire')),
          renewTime: Number(fields.get('renew')),
          leaderTransitions: Number(fields.get('transitions')),
        },
        generation: fields.get('generation') ?? '',
        version: Number(fields.get('version')),
      };
    });
  }

  private fromChange(message: string): LockObservation | undefined {
    let change: PublishedChange;
    try {
      change = JSON.parse(message) as PublishedChange;
    } catch {
      return undefined;
    }
    const record: LeaderElectionRecord = {
      holderIdentity: change.holder,
      leaseDurationSeconds: Number(change.duration),
      acquireTime: Number(change.acquire),
      renewTime: Number(change.renew),
      leaderTransitions: Number(change.transitions),
    };
    return { record, raw: serializeRecord(record), version: new RedisLeaseVersion(change.generation, change.version) };
  }

  /** Redis keeps no event history; leadership changes are visible in the logs and the history stream. */
  recordEvent(): void {}

  identity(): string {
    return this.holder;
  }

  describe(): string {
    return `redis/${this.name}`;
  }
}

/** A published change: the record as written, with its version. */
interface PublishedChange {
  holder: string;
  duration: string;
  acquire: string;
  renew: string;
  transitions: string;
  generation: string;
  version: string;
}

/** Why a stored record cannot be trusted, or undefined when every field is present and well-formed. */
function damage(fields: ReadonlyMap<string, string>): string | undefined {
  const missing = REQUIRED_FIELDS.filter((field) => !fields.get(field) && !(field === 'holderIdentity' && fields.has(field)));
  if (missing.length > 0) return `missing ${missing.join(', ')}`;
  const garbled = (['leaseDurationSeconds', 'acquireTime', 'renewTime', 'leaderTransitions', 'version'] as const).filter(
    (field) => !/^\d+$/.test(fields.get(field)!),
  );
  return garbled.length > 0 ? `not a whole number: ${garbled.join(', ')}` : undefined;
}

function recordArgs(record: LeaderElectionRecord): string[] {
  return [
    record.holderIdentity,
    String(record.leaseDurationSeconds),
    String(record.acquireTime),
    String(record.renewTime),
    String(record.leaderTransitions),
  ];
}
