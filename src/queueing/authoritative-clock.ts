import type { Redis } from 'ioredis';
import type { Clock } from '../util/clock.js';

/** The local clock corrected to Redis `TIME`, so that every leader computes due ticks from one clock. */
export interface ClockSync {
  /** Redis time minus local time, in ms. */
  offsetMs: number;
  /** Half the round trip of the best sample: the measured bound on the error of `offsetMs`. */
  errorBoundMs: number;
}

/** Samples Redis `TIME` a few times and keeps the sample with the shortest round trip. */
export async function measureClockOffset(redis: Redis, clock: Clock, samples = 3): Promise<ClockSync> {
  let best: ClockSync | undefined;
  for (let i = 0; i < samples; i++) {
    const before = clock.now();
    const [seconds, micros] = await redis.time();
    const after = clock.now();
    const redisMs = Number(seconds) * 1000 + Number(micros) / 1000;
    const sample = { offsetMs: redisMs - (before + after) / 2, errorBoundMs: (after - before) / 2 };
    if (!best || sample.errorBoundMs < best.errorBoundMs) best = sample;
  }
  return best!;
}
