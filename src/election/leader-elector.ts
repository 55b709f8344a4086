import type { Logger } from 'pino';
import { abortReason, systemClock, type Clock } from '../util/clock.js';
import { withTimeout } from '../util/abort.js';
import { silentLogger } from '../util/logger.js';
import {
  JITTER_FACTOR,
  resolveElectionConfig,
  type LeaderElectionConfig,
  type LeaderElectionMetrics,
  type ResolvedElectionConfig,
} from './config.js';
import type { LeaderElectionRecord, Term } from './record.js';
import { LockConflictError, LockNotFoundError } from './resource-lock.js';

const noMetrics: LeaderElectionMetrics = {
  leaderOn: () => undefined,
  leaderOff: () => undefined,
  slowpathExercised: () => undefined,
};

/** Why a leadership term ended; carried by the aborted leader signal. */
export class LeadershipLostError extends Error {
  override readonly name = 'LeadershipLostError';
}

/**
 * A leader election client: a port of client-go's `tools/leaderelection` LeaderElector.
 *
 * Candidates share a lock record. The holder renews it every RetryPeriod; the others wait until they have
 * seen the record unchanged for the record's `leaseDurationSeconds` (measured on their own clock) and then
 * take it over with a compare-and-swap, incrementing `leaderTransitions`.
 *
 * Deliberate differences from client-go, each on the side of safety:
 * - Leadership ends RenewDeadline after the start of the last successful renewal, not RetryPeriod later.
 * - Leadership ends at once when a read shows another holder, instead of polling until the deadline.
 * - A renewal that lands under a new term (the record was recreated) ends the old term first, so every
 *   term reported through `onStartedLeading` has one fencing token.
 * - `onStoppedLeading` is called only after leading, and is awaited before the lease is released.
 * - Release checks the holder of the record it just read, not only the cached one.
 * - `leaseDurationSeconds` is rounded up, never down, from the configured milliseconds.
 */
export class LeaderElector {
  private readonly config: ResolvedElectionConfig;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly metrics: LeaderElectionMetrics;
  private readonly random: () => number;

  private observedRecord: LeaderElectionRecord | undefined;
  private observedRaw = '';
  private observedTime = 0;
  private reportedLeader: string | undefined;
  private currentTerm: Term | undefined;
  private lastRenewStart = 0;
  private running = false;

  constructor(config: LeaderElectionConfig) {
    this.config = resolveElectionConfig(config);
    this.clock = config.clock ?? systemClock;
    this.log = (config.logger ?? silentLogger).child({ lock: this.config.lock.describe(), identity: this.identity });
    this.metrics = config.metrics ?? noMetrics;
    this.random = config.random ?? Math.random;
    this.metrics.leaderOff(this.config.name);
  }

  /** The identity this elector campaigns as. */
  get identity(): string {
    return this.config.lock.identity();
  }

  /**
   * Campaigns until `signal` aborts. Acquires the lock, calls `onStartedLeading`, renews until renewal
   * fails or `signal` aborts, then calls `onStoppedLeading` (and releases, with `releaseOnCancel`).
   * Returns after one term unless `recampaign` is set.
   */
  async run(signal: AbortSignal): Promise<void> {
    if (this.running) throw new Error('LeaderElector.run is already running');
    this.running = true;
    try {
      do {
        if (!(await this.acquire(signal))) return;
        await this.lead(signal);
      } while (this.config.recampaign && !signal.aborted);
    } finally {
      this.running = false;
    }
  }

  /** True when the last observed record names this instance as holder. */
  isLeader(): boolean {
    return this.observedRecord?.holderIdentity === this.identity;
  }

  /** The holder of the last observed record, or `""` when none was observed yet. */
  getLeader(): string {
    return this.observedRecord?.holderIdentity ?? '';
  }

  /** The fencing token of the term this instance leads, if it leads. */
  term(): Term | undefined {
    return this.currentTerm;
  }

  /**
   * Wall-clock time at which the last successful acquire or renew started. The guarded work must stop
   * once RenewDeadline has passed since then, even if the elector has not yet noticed (a paused process).
   */
  lastRenewTime(): number {
    return this.lastRenewStart;
  }

  /** The configuration in force, with defaults applied. */
  get settings(): Readonly<ResolvedElectionConfig> {
    return this.config;
  }

  /**
   * Health check in the manner of client-go's HealthzAdaptor: an error only when this instance believes it
   * leads but has not renewed for longer than LeaseDuration + `maxTolerableExpiredMs`. Followers are healthy.
   */
  check(maxTolerableExpiredMs: number): Error | undefined {
    if (!this.isLeader()) return undefined;
    const sinceObservation = this.clock.now() - this.observedTime;
    if (sinceObservation > this.config.leaseDurationMs + maxTolerableExpiredMs) {
      return new Error(
        `failed to renew leadership on ${this.config.name}: last renewal ${sinceObservation} ms ago, ` +
          `lease duration ${this.config.leaseDurationMs} ms + tolerance ${maxTolerableExpiredMs} ms`,
      );
    }
    return undefined;
  }

