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
