import type { Redis } from 'ioredis';
import { AUDIT_STREAM_MAXLEN, type KeySpace } from '../redis/keys.js';
import type { WritePath } from '../redis/durability.js';

/** What an operator did to a job or a runtime schedule. */
export type AuditAction = 'pause' | 'resume' | 'trigger' | 'backfill' | 'upsert' | 'remove';

/** One entry of a job's history: what was done, by whom, when (Redis time), and what it said. */
export interface AuditEntry {
  at: string;
  action: AuditAction;
  /** The board user (`<user> (http)`), or the CLI's and the API's `user@host`. */
  by: string;
  /** What the action carried: a pause note, a trigger's run, a schedule's new version. */
  detail: Record<string, unknown>;
}

/**
 * Who paused, resumed, triggered, backfilled, edited or removed what, and when: one capped stream per job or schedule
 * name in Redis (`<base>:audit:<name>`), written after the action succeeded (through the same durable
 * path on replicated topologies) and read newest first by `leasebeat history`.
 */
export class AuditLog {
  constructor(
    private readonly redis: Redis,
    private readonly keys: KeySpace,
    private readonly writes: WritePath,
  ) {}

  async record(name: string, action: AuditAction, by: string, detail: Record<string, unknown> = {}): Promise<void> {
    const key = this.keys.audit(name);
    await this.writes.write(key, () => this.redis.xadd(key, 'MAXLEN', '~', AUDIT_STREAM_MAXLEN, '*', 'action', action, 'by', by, 'detail', JSON.stringify(detail)), () => `audit entry of ${name}`);
  }

  /** The newest `limit` entries of `name`, newest first. */
  async history(name: string, limit: number): Promise<AuditEntry[]> {
    const entries = await this.redis.xrevrange(this.keys.audit(name), '+', '-', 'COUNT', limit);
    return entries.map(([id, flat]) => {
      const fields = new Map<string, string>();
      for (let i = 0; i + 1 < flat.length; i += 2) fields.set(flat[i]!, flat[i + 1]!);
      return {
        at: new Date(Number(id.split('-')[0])).toISOString(),
        action: fields.get('action') as AuditAction,
        by: fields.get('by') ?? '',
        detail: JSON.parse(fields.get('detail') ?? '{}') as Record<string, unknown>,
      };
    });
  }
}
