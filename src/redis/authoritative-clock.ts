import type { Redis } from 'ioredis';
import type { Clock } from '../util/clock.js';

/**
 * Redis `TIME` as a reading of this process' monotonic clock, so that every leader computes due ticks
 * from one clock (Redis'), and a step of this host's wall clock (NTP, a resumed VM) moves no tick: the
 * authoritative time is `clock.monotonic() + offsetMs`, re-synced from time to time.
 */
export interface ClockSync {
  /** Redis time minus the local monotonic reading, in whole ms. */
  offsetMs: number;
  /** Half the round trip of the best sample: the measured bound on the error of `offsetMs`. */
  errorBoundMs: number;
}

/** Samples Redis `TIME` a few times and keeps the sample with the shortest round trip. */
export async function measureClockOffset(redis: Redis, clock: Clock, samples = 3): Promise<ClockSync> {
  let best: ClockSync | undefined;
  for (let i = 0; i < samples; i++) {
    const before = clock.monotonic();
    const [seconds, micros] = await redis.time();
    const after = clock.monotonic();
    const redisMs = Number(seconds) * 1000 + Number(micros) / 1000;
    // Whole milliseconds: every instant the producer derives from the offset (now, due ticks, catch-up
    // bounds) stays an integer like the ticks themselves. Rounding adds at most 0.5 ms to the error.
    const sample = { offsetMs: Math.round(redisMs - (before + after) / 2), errorBoundMs: (after - before) / 2 + 0.5 };
    if (!best || sample.errorBoundMs < best.errorBoundMs) best = sample;
  }
  return best!;
}
