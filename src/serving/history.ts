import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { KeySpace } from '../redis/keys.js';
import { parseLedgerRecord, parseTriggerRecord, recordedRun } from '../ledger/records.js';
import type { SkippedRange } from '../ledger/tick-ledger.js';

/**
 * What became of one nominal tick (or of a recorded range of skipped ticks):
 * - `ran`: delivered within `lateAfterMs` of its nominal time and completed;
 * - `late`: delivered later than that (whatever the run did after, unless it failed): added to BullMQ that
 *   late, or, for a run added ahead of its tick (staged, which BullMQ promotes at the tick) or a manual
 *   run, started that late;
 * - `failed`: the run failed for good (BullMQ's failed set);
 * - `skipped`: recorded as skipped, with the reason;
 * - `running`, `queued`: in BullMQ, not finished yet;
 * - `pending`: claimed by a leader and not yet confirmed in BullMQ (or buffered behind a run);
 * - `gone`: enqueued, but BullMQ no longer has the job (its retention removed it).
 */
export type TickFate = 'ran' | 'late' | 'failed' | 'skipped' | 'running' | 'queued' | 'pending' | 'gone';

/** One cell of a job's strip. Times are epoch ms. */
export interface TickRecord {
  tick: number;
  fate: TickFate;
  /** For a skipped range: its last tick and how many ticks it covers. */
  to?: number;
  count?: number;
  /** Skip reason, or the failure message (truncated). */
  reason?: string;
  jobId?: string;
  /** A run of `leasebeat trigger`; its `tick` is when it was added to BullMQ. */
  manual?: true;
  /** Enqueue lag: added to BullMQ minus the nominal tick, negative for a run staged ahead of its tick. */
  lagMs?: number;
  /** Start lag: the (last) start of the run (BullMQ's processedOn) minus the nominal tick; for a manual run, minus its add. */
  startLagMs?: number;
  durationMs?: number;
}

/** A job's recent ticks, oldest first. */
export interface JobHistory {
  name: string;
  queue: string;
  ticks: TickRecord[];
}

/** Why a leadership term ended. */
export type TermEnd =
  /** Still held: renewed within its lease duration as of the read. */
  | 'current'
  /** Its holder wrote an empty holder (a graceful release: shutdown, cordon, resign). */
  | 'released'
  /** Its lease ran out before anyone took over (crash, freeze, partition). */
  | 'expired'
  /** Another holder wrote while this lease was still live by its own times (should not happen; clocks apart?). */
  | 'taken-over'
  /** The lease was created anew (deleted, or its record was damaged). */
  | 'recreated';

/** One leadership term, from the lock's own write history. Times are the holders' (epoch ms). */
export interface LeadershipTerm {
  holder: string;
  generation: string;
  leaderTransitions: number;
  acquiredAt: number;
  lastRenewedAt: number;
  leaseDurationMs: number;
  /** When it ended (the release, the successor's acquisition, or its expiry); null while current. */
  endedAt: number | null;
  end: TermEnd;
  /** Writes of the term in the history (acquisition and renewals). */
  writes: number;
}

/** The timeline of terms and where it came from. */
export interface LeadershipHistory {
  /** `lease-history`: the Redis lock's write stream; `fence`: only the current term (Kubernetes lock). */
  source: 'lease-history' | 'fence' | 'none';
  terms: LeadershipTerm[];
  /** Said on the page when the timeline is partial. */
  note?: string;
}

/** The document of `/api/history`. */
export interface HistorySnapshot {
  /** Redis time of the read (epoch ms). */
  generatedAt: number;
  lateAfterMs: number;
  jobs: JobHistory[];
  leadership: LeadershipHistory;
}

/** Options of `HistoryReader`. */
export interface HistoryReaderOptions {
  /** A connection to the Redis holding the ledger (and the lease, with the Redis lock). */
  redis: Redis;
  keys: KeySpace;
  /** The loaded jobs and their queues, asked at every read (hot reload). */
  jobs(): Array<{ name: string; queue: Queue }>;
  /** The Redis lock's history stream key (`RedisLeaseLock.historyKey`); absent for the Kubernetes lock. */
  leaseHistoryKey?: string;
  /** Shown instead when there is no history stream, e.g. where the Kubernetes Events are. */
  noHistoryNote?: string;
  /** Cells per job strip. Default 40. */
  ticksPerJob?: number;
  /** A lag above this makes a tick `late` (see `TickFate`). Default 1000 ms. */
  lateAfterMs?: number;
  /** Terms kept for the timeline. Default 30. */
  terms?: number;
}

/**
 * What the status page says under the Kubernetes lock, whose Lease keeps no write history: the terms are
 * in the Lease's Events (one `LeaderElection` event per acquisition), which the page does not read.
 */
