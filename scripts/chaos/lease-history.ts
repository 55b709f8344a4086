import type { Redis } from 'ioredis';
import { RenewedClient } from './renewed-client.js';
import type { FakeLeaseServer, LeaseWrite } from '../../test/support/fake-lease-server.js';

/**
 * One write of the lock record, from the lock's own history: the fake API server's write log
 * (Kubernetes) or the Redis lock's history stream, which its Lua scripts append to in the same script
 * as the write. This is the ground truth the lease invariants are judged on, not what the processes say.
 */
export interface LeaseRecordWrite {
  /** Server time of the write: the API server's clock, or the Redis clock (the stream id's ms part). */
  at: number;
  op: 'create' | 'update' | 'delete';
  /** `''` for a released lease. */
  holder: string;
  transitions: number;
  /** The term's generation: the Lease uid, or the Redis lock's generation id. */
  generation: string;
  /** resourceVersion, or the Redis record's version. */
  version: string;
  durationMs: number;
  acquire: number;
  renew: number;
}

export interface LeaseHistorySnapshot {
  writes: LeaseRecordWrite[];
  /**
   * `api` / `stream`: every write, from the lock's own history. `sampled`: the Redis lock wrote no
   * history stream (an older lock), so the record was polled and writes between two polls are missed;
   * times are then observation times, up to {@link SAMPLE_MS} late.
   */
  source: 'api' | 'stream' | 'sampled';
  /**
   * Replicated Redis: writes seen when they were made that the final primary does not hold: lost in a
   * failover (never confirmed by a replica, so no term counted on them). Left out of `writes`.
   */
  lostInFailover?: number;
}

/** The Redis lock's history stream beside its record (see src/election/lua/updateLease.lua). */
export const historyKeyOf = (leaseKey: string): string => `${leaseKey}:history`;
/** Poll period of the Redis readers; also the timing tolerance of a sampled history. */
export const SAMPLE_MS = 20;

/** Converts a fake API server write into a lease record write. */
export function fromApiWrite(write: LeaseWrite): LeaseRecordWrite {
  return {
    at: write.at,
    op: write.op,
    holder: write.op === 'delete' ? '' : (write.spec.holderIdentity ?? ''),
    transitions: write.spec.leaseTransitions ?? 0,
    generation: write.uid,
    version: write.resourceVersion,
    durationMs: (write.spec.leaseDurationSeconds ?? 0) * 1000,
    acquire: write.spec.acquireTime ? Date.parse(write.spec.acquireTime) : 0,
    renew: write.spec.renewTime ? Date.parse(write.spec.renewTime) : 0,
  };
}

/** The Kubernetes lock's history: the fake API server keeps every write itself. */
export class ApiLeaseHistory {
  constructor(
    private readonly api: FakeLeaseServer,
    private readonly namespace: string,
    private readonly name: string,
  ) {}

  start(): void {}
  async stop(): Promise<void> {}

  snapshot(): LeaseHistorySnapshot {
    const writes = this.api
      .writeHistory()
      .filter((w) => w.namespace === this.namespace && w.name === this.name)
      .map(fromApiWrite);
    return { writes, source: 'api' };
  }

  /** The last write of `holder`, if any. */
  lastWriteBy(holder: string): LeaseRecordWrite | undefined {
    return this.snapshot().writes.filter((w) => w.holder === holder).at(-1);
  }
}

/**
 * The Redis lock's history, read continuously (the stream is capped, and a run writes thousands of
 * renewals) with XRANGE on a dedicated connection. Meanwhile the record itself is sampled too, so that
 * a lock that writes no stream still gets a (sampled) history.
 */
export class RedisLeaseHistory {
  private readonly streamed: LeaseRecordWrite[] = [];
  /** The stream id of each entry of `streamed`. */
  private readonly streamedIds: string[] = [];
  private lost = 0;
  private readonly sampled: LeaseRecordWrite[] = [];
  private lastId = '-';
  private lastSample = '';
  private readonly done = new AbortController();
  private running: Promise<void> | undefined;

  private readonly connection: RenewedClient;

  constructor(
    /** Opens the reader's connection. */
    connect: () => Redis,
    private readonly leaseKey: string,
  ) {
    this.connection = new RenewedClient(connect);
  }

  private get client(): Redis {
    return this.connection.client;
  }

  /** Disconnects the reader's connection. */
  close(): void {
    this.connection.close();
  }