  /**
   * One attempt to acquire the lock, or to renew it when held. Returns true on success. Never throws:
   * every failure is logged and answered with false, as in client-go.
   */
  async tryAcquireOrRenew(signal?: AbortSignal): Promise<boolean> {
    const { lock } = this.config;
    const now = this.clock.now();
    const desired: LeaderElectionRecord = {
      holderIdentity: this.identity,
      leaseDurationSeconds: Math.ceil(this.config.leaseDurationMs / 1000),
      acquireTime: now,
      renewTime: now,
      leaderTransitions: 0,
    };

    // 1. Fast path: the leader writes optimistically over the version it last saw, skipping the GET.
    //    Any failure (a conflict, a vanished record, a timeout) falls through to the careful path.
    if (this.isLeader() && this.isLeaseValid(now)) {
      const previous = this.observedRecord!;
      desired.acquireTime = previous.acquireTime;
      desired.leaderTransitions = previous.leaderTransitions;
      try {
        await this.request('update', signal, (s) => lock.update(desired, s));
        this.setObservedRecord(desired, now);
        return true;
      } catch (error) {
        this.log.debug({ err: error }, 'optimistic renewal failed, falling back to the slow path');
      }
    }

    // 2. Read the record; create it when there is none.
    let observation;
    try {
      observation = await this.request('get', signal, (s) => lock.get(s));
    } catch (error) {
      if (!(error instanceof LockNotFoundError)) {
        this.log.warn({ err: error }, 'failed to read the lock record');
        return false;
      }
      try {
        await this.request('create', signal, (s) => lock.create(desired, s));
      } catch (createError) {
        this.log.warn({ err: createError }, 'failed to create the lock record');
        return false;
      }
      this.setObservedRecord(desired, now);
      return true;
    }

    // 3. Restart the expiry countdown only when the record changed. Expiry is judged by when *we* saw the
    //    change, never by the remote renewTime, so skewed clocks cannot steal a healthy lease.
    if (observation.raw !== this.observedRaw) {
      this.setObservedRecord(observation.record);
      this.observedRaw = observation.raw;
    }
    const current = observation.record;
    // A live lease held by someone else is not ours to take. An empty holder (a release) is free at once.
    if (current.holderIdentity !== '' && this.isLeaseValid(now) && !this.isLeader()) {
      this.log.trace({ holder: current.holderIdentity }, 'lease is held and has not expired');
      return false;
    }

    // 4. Renewing keeps the acquire time and the term; taking over starts a new term.
    if (this.isLeader()) {
      desired.acquireTime = current.acquireTime;
      desired.leaderTransitions = current.leaderTransitions;
      this.metrics.slowpathExercised(this.config.name);
    } else {
      desired.leaderTransitions = current.leaderTransitions + 1;
    }

    // 5. Compare-and-swap on the version just read: of several racing candidates exactly one wins.
    try {
      await this.request('update', signal, (s) => lock.update(desired, s));
    } catch (error) {
      if (error instanceof LockConflictError) this.log.debug('lost the race to update the lock record');
      else this.log.warn({ err: error }, 'failed to update the lock record');
      return false;
    }
    this.setObservedRecord(desired, now);
    return true;
  }

  /**
   * Gives the lease up if this instance holds it: an empty holder and a 1 s duration, so that a follower
   * takes over within about one RetryPeriod instead of a full LeaseDuration. Transitions are kept.
   */
  async release(): Promise<boolean> {
    const { lock } = this.config;
    // A fresh deadline: the caller's signal is usually the one that was just cancelled.
    const deadline = AbortSignal.timeout(this.config.renewDeadlineMs);
    for (;;) {
      let current: LeaderElectionRecord;
      try {
        current = (await this.request('get', deadline, (s) => lock.get(s))).record;
      } catch (error) {
        this.log.warn({ err: error }, 'release: failed to read the lock record');
        return false;
      }
      if (!this.isLeader() || current.holderIdentity !== this.identity) return true;
      const now = this.clock.now();
      const released: LeaderElectionRecord = {
        holderIdentity: '',
        leaseDurationSeconds: 1,
        acquireTime: now,
        renewTime: now,
        leaderTransitions: current.leaderTransitions,
      };
      try {
        await this.request('update', deadline, (s) => lock.update(released, s));
        this.setObservedRecord(released);
        this.log.info('released the lease');
        return true;
      } catch (error) {
        // A conflict here usually means a renewal we abandoned landed after all: read again and retry.
        if (error instanceof LockConflictError && !deadline.aborted) continue;
        this.log.warn({ err: error }, 'release: failed to update the lock record');
        return false;
      }
    }
  }

  private async acquire(signal: AbortSignal): Promise<boolean> {
    this.log.info('attempting to acquire the leader lease');
    while (!signal.aborted) {
      const acquired = await this.tryAcquireOrRenew(signal);
      this.maybeReportTransition();
      if (acquired && !signal.aborted) {
        this.config.lock.recordEvent(`${this.identity} became leader`);
        this.metrics.leaderOn(this.config.name);
        this.log.info({ term: this.termFromObserved() }, 'acquired the leader lease');
        return true;
      }
      // Sliding jitter: the wait starts after the attempt, stretched by up to JITTER_FACTOR.
      const wait = this.config.retryPeriodMs * (1 + this.random() * JITTER_FACTOR);
      try {
        await this.clock.sleep(wait, signal);
      } catch {
        return false;
      }
    }
    return false;
  }