export function kubernetesHistoryNote(namespace: string, leaseName: string): string {
  return (
    'The Kubernetes Lease keeps no write history, so only the term that raised the fence last is shown. ' +
    `Every acquisition is a LeaderElection event: kubectl get events -n ${namespace} ` +
    `--field-selector involvedObject.kind=Lease,involvedObject.name=${leaseName}`
  );
}

/** Stream entries read per round when catching up with the lease history. */
const HISTORY_BATCH = 2_000;
/** At first read, how far back the lease history is read at most (a few hours of renewals). */
const HISTORY_FIRST_READ = 10_000;
const MAX_REASON_LENGTH = 200;

/** Folds lease writes into terms. Holds only the terms, so each read costs only the writes since the last. */
export class TermFolder {
  private readonly terms: LeadershipTerm[] = [];
  /** The open term's key, or undefined when no term is open (released, or nothing read yet). */
  private open: string | undefined;

  constructor(private readonly keep: number) {}

  /** Takes one write of the lease record, in stream order. */
  add(write: LeaseWrite): void {
    const current = this.open === undefined ? undefined : this.terms[this.terms.length - 1];
    if (write.holder === '') {
      // client-go's release: the holder empties its record (keeping the transitions) so a successor need not wait.
      if (current) this.close(current, 'released', write.renewTime || write.at);
      return;
    }
    const key = `${write.generation}|${write.transitions}|${write.holder}`;
    if (current && key === this.open && write.op !== 'create') {
      current.lastRenewedAt = Math.max(current.lastRenewedAt, write.renewTime);
      current.leaseDurationMs = write.durationMs;
      current.writes++;
      return;
    }
    if (current) {
      if (write.op === 'create') this.close(current, 'recreated', write.acquireTime);
      else if (write.acquireTime >= current.lastRenewedAt + current.leaseDurationMs) this.close(current, 'expired', current.lastRenewedAt + current.leaseDurationMs);
      else this.close(current, 'taken-over', write.acquireTime);
    }
    this.terms.push({
      holder: write.holder,
      generation: write.generation,
      leaderTransitions: write.transitions,
      acquiredAt: write.acquireTime,
      lastRenewedAt: write.renewTime,
      leaseDurationMs: write.durationMs,
      endedAt: null,
      end: 'current',
      writes: 1,
    });
    this.open = key;
    if (this.terms.length > this.keep) this.terms.splice(0, this.terms.length - this.keep);
  }

  /** The terms, oldest first; an open term whose lease has run out by `now` shows as expired. */
  snapshot(now: number): LeadershipTerm[] {
    return this.terms.map((term) => {
      if (term.end !== 'current' || term.lastRenewedAt + term.leaseDurationMs > now) return { ...term };
      return { ...term, end: 'expired', endedAt: term.lastRenewedAt + term.leaseDurationMs };
    });
  }

  private close(term: LeadershipTerm, end: TermEnd, at: number): void {
    term.end = end;
    term.endedAt = at;
    this.open = undefined;
  }
}

/** One write of the lease as its history stream records it (fields of `createLease.lua`/`updateLease.lua`). */
export interface LeaseWrite {
  /** Redis time of the write (stream id). */
  at: number;
  op: 'create' | 'update';
  holder: string;
  generation: string;
  transitions: number;
  acquireTime: number;
  renewTime: number;
  durationMs: number;
}

function parseLeaseWrite(id: string, flat: string[]): LeaseWrite {
  const fields = new Map<string, string>();
  for (let i = 0; i + 1 < flat.length; i += 2) fields.set(flat[i]!, flat[i + 1]!);
  const number = (name: string): number => Number(fields.get(name) ?? 0) || 0;
  return {
    at: Number(id.split('-')[0]),
    op: fields.get('op') === 'create' ? 'create' : 'update',
    holder: fields.get('holder') ?? '',
    generation: fields.get('generation') ?? '',
    transitions: number('transitions'),
    acquireTime: number('acquire'),
    renewTime: number('renew'),
    durationMs: number('duration') * 1000,
  };
}

/** The next stream id after `id`, for an exclusive XRANGE start that works on every Redis version. */
function nextStreamId(id: string): string {
  const [ms, seq] = id.split('-');
  return `${ms}-${BigInt(seq ?? '0') + 1n}`;
}

const toNumber = (value: string | null | undefined): number | undefined => {
  if (value === null || value === undefined || value === '') return undefined;
  const number = Number(value);
  return Number.isFinite(number) ? number : undefined;
};

/**
 * How late leasebeat delivered a run: its enqueue lag, or, for a run in BullMQ before its tick (staged
 * ahead, which BullMQ promotes at the tick, or a manual run), its start lag, since its add cannot be late.
 */
