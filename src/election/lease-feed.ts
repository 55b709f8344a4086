import type { Logger } from 'pino';
import type { Clock } from '../util/clock.js';
import type { LockObservation } from './record.js';
import type { ResourceLock } from './resource-lock.js';

/**
 * A follower's view of a lock's change feed: whether it is live, and a sleep that the next change cuts
 * short. The elector follows renewals and releases through it instead of polling.
 */
export class LeaseFeed {
  private isLive = false;
  private changedSinceTaken = false;
  private wake = new AbortController();

  constructor(
    private readonly onChange: (observation: LockObservation) => void,
    private readonly log: Logger,
  ) {}

  /** Subscribes to `lock`'s feed until `signal` aborts; does nothing for a lock without one. */
  start(lock: ResourceLock, signal: AbortSignal): void {
    lock.watch?.(signal, {
      change: (observation) => {
        this.onChange(observation);
        this.changedSinceTaken = true;
        this.wake.abort();
      },
      live: (live) => {
        if (live !== this.isLive) this.log.debug({ live }, live ? 'lease feed is live' : 'lease feed is down; polling');
        this.isLive = live;
        this.wake.abort();
      },
    });
  }

  get live(): boolean {
    return this.isLive;
  }

  /** Whether a change arrived since the last call; clears the mark. */
  takeChange(): boolean {
    const changed = this.changedSinceTaken;
    this.changedSinceTaken = false;
    return changed;
  }

  /** Sleeps for `ms`, or until the feed reports a change or goes up or down. Rejects when `signal` aborts. */
  async sleep(clock: Clock, ms: number, signal: AbortSignal): Promise<void> {
    if (this.wake.signal.aborted) this.wake = new AbortController();
    const woken = this.wake.signal;
    try {
      await clock.sleep(ms, AbortSignal.any([signal, woken]));
    } catch (error) {
      if (signal.aborted) throw error;
    }
  }
}