  start(): void {
    this.running = this.loop();
  }

  async stop(): Promise<void> {
    this.done.abort();
    await this.running;
    await this.readStream().catch(() => undefined);
  }

  snapshot(): LeaseHistorySnapshot {
    if (this.streamed.length > 0) return { writes: [...this.streamed], source: 'stream', ...(this.lost > 0 ? { lostInFailover: this.lost } : {}) };
    return { writes: [...this.sampled], source: 'sampled' };
  }

  lastWriteBy(holder: string): LeaseRecordWrite | undefined {
    return this.snapshot().writes.filter((w) => w.holder === holder).at(-1);
  }

  /**
   * On replicated Redis, after the run: drops the writes seen live that the stream on the final primary
   * no longer holds (within the range it still keeps), and counts them.
   */
  async dropLostWrites(): Promise<void> {
    const kept = new Set<string>();
    let start = '-';
    for (;;) {
      const entries = (await this.client.xrange(historyKeyOf(this.leaseKey), start, '+', 'COUNT', 1000)) as Array<[string, string[]]>;
      for (const [id] of entries) kept.add(id);
      if (entries.length < 1000) break;
      start = `(${entries.at(-1)![0]}`;
    }
    const oldestKept = [...kept][0];
    if (oldestKept === undefined) return;
    const olderThanKept = (id: string): boolean => compareIds(id, oldestKept) < 0;
    for (let i = this.streamed.length - 1; i >= 0; i--) {
      const id = this.streamedIds[i]!;
      if (kept.has(id) || olderThanKept(id)) continue;
      this.streamed.splice(i, 1);
      this.streamedIds.splice(i, 1);
      this.lost++;
    }
  }

  /** Reads what is new right now (for a fault that needs the latest write). */
  async refresh(): Promise<void> {
    await this.readStream();
  }

  private async loop(): Promise<void> {
    while (!this.done.signal.aborted) {
      try {
        await this.readStream();
        await this.sample();
      } catch {
        // Redis restarting: the connection comes back by itself.
      }
      await new Promise((r) => setTimeout(r, SAMPLE_MS));
    }
  }

  private async readStream(): Promise<void> {
    for (;;) {
      const start = this.lastId === '-' ? '-' : `(${this.lastId}`;
      const entries = (await this.client.xrange(historyKeyOf(this.leaseKey), start, '+', 'COUNT', 1000)) as Array<[string, string[]]>;
      for (const [id, fields] of entries) {
        this.lastId = id;
        this.streamedIds.push(id);
        const f = new Map<string, string>();
        for (let i = 0; i + 1 < fields.length; i += 2) f.set(fields[i]!, fields[i + 1]!);
        this.streamed.push({
          at: Number(id.split('-')[0]),
          op: f.get('op') === 'create' ? 'create' : 'update',
          holder: f.get('holder') ?? '',
          transitions: Number(f.get('transitions')),
          generation: f.get('generation') ?? '',
          version: f.get('version') ?? '',
          durationMs: Number(f.get('duration')) * 1000,
          acquire: Number(f.get('acquire')),
          renew: Number(f.get('renew')),
        });
      }
      if (entries.length < 1000) return;
    }
  }

  private async sample(): Promise<void> {
    const [time, fields] = await Promise.all([this.client.time(), this.client.hgetall(this.leaseKey)]);
    if (fields.version === undefined) return;
    const fingerprint = `${fields.generation}/${fields.version}`;
    if (fingerprint === this.lastSample) return;
    this.lastSample = fingerprint;
    this.sampled.push({
      at: Number(time[0]) * 1000 + Math.floor(Number(time[1]) / 1000),
      op: fields.version === '1' ? 'create' : 'update',
      holder: fields.holderIdentity ?? '',
      transitions: Number(fields.leaderTransitions),
      generation: fields.generation ?? '',
      version: fields.version,
      durationMs: Number(fields.leaseDurationSeconds) * 1000,
      acquire: Number(fields.acquireTime),
      renew: Number(fields.renewTime),
    });
  }
}

export type LeaseHistory = ApiLeaseHistory | RedisLeaseHistory;

/** Orders two stream ids (`<ms>-<seq>`). */
function compareIds(a: string, b: string): number {
  const [ams, aseq] = a.split('-').map(Number) as [number, number];
  const [bms, bseq] = b.split('-').map(Number) as [number, number];
  return ams - bms || aseq - bseq;
}
