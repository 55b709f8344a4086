import type { Redis } from 'ioredis';
import type { KeySpace } from '../redis/keys.js';
import { LuaScript } from '../util/lua.js';
import type { HealthView, ObservedRecord } from './health.js';
import { parseMemberRecord, type MemberRecord } from './record.js';

const removeMemberScript = new LuaScript(new URL('./lua/removeMember.lua', import.meta.url));
const beatScript = new LuaScript(new URL('./lua/beat.lua', import.meta.url));

/** An operator's request that a member stop campaigning and stop taking jobs. */
export interface CordonRequest {
  /** Epoch ms on the operator's clock; shown, never compared. */
  at: number;
  note: string;
}

/**
 * The member registry, in Redis.
 *
 * Members live where their work lives. Every instance already depends on Redis for its jobs (BullMQ) and,
 * with the Redis lock, for its lease; an instance that can write its heartbeat there can also take and
 * finish jobs, and one that cannot is of no use to the queue whatever else it can reach. The Kubernetes API
 * would judge a different path (and is absent outside Kubernetes), so a member could look healthy there
 * while it cannot work, or the reverse. Keeping the record in the cluster's hash-tagged keys also means one
 * Lua script can compare and delete it atomically.
 */
export class MemberStore {
  /** Hash: member identity → Redis time (ms) of its last heartbeat write. Shares the members' hash tag. */
  readonly beatsKey: string;

  constructor(
    private readonly redis: Redis,
    readonly keys: KeySpace,
  ) {
    this.beatsKey = keys.memberBeats;
  }

  /** Writes a member's heartbeat (stamped with Redis time) and, in the same round trip, reads any cordon on it. */
  async beat(record: MemberRecord): Promise<CordonRequest | undefined> {
    const cordon = await beatScript.run<string | null>(
      this.redis,
      [this.keys.members, this.beatsKey, this.keys.cordons],
      [record.identity, JSON.stringify(record)],
    );
    return parseCordon(cordon ?? null);
  }

  /**
   * Every member record, by identity, with how long ago (Redis clock, at this read) each was last written.
   * That age survives a change of leader, unlike the leader's own `probeTimestamp`: a new leader starts
   * each member's countdown from it.
   */
  async list(): Promise<Map<string, ObservedRecord>> {
    const results = await this.redis.multi().hgetall(this.keys.members).hgetall(this.beatsKey).time().exec();
    const failure = results?.find(([error]) => error)?.[0];
    if (!results || failure) throw failure ?? new Error('member list transaction was aborted');
    const stored = results[0]![1] as Record<string, string>;
    const beats = results[1]![1] as Record<string, string>;
    const [seconds, micros] = results[2]![1] as [string, string];
    const now = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    return new Map(
      Object.entries(stored).map(([identity, raw]) => {
        const beatAt = beats[identity] === undefined ? Number.NaN : Number(beats[identity]);
        // A record written by an older version has no stamp: its age is unknown, not zero.
        return [identity, { raw, record: parseMemberRecord(identity, raw), ...(Number.isFinite(beatAt) ? { ageMs: Math.max(0, now - beatAt) } : {}) }];
      }),
    );
  }

  /** One member's record, if it is registered. */
  async get(identity: string): Promise<MemberRecord | undefined> {
    const raw = await this.redis.hget(this.keys.members, identity);
    return raw === null ? undefined : parseMemberRecord(identity, raw);
  }

  /** Deletes a record only if it still reads `raw`; false when the member wrote since. */
  async remove(identity: string, raw: string): Promise<boolean> {
    return (await removeMemberScript.run<number>(this.redis, [this.keys.members, this.keys.cordons, this.beatsKey], [identity, raw])) === 1;
  }

  /** A member leaving cleanly takes its record and its cordon with it. */
  async leave(identity: string): Promise<void> {
    await this.redis.multi().hdel(this.keys.members, identity).hdel(this.keys.cordons, identity).hdel(this.beatsKey, identity).exec();
  }

  async cordon(identity: string, request: CordonRequest): Promise<void> {
    await this.redis.hset(this.keys.cordons, identity, JSON.stringify(request));
  }

  /** False when the member was not cordoned. */
  async uncordon(identity: string): Promise<boolean> {
    return (await this.redis.hdel(this.keys.cordons, identity)) === 1;
  }

  async cordons(): Promise<Map<string, CordonRequest>> {
    const stored = await this.redis.hgetall(this.keys.cordons);
    const cordons = new Map<string, CordonRequest>();
    for (const [identity, raw] of Object.entries(stored)) cordons.set(identity, parseCordon(raw)!);
    return cordons;
  }

  /** Publishes the leader's judgement; it expires after `ttlMs` unless a leader publishes again. */
  async publishHealth(view: HealthView, ttlMs: number): Promise<void> {
    await this.redis.set(this.keys.memberHealth, JSON.stringify(view), 'PX', Math.max(1, Math.round(ttlMs)));
  }

  /** The latest judgement, or undefined when no leader has published one recently. */
  async health(): Promise<HealthView | undefined> {
    const raw = await this.redis.get(this.keys.memberHealth);
    if (raw === null) return undefined;
    try {
      return JSON.parse(raw) as HealthView;
    } catch {
      return undefined;
    }
  }
}

function parseCordon(raw: string | null): CordonRequest | undefined {
  if (raw === null) return undefined;
  try {
    const value = JSON.parse(raw) as Partial<CordonRequest>;
    return { at: Number(value.at ?? 0), note: String(value.note ?? '') };
  } catch {
    // Whatever is stored under the member's name is a cordon, readable or not.
    return { at: 0, note: '' };
  }
}
