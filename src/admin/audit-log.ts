import type { Redis } from 'ioredis';
import { AUDIT_IDS_PER_NAME, AUDIT_STREAM_MAXLEN, type KeySpace } from '../redis/keys.js';
import type { WritePath } from '../redis/durability.js';
import { LuaScript } from '../util/lua.js';

const recordAudit = new LuaScript(new URL('./lua/recordAudit.lua', import.meta.url));
const readAudit = new LuaScript(new URL('./lua/readAudit.lua', import.meta.url));

/** What an operator did to a job or a runtime schedule. */
export type AuditAction = 'pause' | 'resume' | 'trigger' | 'backfill' | 'upsert' | 'remove';

/** One entry of a job's history: what was done, by whom, when (Redis time), and what it said. */
export interface AuditEntry {
  at: string;
  action: AuditAction;
  /** The board user (`<user> (http)`), or the CLI's and the API's `user@host`. */
  by: string;
  /** What the action carried: a pause note, a trigger's run, a backfill's range, a schedule's new version. */
  detail: Record<string, unknown>;
}

/**
 * Who paused, resumed, triggered, backfilled, edited or removed what, and when: one capped stream for the
 * deployment (`<base>:audit`) and an index of each name's newest entries (`<base>:audit-index`), written
 * after the action succeeded (through the same durable path on replicated topologies) and read newest
 * first by `leasebeat history`. Schedule upserts and removals write their entries in their own scripts
 * (ScheduleStore), through the same rule (redis/lua/includes/audit.lua).
 */
export class AuditLog {
  constructor(
    private readonly redis: Redis,
    private readonly keys: KeySpace,
    private readonly writes: WritePath,
    /** The stream's cap: {@link AUDIT_STREAM_MAXLEN} (a test passes a small one to see the trim). */
    private readonly maxLength = AUDIT_STREAM_MAXLEN,
  ) {}

  async record(name: string, action: AuditAction, by: string, detail: Record<string, unknown> = {}): Promise<void> {
    const args = [name, action, by, JSON.stringify(detail), this.maxLength, AUDIT_IDS_PER_NAME];
    await this.writes.script(recordAudit, [this.keys.audit, this.keys.auditIndex], args, () => `audit entry of ${name}`);
  }

  /** The newest `limit` entries of `name` (at most {@link AUDIT_IDS_PER_NAME}), newest first. */
  async history(name: string, limit: number): Promise<AuditEntry[]> {
    const count = Math.max(1, Math.min(Math.floor(limit), AUDIT_IDS_PER_NAME));
    // Straight to Redis, not the durable path: its only writes drop ids whose entries are gone already.
    const entries = await readAudit.run<Array<[string, string[]]>>(this.redis, [this.keys.audit, this.keys.auditIndex], [name, count]);
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
