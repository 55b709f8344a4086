import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { raceAbort } from '../util/abort.js';
import { LuaScript } from '../util/lua.js';
import { defaultIdentity } from './identity.js';
import { serializeRecord, type LeaderElectionRecord, type LockObservation } from './record.js';
import { LockConflictError, LockNotFoundError, type ResourceLock } from './resource-lock.js';

const createLease = new LuaScript(new URL('./lua/createLease.lua', import.meta.url));
const updateLease = new LuaScript(new URL('./lua/updateLease.lua', import.meta.url));

/** Options of a `RedisLeaseLock`. */
export interface RedisLeaseLockOptions {
  /** The application's ioredis client; the lock does not close it. */
  connection: Redis;
  /** Name of the lease, shared by all candidates. */
  name: string;
  identity?: string;
  /** Key prefix. Default `leasebeat`. */
  prefix?: string;
}

interface Observed {
  version: string;
  generation: string;
}

/**
 * The Kubernetes Lease record kept in a Redis hash, for deployments without a cluster. Compare-and-swap
 * runs in one Lua script on a version field. Every creation draws a new generation id, so a deleted and
 * recreated record (whose transitions restart at 0) can never repeat an earlier fencing token.
 *
 * The key is `<prefix>:{<name>}:lease`; the hash tag keeps it usable on Redis Cluster.
 */
export class RedisLeaseLock implements ResourceLock {
  readonly key: string;
  private readonly redis: Redis;
  private readonly name: string;
  private readonly holder: string;
  private observed: Observed | undefined;

  constructor(options: RedisLeaseLockOptions) {
    this.redis = options.connection;
    this.name = options.name;
    this.holder = options.identity ?? defaultIdentity();
    this.key = `${options.prefix ?? 'leasebeat'}:{${options.name}}:lease`;
  }

  async get(signal: AbortSignal): Promise<LockObservation> {
    const fields = await raceAbort(this.redis.hgetall(this.key), signal);
    if (fields.version === undefined || fields.generation === undefined) {
      throw new LockNotFoundError(`lease ${this.describe()} not found`);
    }
    const record: LeaderElectionRecord = {
      holderIdentity: fields.holderIdentity ?? '',
      leaseDurationSeconds: Number(fields.leaseDurationSeconds),
      acquireTime: Number(fields.acquireTime),
      renewTime: Number(fields.renewTime),
      leaderTransitions: Number(fields.leaderTransitions),
    };
    this.observed = { version: fields.version, generation: fields.generation };
    return { record, raw: serializeRecord(record) };
  }

  async create(record: LeaderElectionRecord, signal: AbortSignal): Promise<void> {
    const generation = randomUUID();
    const result = await raceAbort(
      createLease.run<number>(this.redis, [this.key], [...recordArgs(record), generation]),
      signal,
    );
    if (result === -1) throw new LockConflictError(`lease ${this.describe()} already exists`);
    this.observed = { version: String(result), generation };
  }

  async update(record: LeaderElectionRecord, signal: AbortSignal): Promise<void> {
    const observed = this.observed;
    if (!observed) throw new Error(`lease ${this.describe()}: update before the record was read or created`);
    const result = await raceAbort(
      updateLease.run<number>(this.redis, [this.key], [observed.version, observed.generation, ...recordArgs(record)]),
      signal,
    );
    if (result === -2) throw new LockNotFoundError(`lease ${this.describe()} not found`);
    if (result === -1) throw new LockConflictError(`lease ${this.describe()} was modified concurrently`);
    this.observed = { version: String(result), generation: observed.generation };
  }

  /** Redis keeps no event history; leadership changes are visible in the logs instead. */
  recordEvent(): void {}

  identity(): string {
    return this.holder;
  }

  describe(): string {
    return `redis/${this.name}`;
  }

  generation(): string {
    return this.observed?.generation ?? '';
  }
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
