import type { Redis } from 'ioredis';
import { RenewedClient } from './renewed-client.js';

/** What the BullMQ event streams showed about one job id. */
export interface JobWrites {
  /** Redis time (ms, from the stream entry id) at which the job was written: its `added` event. */
  addedAt: number;
  /** Later adds of the same id that BullMQ turned away (`duplicated` / `deduplicated` events), by Redis time. */
  repeats: number[];
}

/**
 * Follows the BullMQ event streams of some queues from the start, recording for every job id when Redis
 * wrote it. A stream entry id is the Redis clock at the write, so this is the time the enqueue took
 * effect, not when the leader began it. Reads continuously, so the streams' length cap never drops an
 * entry before it is seen.
 */
export class EventTail {
  readonly writes = new Map<string, JobWrites>();
  private readonly lastIds: string[];
  private readonly done = new AbortController();
  private running: Promise<void> | undefined;
  private stopping: Promise<void> | undefined;

  private readonly connection: RenewedClient;

  constructor(
    /** Opens a dedicated connection (XREAD BLOCK holds it). */
    connect: () => Redis,
    private readonly streams: string[],
  ) {
    this.lastIds = streams.map(() => '0-0');
    this.connection = new RenewedClient(connect);
  }

  /** Disconnects the connection. */
  close(): void {
    this.connection.close();
  }

  start(): void {
    this.running = this.loop();
  }

  /** Reads what is left, then stops. */
  stop(): Promise<void> {
    this.stopping ??= this.finish();
    return this.stopping;
  }

  private async finish(): Promise<void> {
    this.done.abort();
    await this.running;
    while ((await this.readOnce(0)) > 0);
  }

  private async loop(): Promise<void> {
    while (!this.done.signal.aborted) {
      try {
        await this.readOnce(500);
      } catch {
        // Redis restarting: ioredis reconnects; try again shortly.
        await new Promise((r) => setTimeout(r, 200));
      }
    }
  }

  /** One XREAD over every stream; returns how many entries it read. */
  private async readOnce(blockMs: number): Promise<number> {
    const block = blockMs > 0 ? ['BLOCK', blockMs] : [];
    const result = (await this.connection.client.call('XREAD', 'COUNT', 5000, ...block, 'STREAMS', ...this.streams, ...this.lastIds)) as Array<
      [string, Array<[string, string[]]>]
    > | null;
    let read = 0;
    for (const [stream, entries] of result ?? []) {
      const index = this.streams.indexOf(stream);
      for (const [id, fields] of entries) {
        this.lastIds[index] = id;
        this.record(Number(id.split('-')[0]), fields);
        read++;
      }
    }
    return read;
  }

  private record(at: number, fields: string[]): void {
    const entry = new Map<string, string>();
    for (let i = 0; i + 1 < fields.length; i += 2) entry.set(fields[i]!, fields[i + 1]!);
    const event = entry.get('event');
    const jobId = entry.get('jobId');
    if (jobId === undefined) return;
    if (event === 'added') {
      if (!this.writes.has(jobId)) this.writes.set(jobId, { addedAt: at, repeats: [] });
    } else if (event === 'duplicated' || event === 'deduplicated') {
      // Both name the job that was kept as jobId; in leasebeat the turned-away add had that same id.
      this.writes.get(jobId)?.repeats.push(at);
    }
  }
}
