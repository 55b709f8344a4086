import type { Logger } from 'pino';
import { withTimeout } from '../util/abort.js';
import type { Clock } from '../util/clock.js';
import type { MemberRecord } from './record.js';
import type { CordonRequest, MemberStore } from './store.js';

/** The part of a member record that describes the member's current state, read at every beat. */
export type MemberReport = Omit<MemberRecord, 'identity' | 'version' | 'startedAt' | 'seq'>;

export interface HeartbeatOptions {
  store: MemberStore;
  identity: string;
  version: string;
  clock: Clock;
  intervalMs: number;
  /** Bound of one beat; a beat that cannot land within it is abandoned and retried. */
  timeoutMs: number;
  logger: Logger;
  report(): MemberReport;
  /**
   * Called after every write with the cordon found in Redis (undefined: none). Resolves true when it
   * changed what the member does; the beat then writes again at once, so the change shows without
   * waiting for the next interval.
   */
  onCordon(request: CordonRequest | undefined): Promise<boolean>;
  /** Also done at every beat, after the record is written (a failure fails the beat). */
  alongside?: () => Promise<void>;
}

/**
 * The member side of the lifecycle: every interval, rewrite this instance's record (with a fresh sequence
 * number, so the leader always sees a change) and pick up any cordon in the same round trip.
 */
export class Heartbeat {
  readonly startedAt: number;
  private seq = 0;
  private chain: Promise<void> = Promise.resolve();

  constructor(private readonly options: HeartbeatOptions) {
    this.startedAt = options.clock.now();
  }

  /** One beat now, after any beat in flight: beats never overlap, so records land in sequence order. */
  beat(): Promise<void> {
    const next = this.chain.then(() => this.beatOnce());
    this.chain = next.catch(() => undefined);
    return next;
  }

  /** Beats every interval until `signal` aborts; never rejects. */
  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      try {
        await this.beat();
      } catch (error) {
        this.options.logger.warn({ err: error }, 'heartbeat failed');
      }
      try {
        await this.options.clock.sleep(this.options.intervalMs, signal);
      } catch {
        return;
      }
    }
  }

  /** Deletes this member's record and cordon after any beat in flight: a clean departure. */
  async leave(): Promise<void> {
    await this.chain;
    const { store, identity, clock, timeoutMs } = this.options;
    await withTimeout(clock, timeoutMs, undefined, 'leaving the member registry', () => store.leave(identity));
  }

  private async beatOnce(): Promise<void> {
    const cordon = await this.write();
    if (await this.options.onCordon(cordon)) await this.write();
    await this.options.alongside?.();
  }

  private write(): Promise<CordonRequest | undefined> {
    const { store, identity, version, clock, timeoutMs } = this.options;
    const record: MemberRecord = { identity, version, startedAt: this.startedAt, seq: ++this.seq, ...this.options.report() };
    return withTimeout(clock, timeoutMs, undefined, 'heartbeat', () => store.beat(record));
  }
}
