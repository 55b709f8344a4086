import type { Redis } from 'ioredis';
import type { Clock } from '../util/clock.js';

/** The longest pause between two checks; a smaller limit checks 4 times within it. */
const MAX_CHECK_INTERVAL_MS = 1_000;
const MIN_CHECK_INTERVAL_MS = 25;

/**
 * Watches, for one term, whether the producer can reach Redis: `onLost` is called once a full
 * `limitMs` has passed without a successful round trip (the producer's own, or a PING sent when it has
 * been quiet for a check interval). It is called again only after Redis was reached in between. The
 * bound: `onLost` runs at most `limitMs` + one check interval (limit/4, at most 1 s) after the last
 * successful round trip, plus event-loop delay. Measured on the monotonic clock, so that a step of the
 * wall clock neither fakes an outage (which would make the leader resign) nor hides one.
 */
export class RedisReachability {
  /** Monotonic time of the last successful round trip. */
  private lastReached: number;
  private reported = false;
  private probe: Promise<void> | undefined;
  readonly intervalMs: number;

  constructor(
    private readonly redis: Redis,
    private readonly clock: Clock,
    private readonly limitMs: number,
    private readonly onLost: (unreachableForMs: number) => void,
  ) {
    this.lastReached = clock.monotonic();
    this.intervalMs = Math.max(MIN_CHECK_INTERVAL_MS, Math.min(MAX_CHECK_INTERVAL_MS, limitMs / 4));
  }

  /** A round trip to Redis succeeded just now. */
  reached(): void {
    this.lastReached = this.clock.monotonic();
    this.reported = false;
  }

  /** Checks every interval until `signal` aborts. */
  async watch(signal: AbortSignal): Promise<void> {
    this.reached();
    while (!signal.aborted) {
      await this.clock.sleep(this.intervalMs, signal).catch(() => undefined);
      if (signal.aborted) return;
      if (this.clock.monotonic() - this.lastReached >= this.intervalMs) this.ping();
      const unreachableForMs = this.clock.monotonic() - this.lastReached;
      if (unreachableForMs > this.limitMs && !this.reported) {
        this.reported = true;
        this.onLost(unreachableForMs);
      }
    }
  }

  /** One PING at a time: on a blackholed connection it may hang until the connection resets. */
  private ping(): void {
    this.probe ??= this.redis
      .ping()
      .then(() => this.reached())
      .catch(() => undefined)
      .finally(() => (this.probe = undefined));
  }
}