function lateness(record: TickRecord): number {
  return (record.lagMs !== undefined && record.lagMs > 0 ? record.lagMs : record.startLagMs) ?? 0;
}

/**
 * Reads the status page's history from what Redis already holds: the tick ledger (`…:ledger-index:<job>`
 * for the newest ticks, `…:ledger:<job>` for their fate, `…:skips:<job>` for skipped ranges,
 * `…:manual:<job>` for `leasebeat trigger` runs), the BullMQ job of each run (its hash and the
 * completed/failed sets), and the Redis lock's write stream.
 * One read is a few pipelined commands per job plus the lease writes since the previous read.
 */
export class HistoryReader {
  private readonly folder: TermFolder;
  /** Settled runs of the ticks last shown, by `<job>|<jobId>` (see `rememberFinished`). */
  private readonly finished = new Map<string, TickRecord>();
  private lastStreamId: string | undefined;
  private catchingUp: Promise<void> | undefined;

  constructor(private readonly options: HistoryReaderOptions) {
    this.folder = new TermFolder(options.terms ?? 30);
  }

  async read(): Promise<HistorySnapshot> {
    const lateAfterMs = this.options.lateAfterMs ?? 1_000;
    const [[seconds, micros], jobs, leadership] = await Promise.all([
      this.options.redis.time() as unknown as Promise<[string, string]>,
      Promise.all(this.options.jobs().map((job) => this.jobHistory(job.name, job.queue, lateAfterMs))),
      this.leadership(),
    ]);
    const generatedAt = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    if (leadership.source === 'lease-history') leadership.terms = this.folder.snapshot(generatedAt);
    return { generatedAt, lateAfterMs, jobs, leadership };
  }

  private async jobHistory(name: string, queue: Queue, lateAfterMs: number): Promise<JobHistory> {
    const { redis, keys } = this.options;
    const limit = this.options.ticksPerJob ?? 40;
    const [ticks, ranges, manual] = await Promise.all([
      redis.zrevrange(keys.ledgerIndex(name), 0, limit - 1),
      redis.zrevrange(keys.skips(name), 0, limit - 1),
      redis.hvals(keys.manual(name)),
    ]);
    const states = ticks.length ? await redis.hmget(keys.ledger(name), ...ticks) : [];
    const records: TickRecord[] = [];
    const enqueued: Array<{ record: TickRecord; jobId: string }> = [];
    const inBullMq = (record: TickRecord, jobId: string): void => {
      const finished = this.finished.get(`${name}|${jobId}`);
      if (finished) {
        records.push({ ...finished });
        return;
      }
      records.push(record);
      enqueued.push({ record, jobId });
    };
    ticks.forEach((tickText, index) => {
      const tick = Number(tickText);
      const state = states[index];
      if (!state) return; // pruned between the two reads
      const record = parseLedgerRecord(state);
      switch (record.kind) {
        case 'skipped':
          records.push({ tick, fate: 'skipped', reason: record.reason });
          break;
        case 'enqueued':
          inBullMq({ tick, fate: 'queued', jobId: record.jobId }, record.jobId);
          break;
        // Claimed or buffered: a leader has it, BullMQ does not yet; unstaging: a leader is taking a staged run back.
        case 'claimed':
        case 'buffered':
        case 'unstaging':
          records.push({ tick, fate: 'pending', jobId: record.jobId });
          break;
      }
    });
    for (const member of ranges) {
      try {
        const range = JSON.parse(member) as SkippedRange;
        records.push({ tick: range.from, to: range.to, count: range.count, fate: 'skipped', reason: range.reason });
      } catch {
        // A range this version cannot read is left out of the strip, not fatal to the page.
      }
    }
    // Manual runs (enqueued, or claimed until its add is confirmed): placed by BullMQ's add time, once
    // runsOf has read it. A refused request never became a run.
    for (const state of manual) {
      const jobId = recordedRun(parseTriggerRecord(state));
      if (jobId) inBullMq({ tick: Number.NaN, fate: 'queued', jobId, manual: true }, jobId);
    }
    if (enqueued.length) await this.runsOf(queue, enqueued, lateAfterMs);
    // A manual run BullMQ does not have (not added yet, or removed before it was ever shown) has no place.
    const placed = records.filter((record) => Number.isFinite(record.tick));
    placed.sort((a, b) => a.tick - b.tick);
    const shown = placed.slice(-limit);
    this.rememberFinished(name, shown);
    return { name, queue: queue.name, ticks: shown };
  }

