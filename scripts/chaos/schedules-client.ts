import { setTimeout as sleep } from 'node:timers/promises';
import { createAdmin, ScheduleError, type Admin, type ScheduleSpec } from '../../src/index.js';
import type { ScheduledJob } from '../../src/scheduling/define-job.js';
import { seededRandom } from '../../test/support/race.js';

/** The job type the client's schedules run (scripts/chaos/jobs/tenant.ts). */
export const SCHEDULE_JOB_TYPE = 'tenant';
/** How many runtime schedules the client keeps writing, by default. */
export const DEFAULT_SCHEDULES = 6;
/** The intervals a schedule is given: dense, and each a multiple of the one before, so an edit keeps or halves the ticks. */
export const SCHEDULE_INTERVALS = ['1s', '2s'] as const;
/** Bound on one write (the admin's timeout): a write not answered by then is unknown. */
const WRITE_TIMEOUT_MS = 3_000;
/** The client's pause between two writes, drawn from the seed: dense enough that every schedule changes every few seconds. */
const GAP_MS = [250, 650] as const;

/** What a write to a schedule meant to do. */
export type ScheduleOp = 'create' | 'edit-data' | 'edit-interval' | 'remove';

/** The data of every run of a client's schedule: which write of the client it was scheduled by. */
export interface ChaosScheduleData {
  schedule: string;
  /** The write's sequence number (unique over the run): the version the run belongs to. */
  write: number;
}

/**
 * One write of the schedules client, as the API answered it: the client's ground truth for what should
 * run. `outcome` is `unknown` when the call threw (a timeout, a lost connection, a replica that did not
 * confirm): the write may or may not have taken effect.
 */
export interface ScheduleWrite {
  seq: number;
  id: string;
  op: ScheduleOp;
  /** For upserts: the spec written (its data names this write). */
  spec?: ScheduleSpec<ChaosScheduleData>;
  /** `Date.now()` just before the call, and when it answered or threw. */
  sentAt: number;
  answeredAt: number;
  outcome: 'ok' | 'unknown';
  /** An acknowledged upsert's version (1 for a new schedule) and whether it wrote one. */
  version?: number;
  changed?: boolean;
  /** An acknowledged remove: whether there was a schedule to remove. */
  removed?: boolean;
  error?: string;
}

/**
 * The chaos run's schedules client: an in-harness loop, on its own connection (`createAdmin` with the URL
 * users would give it), that keeps upserting runtime schedules of the `tenant` job type during the
 * faults: it creates them (every 1 s or 2 s), edits their data and sometimes their interval, removes some
 * and re-creates them later. Writes are one at a time, so the order of one schedule's writes is the order
 * they were made in. What is written is drawn from the seed (the timing is the run's); each write is
 * recorded with its acknowledgement (time, version) or as unknown when it threw.
 */
export class SchedulesClient {
  readonly writes: ScheduleWrite[] = [];
  private readonly admin: Admin;
  private readonly random: () => number;
  private readonly ids: string[];
  /** What the client believes each schedule is now (undefined: removed or never written). */
  private readonly current = new Map<string, ScheduleSpec<ChaosScheduleData>>();
  private running: Promise<void> | undefined;
  /** What ended the loop, if it did not stop when asked: rethrown by stop(). */
  private failure: unknown;
  private stopping = false;
  private seq = 0;

  constructor(options: { connection: string; jobs: ReadonlyMap<string, ScheduledJob>; seed: number; schedules?: number }) {
    this.admin = createAdmin({ connection: options.connection, jobs: () => options.jobs, who: 'chaos-client', timeoutMs: WRITE_TIMEOUT_MS });
    // Its own stream of draws: the fault schedule of a seed stays what it was.
    this.random = seededRandom(options.seed ^ 0x5c4ed01e);
    this.ids = Array.from({ length: options.schedules ?? DEFAULT_SCHEDULES }, (_, i) => `tenant-${i}`);
  }

  /** The schedules' ids (whether or not they exist now). */
  get scheduleIds(): readonly string[] {
    return this.ids;
  }

  start(): void {
    this.running ??= this.loop().catch((error: unknown) => {
      this.failure = error;
    });
  }

  /** Stops after the write in flight; resolves once it has answered, and throws what ended the loop early. */
  async stop(): Promise<void> {
    this.stopping = true;
    await this.running;
    if (this.failure !== undefined) throw new Error('the chaos schedules client failed', { cause: this.failure });
  }

  close(): Promise<void> {
    return this.admin.close();
  }

  private async loop(): Promise<void> {
    while (!this.stopping) {
      await this.writeOne();
      if (this.stopping) return;
      await sleep(this.between(...GAP_MS));
    }
  }

  private between(low: number, high: number): number {
    return low + Math.floor(this.random() * (high - low + 1));
  }

  private pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.random() * items.length)]!;
  }

  /** Draws one write (from the seed only) and makes it. */
  private async writeOne(): Promise<void> {
    const id = this.pick(this.ids);
    const seq = ++this.seq;
    const existing = this.current.get(id);
    const draw = this.random();
    const op: ScheduleOp = !existing ? 'create' : draw < 0.6 ? 'edit-data' : draw < 0.75 ? 'edit-interval' : 'remove';
    const index = this.ids.indexOf(id);
    const every = op === 'create' ? this.pick(SCHEDULE_INTERVALS) : op === 'edit-interval' ? (existing!.every === '1s' ? '2s' : '1s') : existing?.every;
    const spec: ScheduleSpec<ChaosScheduleData> | undefined =
      op === 'remove'
        ? undefined
        : {
            job: SCHEDULE_JOB_TYPE,
            every: every!,
            data: { schedule: id, write: seq },
            // Half of them catch every missed tick up after a failover, the others only the newest (the default).
            ...(index % 2 === 0 ? { catchup: { window: '10m', mode: 'all' as const, max: 1000 } } : {}),
          };
    const sentAt = Date.now();
    const base = { seq, id, op, ...(spec ? { spec } : {}), sentAt };
    try {
      if (spec) {
        const { version, changed } = await this.admin.schedules.upsert(id, spec);
        this.writes.push({ ...base, answeredAt: Date.now(), outcome: 'ok', version, changed });
      } else {
        const removed = await this.admin.schedules.remove(id);
        this.writes.push({ ...base, answeredAt: Date.now(), outcome: 'ok', removed });
      }
    } catch (error) {
      // A refusal is the client's bug, not a fault's: the run must not go on as if it were unknown. A write
      // the replicas did not acknowledge is the fault's: it may or may not stand.
      if (error instanceof ScheduleError && error.code !== 'version-conflict' && error.code !== 'unconfirmed') throw error;
      this.writes.push({ ...base, answeredAt: Date.now(), outcome: 'unknown', error: error instanceof Error ? error.message : String(error) });
      // As a client that lost an answer would, it looks at the schedule (the write stays unknown: a late
      // one may still land).
      await this.admin.schedules.get(id).catch(() => undefined);
    }
    // What the client writes next assumes this write took effect, acknowledged or not.
    if (spec) this.current.set(id, spec);
    else this.current.delete(id);
  }
}

/** How many writes of each kind the client made, and how many of them are unknown. */
export function countWrites(writes: readonly ScheduleWrite[]): Record<ScheduleOp | 'unknown' | 'total', number> {
  const counts = { create: 0, 'edit-data': 0, 'edit-interval': 0, remove: 0, unknown: 0, total: writes.length };
  for (const write of writes) {
    counts[write.op]++;
    if (write.outcome === 'unknown') counts.unknown++;
  }
  return counts;
}
