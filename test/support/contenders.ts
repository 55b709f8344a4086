import { setTimeout as sleep } from 'node:timers/promises';
import type { LeaderElectionConfig } from '../../src/election/config.js';
import { LeaderElector } from '../../src/election/leader-elector.js';
import type { ResourceLock } from '../../src/election/resource-lock.js';
import { until } from './until.js';

/** One running elector, with when it last started leading and how many terms it began. */
export interface Contender {
  elector: LeaderElector;
  ledAt: number;
  terms: number;
  /** Cancels its run (releasing the lease) and waits for the run to end. */
  stop(): Promise<void>;
}

/** Starts an elector on `lock` that releases on cancel, and records its terms. */
export function contend(lock: ResourceLock, timing: Pick<LeaderElectionConfig, 'leaseDurationMs' | 'renewDeadlineMs' | 'retryPeriodMs'>): Contender {
  const controller = new AbortController();
  const contender: Contender = { ledAt: 0, terms: 0, stop: () => Promise.resolve(), elector: undefined as unknown as LeaderElector };
  contender.elector = new LeaderElector({
    lock,
    ...timing,
    releaseOnCancel: true,
    callbacks: {
      onStartedLeading: () => {
        contender.ledAt = Date.now();
        contender.terms++;
      },
      onStoppedLeading: () => undefined,
    },
  });
  const run = contender.elector.run(controller.signal);
  contender.stop = async () => {
    controller.abort();
    await run;
  };
  return contender;
}

/**
 * A leader on `leaderLock` and, once it leads, a follower on `followerLock` that has followed it for
 * `followForMs`: the starting point of every takeover test.
 */
export async function leaderAndFollower(
  leaderLock: ResourceLock,
  followerLock: ResourceLock,
  timing: Pick<LeaderElectionConfig, 'leaseDurationMs' | 'renewDeadlineMs' | 'retryPeriodMs'>,
  followForMs: number,
): Promise<{ leader: Contender; follower: Contender }> {
  const leader = contend(leaderLock, timing);
  await until('the first candidate to lead', () => leader.elector.isLeader());
  const follower = contend(followerLock, timing);
  await sleep(followForMs);
  return { leader, follower };
}

/**
 * A RetryPeriod so long that a follower which polled would not try again for 10 s after its first try:
 * a takeover well inside that can only have been woken by the lock's change feed, however loaded the
 * machine is.
 */
export const slowPollTiming = { leaseDurationMs: 40_000, renewDeadlineMs: 30_000, retryPeriodMs: 10_000 };

/**
 * Starts a leader and a follower on `slowPollTiming`, waits for `followerReady`, has the leader release,
 * and answers how many ms after the release began the follower led.
 */
export async function takeoverAfterRelease(leaderLock: ResourceLock, followerLock: ResourceLock, followerReady: () => Promise<boolean> | boolean): Promise<number> {
  const { leader, follower } = await leaderAndFollower(leaderLock, followerLock, slowPollTiming, 0);
  await until('the follower to be on its change feed', followerReady);
  const releasedAt = Date.now();
  await leader.stop();
  await until('the follower to lead', () => follower.ledAt > 0);
  await follower.stop();
  return follower.ledAt - releasedAt;
}