  /**
   * Keeps the runs that will not change (completed, or gone from BullMQ) of the ticks on screen, so the
   * next read asks BullMQ only about new and unfinished runs: a page refreshing every 5 s costs a few
   * commands per job once its strip is known. Runs that left the strip are forgotten.
   */
  private rememberFinished(job: string, shown: readonly TickRecord[]): void {
    for (const key of this.finished.keys()) if (key.startsWith(`${job}|`)) this.finished.delete(key);
    for (const record of shown) {
      // A failed run is asked again: retrying it from Bull Board is common and must show.
      const settled = (record.fate === 'ran' || record.fate === 'late') && record.durationMs !== undefined;
      if (record.jobId !== undefined && (settled || record.fate === 'gone')) this.finished.set(`${job}|${record.jobId}`, { ...record });
    }
  }

  /** Fills in the fate and timings of enqueued ticks from their BullMQ jobs, in one pipeline. */
  private async runsOf(queue: Queue, runs: Array<{ record: TickRecord; jobId: string }>, lateAfterMs: number): Promise<void> {
    // BullMQ's keys live on the same Redis as the ledger (one connection setting for both).
    const pipeline = this.options.redis.pipeline();
    for (const { jobId } of runs) {
      pipeline.hmget(queue.toKey(jobId), 'timestamp', 'processedOn', 'finishedOn', 'failedReason');
      pipeline.zscore(queue.keys.completed!, jobId);
      pipeline.zscore(queue.keys.failed!, jobId);
    }
    const results = (await pipeline.exec()) ?? [];
    runs.forEach(({ record }, index) => {
      const [hash, completed, failed] = [0, 1, 2].map((offset) => results[index * 3 + offset]?.[1]);
      const fields = (hash as Array<string | null> | undefined) ?? [];
      const added = toNumber(fields[0]);
      if (added === undefined) {
        record.fate = 'gone';
        return;
      }
      const processedOn = toNumber(fields[1]);
      const finishedOn = toNumber(fields[2]);
      // A manual run has no tick to be late for: it is placed at its add, and only its start can lag.
      if (record.manual) record.tick = added;
      else record.lagMs = added - record.tick;
      if (processedOn !== undefined) record.startLagMs = processedOn - record.tick;
      if (processedOn !== undefined && finishedOn !== undefined) record.durationMs = finishedOn - processedOn;
      if (failed !== null && failed !== undefined) {
        record.fate = 'failed';
        if (fields[3]) record.reason = fields[3].slice(0, MAX_REASON_LENGTH);
      } else if (lateness(record) > lateAfterMs) record.fate = 'late';
      else if (completed !== null && completed !== undefined) record.fate = 'ran';
      else record.fate = processedOn !== undefined ? 'running' : 'queued';
    });
  }

  private async leadership(): Promise<LeadershipHistory> {
    const { leaseHistoryKey } = this.options;
    if (!leaseHistoryKey) {
      const fence = await this.options.redis.hgetall(this.options.keys.fence);
      const terms: LeadershipTerm[] = fence.holder
        ? [{
            holder: fence.holder,
            generation: fence.generation ?? '',
            leaderTransitions: Number(fence.transitions ?? 0),
            acquiredAt: Number(fence.raisedAt ?? 0),
            lastRenewedAt: Number(fence.raisedAt ?? 0),
            leaseDurationMs: 0,
            endedAt: null,
            end: 'current',
            writes: 1,
          }]
        : [];
      return {
        source: terms.length ? 'fence' : 'none',
        terms,
        note: this.options.noHistoryNote ?? 'This lock keeps no write history: only the latest term that produced is shown.',
      };
    }
    // One catch-up at a time: concurrent page refreshes share it instead of folding the same writes twice.
    this.catchingUp ??= this.catchUp(leaseHistoryKey).finally(() => (this.catchingUp = undefined));
    await this.catchingUp;
    return { source: 'lease-history', terms: [] };
  }

  private async catchUp(key: string): Promise<void> {
    const { redis } = this.options;
    if (this.lastStreamId === undefined) {
      const newest = (await redis.xrevrange(key, '+', '-', 'COUNT', HISTORY_FIRST_READ)).reverse();
      for (const [id, flat] of newest) this.folder.add(parseLeaseWrite(id, flat));
      this.lastStreamId = newest.at(-1)?.[0] ?? '0-0';
      return;
    }
    let after: string = this.lastStreamId;
    for (;;) {
      const batch: Array<[string, string[]]> = await redis.xrange(key, nextStreamId(after), '+', 'COUNT', HISTORY_BATCH);
      for (const [id, flat] of batch) this.folder.add(parseLeaseWrite(id, flat));
      after = batch.at(-1)?.[0] ?? after;
      this.lastStreamId = after;
      if (batch.length < HISTORY_BATCH) return;
    }
  }
}