  private async lead(signal: AbortSignal): Promise<void> {
    const leadership = new AbortController();
    const onCancel = (): void => leadership.abort(abortReason(signal));
    signal.addEventListener('abort', onCancel, { once: true });
    const term = this.termFromObserved();
    this.currentTerm = term;
    const { callbacks } = this.config;
    Promise.resolve()
      .then(() => callbacks.onStartedLeading(leadership.signal, term))
      .catch((error: unknown) => this.log.error({ err: error }, 'onStartedLeading failed'));
    try {
      const reason = await this.renew(leadership.signal, term);
      leadership.abort(reason);
    } finally {
      signal.removeEventListener('abort', onCancel);
      this.currentTerm = undefined;
      this.metrics.leaderOff(this.config.name);
      this.config.lock.recordEvent(`${this.identity} stopped leading`);
      this.log.info({ term, reason: (leadership.signal.reason as Error).message }, 'stopped leading');
      try {
        await callbacks.onStoppedLeading();
      } catch (error) {
        this.log.error({ err: error }, 'onStoppedLeading failed');
      }
      if (this.config.releaseOnCancel) await this.release();
    }
  }

  /** Renews until a renewal misses its deadline or `signal` aborts; returns why leadership ended. */
  private async renew(signal: AbortSignal, term: Term): Promise<Error> {
    for (;;) {
      try {
        await this.clock.sleep(this.config.retryPeriodMs, signal);
      } catch {
        return abortReason(signal);
      }
      const deadline = this.lastRenewStart + this.config.renewDeadlineMs;
      // Every request of this round is cut off at the deadline, so a hung backend cannot stretch it.
      const round = new AbortController();
      const timer = new AbortController();
      const onCancel = (): void => round.abort(abortReason(signal));
      signal.addEventListener('abort', onCancel, { once: true });
      this.clock.sleep(deadline - this.clock.now(), timer.signal).then(
        () => round.abort(new LeadershipLostError('renew deadline reached')),
        () => undefined,
      );
      let renewed = false;
      try {
        while (!round.signal.aborted) {
          renewed = await this.tryAcquireOrRenew(round.signal);
          if (renewed) break;
          // Another holder behind a live lease will not let go within our deadline: stop now.
          if (!this.isLeader() && this.getLeader() !== '') break;
          try {
            await this.clock.sleep(this.config.retryPeriodMs, round.signal);
          } catch {
            break;
          }
        }
      } finally {
        timer.abort();
        signal.removeEventListener('abort', onCancel);
      }
      this.maybeReportTransition();
      if (signal.aborted) return abortReason(signal);
      if (!renewed) {
        this.metrics.renewFailed?.(this.config.name);
        const holder = this.getLeader();
        const reason =
          !this.isLeader() && holder !== ''
            ? `the lease is now held by ${holder}`
            : `no successful renewal within the renew deadline of ${this.config.renewDeadlineMs} ms`;
        this.log.warn({ term }, `failed to renew the lease: ${reason}`);
        return new LeadershipLostError(reason);
      }
      const renewedTerm = this.termFromObserved();
      if (renewedTerm.generation !== term.generation || renewedTerm.leaderTransitions !== term.leaderTransitions) {
        this.log.warn({ term, renewedTerm }, 'the lock record was recreated while leading; ending the old term');
        return new LeadershipLostError('the lock record was recreated under a new term');
      }
    }
  }

  private request<T>(what: string, signal: AbortSignal | undefined, call: (signal: AbortSignal) => Promise<T>): Promise<T> {
    return withTimeout(this.clock, this.config.requestTimeoutMs, signal, `lock ${what}`, call);
  }

  private isLeaseValid(now: number): boolean {
    const record = this.observedRecord;
    if (!record) return false;
    return this.observedTime + record.leaseDurationSeconds * 1000 > now;
  }

  private setObservedRecord(record: LeaderElectionRecord, attemptStart?: number): void {
    this.observedRecord = { ...record };
    this.observedTime = this.clock.now();
    if (attemptStart !== undefined && record.holderIdentity === this.identity) this.lastRenewStart = attemptStart;
  }

  private termFromObserved(): Term {
    const record = this.observedRecord!;
    return {
      holderIdentity: record.holderIdentity,
      generation: this.config.lock.generation(),
      leaderTransitions: record.leaderTransitions,
      acquireTime: record.acquireTime,
    };
  }

  private maybeReportTransition(): void {
    const holder = this.getLeader();
    if (this.observedRecord === undefined || holder === this.reportedLeader) return;
    this.reportedLeader = holder;
    const { callbacks } = this.config;
    if (!callbacks.onNewLeader) return;
    queueMicrotask(() => {
      try {
        callbacks.onNewLeader?.(holder);
      } catch (error) {
        this.log.error({ err: error }, 'onNewLeader failed');
      }
    });
  }
}
