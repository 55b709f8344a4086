import type { Logger } from 'pino';
import { abortReason, systemClock, type Clock } from '../util/clock.js';
import { deadline, withTimeout } from '../util/abort.js';
import { silentLogger } from '../util/logger.js';
import {
  JITTER_FACTOR,
  resolveElectionConfig,
  type LeaderElectionConfig,
  type LeaderElectionMetrics,
  type ResolvedElectionConfig,
} from './config.js';
import { serializeRecord, type LeaderElectionRecord, type LockObservation, type LockVersion, type Term } from './record.js';
import { LeaseFeed } from './lease-feed.js';
import { LockConflictError, LockNotFoundError } from './resource-lock.js';

/**
 * A follower with a live feed wakes this long after the observed expiry: a timer may fire up to a
 * millisecond early against `performance.now()` (Node counts timers in whole milliseconds of the event
 * loop's time), and an attempt a hair before expiry is a wasted round trip.
 */
const EXPIRY_MARGIN_MS = 5;
/** Upper bound of the deterministic per-identity delay before contending for a released lease. */
const MAX_RELEASE_STAGGER_MS = 20;

const noMetrics: LeaderElectionMetrics = {
  leaderOn: () => undefined,
  leaderOff: () => undefined,
  slowpathExercised: () => undefined,
};

/** Why a leadership term ended; carried by the aborted leader signal. */
export class LeadershipLostError extends Error {
  override readonly name = 'LeadershipLostError';
}

/** The last record this elector saw or wrote, the version to base the next write on, and when. */
interface Observed {
  record: LeaderElectionRecord;
  raw: string;
  version: LockVersion;
  /**
   * Monotonic time from which the lease counts: when a changed record arrived (a follower's view), or
   * when our own successful write was *sent* (a holder's view). Both err on the side of a shorter lease.
   */
  time: number;
  /** Why the stored record could not be decoded, if it could not. */
  damaged?: string;
}

/**
 * A leader election client: a port of client-go's `tools/leaderelection` LeaderElector.
 *
 * Candidates share a lock record. The holder renews it every RetryPeriod; the others wait until they have
 * seen the record unchanged for the record's `leaseDurationSeconds` (measured on their own clock) and then
 * take it over with a compare-and-swap, incrementing `leaderTransitions`.
 *
 * Renewal follows client-go: a round starts at once after acquiring and then RetryPeriod after the
 * previous round; each round retries every RetryPeriod and gives up RenewDeadline after *it* started.
 * So a leader can believe it leads for up to RetryPeriod + RenewDeadline after its last good renewal,
 * which is why the guarded work must also self-fence on `renewedWithin(RenewDeadline)` (see `Scheduler`).
 *
 * Time: every duration (a lease's expiry, the renew deadline, the self-fence, standing aside, the health
 * check) is measured on the clock's monotonic reading, as client-go measures them on the monotonic
 * reading that Go's `time.Now()` carries. The wall clock only stamps the record's `acquireTime` and
 * `renewTime`, which no decision reads: an NTP step or a jumped clock on one host moves no deadline. Like
 * Go's, the monotonic clock may stop while the host is suspended, so the holder's self-fence (`renewedWithin`)
 * also reads the wall clock and closes when either says RenewDeadline has passed: a leader resumed from a
 * suspend stops at once, as it would have with wall time alone.
 *
 * Deliberate differences from client-go, each on the side of safety:
 * - Every write is a compare-and-swap on the version of the very observation it was decided on. client-go
 *   writes over whatever object its lock cached last, so a read made after a term ended (a release's
 *   check) could turn a stale "I still hold it" into a successful write over a newer holder.
 * - A holder's own write counts from when it was sent, not when its reply arrived: a reply that arrives
 *   late (the process was frozen meanwhile) cannot make the lease look fresher than it is.
 * - The fast path (a write without a read) is only taken to renew a term in progress. After a term ends
 *   the elector forgets that it held the lease, and acquiring a record that still names this instance
 *   starts a new term (transitions + 1): no fencing token is ever handed to two terms.
 * - Leadership ends at once when a read shows another holder, instead of polling until the deadline.
 * - A renewal that lands under a new term (the record was recreated) ends the old term first, so every
 *   term reported through `onStartedLeading` has one fencing token.
 * - A stored record that cannot be decoded is treated as held by an unknown holder for the configured
 *   lease duration, then taken over under a new generation, instead of being refused forever.
 * - `onStoppedLeading` is called only after leading, and is awaited before the lease is released.
 * - Release checks the holder of the record it just read, not only the cached one.
 * - `leaseDurationSeconds` is rounded up, never down, from the configured milliseconds.
 * - `resign()` ends a term on the guarded work's request (it cannot do its job), releasing the lease.
 */
export class LeaderElector {
  private readonly config: ResolvedElectionConfig;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly metrics: LeaderElectionMetrics;
  private readonly random: () => number;

  private observed: Observed | undefined;
  private reportedLeader: string | undefined;
  private currentTerm: Term | undefined;
  private leadership: AbortController | undefined;
  /** Monotonic time at which the last successful acquire or renew started; -Infinity before the first. */
  private lastRenewStart = Number.NEGATIVE_INFINITY;
  /** The same start on the wall clock (the record's `renewTime`): the self-fence also reads it (see `renewedWithin`). */
  private lastRenewWall = Number.NEGATIVE_INFINITY;
  /** Monotonic time until which a resigner does not campaign. */
  private standAsideUntil = 0;
  private running = false;
  private readonly feed: LeaseFeed;
  /** A write based on the feed's record failed: read before trusting the feed again (until its next change). */
  private feedBehind = false;
  /**
   * The last write failed for a reason other than a lost race (a timeout, an unconfirmed write): it may
   * have landed, and the feed may echo it back. Wait a jittered RetryPeriod before the next attempt, as
   * client-go would, instead of answering the echo at once.
   */
  private backOff = false;
  private readonly releaseStaggerMs: number;

  constructor(config: LeaderElectionConfig) {
    this.config = resolveElectionConfig(config);
    this.clock = config.clock ?? systemClock;
    this.log = (config.logger ?? silentLogger).child({ lock: this.config.lock.describe(), identity: this.identity });
    this.metrics = config.metrics ?? noMetrics;
    this.random = config.random ?? Math.random;
    this.metrics.leaderOff(this.config.name);
    this.feed = new LeaseFeed((observation) => this.observeFeed(observation), this.log);
    this.releaseStaggerMs = staggerOf(this.identity, Math.min(MAX_RELEASE_STAGGER_MS, this.config.retryPeriodMs / 10));
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
    const feed = new AbortController();
    const stopFeed = (): void => feed.abort();
    signal.addEventListener('abort', stopFeed, { once: true });
    this.feed.start(this.config.lock, feed.signal);
    try {
      do {
        if (!(await this.acquire(signal))) return;
        await this.lead(signal);
      } while (this.config.recampaign && !signal.aborted);
    } finally {
      signal.removeEventListener('abort', stopFeed);
      feed.abort();
      this.running = false;
    }
  }

  /** True when the last observed record names this instance as holder. */
  isLeader(): boolean {
    return this.observed !== undefined && !this.observed.damaged && this.observed.record.holderIdentity === this.identity;
  }

  /** The holder of the last observed record, or `""` when none was observed yet. */
  getLeader(): string {
    return this.observed?.record.holderIdentity ?? '';
  }

  /**
   * Ends the current term on the guarded work's request, e.g. because it cannot do its job:
   * `onStoppedLeading` runs and the lease is released (with `releaseOnCancel`). Then, with `recampaign`,
   * this instance stands aside for a lease duration before campaigning again, so that a healthy candidate
   * (which polls at least every 2.2 × RetryPeriod) takes the released lease instead of the resigner
   * winning it straight back. Returns false when not leading.
   */
  resign(reason: string): boolean {
    if (!this.leadership || this.leadership.signal.aborted) return false;
    this.log.warn({ term: this.currentTerm, reason }, 'resigning the lease');
    this.standAsideUntil = this.clock.monotonic() + this.config.leaseDurationMs;
    this.leadership.abort(new LeadershipLostError(`resigned: ${reason}`));
    return true;
  }

  /** The fencing token of the term this instance leads, if it leads. */
  term(): Term | undefined {
    return this.currentTerm;
  }

  /**
   * True when the last successful acquire or renew started less than `ms` ago, on the monotonic clock.
   * The guarded work must stop once RenewDeadline has passed since then, even if the elector has not yet
   * noticed (a paused process): `renewedWithin(settings.renewDeadlineMs)` is that self-fence.
   */
  renewedWithin(ms: number): boolean {
    // The longer of the two readings: the monotonic one holds against a wall clock stepped back, the wall
    // one against a monotonic clock that stood still while the host was suspended (a resumed VM must not
    // think its lease fresh). Either may close the fence early, which only pauses the work until a renewal.
    const since = Math.max(this.clock.monotonic() - this.lastRenewStart, this.clock.now() - this.lastRenewWall);
    return since < ms;
  }

  /**
   * When the last successful acquire or renew started (0 before the first), as the wall clock reads now:
   * the monotonic time since then, taken back from `clock.now()`. A step of the wall clock moves it along,
   * so `clock.now() - lastRenewTime()` stays the true time since. For reports; fence with `renewedWithin`.
   */
  lastRenewTime(): number {
    if (this.lastRenewStart === Number.NEGATIVE_INFINITY) return 0;
    return this.clock.now() - (this.clock.monotonic() - this.lastRenewStart);
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
    const sinceObservation = this.clock.monotonic() - this.observed!.time;
    if (sinceObservation > this.config.leaseDurationMs + maxTolerableExpiredMs) {
      return new Error(
        `failed to renew leadership on ${this.config.name}: last renewal ${sinceObservation} ms ago, ` +
          `lease duration ${this.config.leaseDurationMs} ms + tolerance ${maxTolerableExpiredMs} ms`,
      );
    }
    return undefined;
  }

  /**
   * client-go's `tryAcquireOrRenew`: one attempt to acquire the lock, or to renew it when held; true on
   * success. Never throws: every failure is logged and answered with false, as in client-go. With `known`
   * (the record as a live feed last reported it) it decides on that instead of reading the record first.
   * Private, unlike client-go's: only `run`'s loops may call it, since a step from outside could take the
   * lease with no term behind it (no `onStartedLeading`, no renewals, no release).
   */
  private async attempt(signal: AbortSignal | undefined, known: LockObservation | undefined): Promise<boolean> {
    const { lock } = this.config;
    // The record is stamped with wall time, for people and tools; every decision below is on `now`.
    const timestamp = this.clock.now();
    const now = this.clock.monotonic();
    const desired: LeaderElectionRecord = {
      holderIdentity: this.identity,
      leaseDurationSeconds: Math.ceil(this.config.leaseDurationMs / 1000),
      acquireTime: timestamp,
      renewTime: timestamp,
      leaderTransitions: 0,
    };

    // 1. Fast path: the leader of a term in progress writes over the version it last saw, skipping the
    //    GET. Any failure (a conflict, a vanished record, a timeout) falls through to the careful path.
    if (this.currentTerm !== undefined && this.isLeader() && this.isLeaseValid(now)) {
      const base = this.observed!;
      desired.acquireTime = base.record.acquireTime;
      desired.leaderTransitions = base.record.leaderTransitions;
      try {
        const version = await this.request('update', signal, (s) => lock.update(desired, base.version, s));
        this.observeOwnWrite(desired, version, now);
        return true;
      } catch (error) {
        this.log.debug({ err: error }, 'optimistic renewal failed, falling back to the slow path');
      }
    }

    // 2. Read the record (unless a live feed just told us what it is); create it when there is none.
    let observation: LockObservation;
    try {
      observation = known ?? (await this.request('get', signal, (s) => lock.get(s)));
    } catch (error) {
      if (!(error instanceof LockNotFoundError)) {
        this.log.warn({ err: error }, 'failed to read the lock record');
        return false;
      }
      try {
        const version = await this.request('create', signal, (s) => lock.create(desired, s));
        this.observeOwnWrite(desired, version, now);
      } catch (createError) {
        if (!(createError instanceof LockConflictError)) this.backOff = true;
        this.log.warn({ err: createError }, 'failed to create the lock record');
        return false;
      }
      return true;
    }

    // 3. Restart the expiry countdown only when the record changed. Expiry is judged by when *we* saw the
    //    change, never by the remote renewTime, so skewed clocks cannot steal a healthy lease; and on our
    //    monotonic clock, so a step of our own wall clock cannot either.
    this.observe(observation);
    const current = observation.record;
    // Renewing is only for a term in progress: a record that still names us after our term ended is taken
    // over like a free one (only we write our identity), so the next term gets a token of its own.
    const renewing = this.currentTerm !== undefined && this.isLeader();
    // A damaged record's holder is unknown: someone may hold it, so it counts as held until it expires.
    const holder = observation.damaged ? undefined : current.holderIdentity;
    // A live lease held by someone else is not ours to take. An empty holder (a release) is free at once.
    if (holder !== '' && holder !== this.identity && this.isLeaseValid(now)) {
      this.log.trace({ holder: current.holderIdentity }, 'lease is held and has not expired');
      return false;
    }

    // 4. Renewing keeps the acquire time and the term; taking over starts a new term.
    if (renewing) {
      desired.acquireTime = current.acquireTime;
      desired.leaderTransitions = current.leaderTransitions;
      this.metrics.slowpathExercised(this.config.name);
    } else {
      desired.leaderTransitions = Number.isSafeInteger(current.leaderTransitions) ? current.leaderTransitions + 1 : 0;
    }

    // 5. Compare-and-swap on the version just read: of several racing candidates exactly one wins.
    try {
      const version = await this.request('update', signal, (s) => lock.update(desired, observation.version, s));
      this.observeOwnWrite(desired, version, now);
    } catch (error) {
      // The feed's record was not the latest after all: read before trusting it again.
      if (known) this.feedBehind = true;
      if (error instanceof LockConflictError) this.log.debug('lost the race to update the lock record');
      else {
        this.backOff = true;
        this.log.warn({ err: error }, 'failed to update the lock record');
      }
      return false;
    }
    if (observation.damaged) this.log.warn({ damage: observation.damaged }, 'took over a damaged lock record under a new generation');
    return true;
  }

  /**
   * Gives the lease up at the end of a term (`releaseOnCancel`) if this instance still holds it: an empty
   * holder and a 1 s duration, so that a follower takes over within about one RetryPeriod instead of a
   * full LeaseDuration. Transitions are kept. With `lastOwn` (our own last write in the term that just
   * ended) it first tries one compare-and-swap on it: unless someone wrote since (which the CAS refuses), a
   * graceful handover then costs one write instead of a read and a write. True when nothing is left held.
   */
  private async releaseAfter(lastOwn: Observed | undefined): Promise<boolean> {
    // A fresh deadline, on our clock: the caller's signal is usually the one that was just cancelled.
    const bound = deadline(this.clock, this.config.renewDeadlineMs, () => new LeadershipLostError('release deadline reached'));
    try {
      if (lastOwn) {
        try {
          await this.writeRelease(lastOwn.version, lastOwn.record.leaderTransitions, bound.signal);
          return true;
        } catch (error) {
          this.log.debug({ err: error }, 'release without a read failed; reading first');
        }
      }
      return await this.releaseBefore(bound.signal);
    } finally {
      bound.dispose();
    }
  }

  /** Writes the released record (empty holder, 1 s, transitions kept) over `base`. */
  private async writeRelease(base: LockVersion, leaderTransitions: number, signal: AbortSignal): Promise<void> {
    const timestamp = this.clock.now();
    const sentAt = this.clock.monotonic();
    const released: LeaderElectionRecord = { holderIdentity: '', leaseDurationSeconds: 1, acquireTime: timestamp, renewTime: timestamp, leaderTransitions };
    const version = await this.request('update', signal, (s) => this.config.lock.update(released, base, s));
    this.observeOwnWrite(released, version, sentAt);
    this.log.info('released the lease');
  }

  private async releaseBefore(deadline: AbortSignal): Promise<boolean> {
    for (;;) {
      let observation: LockObservation;
      try {
        observation = await this.request('get', deadline, (s) => this.config.lock.get(s));
      } catch (error) {
        if (error instanceof LockNotFoundError) return true;
        this.log.warn({ err: error }, 'release: failed to read the lock record');
        return false;
      }
      this.observe(observation);
      if (observation.damaged || observation.record.holderIdentity !== this.identity) return true;
      try {
        await this.writeRelease(observation.version, observation.record.leaderTransitions, deadline);
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
    const aside = this.standAsideUntil - this.clock.monotonic();
    if (aside > 0) {
      this.log.info({ forMs: aside }, 'standing aside after resigning');
      try {
        await this.clock.sleep(aside, signal);
      } catch {
        return false;
      }
    }
    this.log.info('attempting to acquire the leader lease');
    while (!signal.aborted) {
      const acquired = await this.attempt(signal, this.feedObservation());
      this.maybeReportTransition();
      if (acquired && !signal.aborted) {
        this.config.lock.recordEvent(`${this.identity} became leader`);
        this.metrics.leaderOn(this.config.name);
        this.log.info({ term: this.termFromObserved() }, 'acquired the leader lease');
        return true;
      }
      try {
        await this.waitForNextAttempt(signal);
      } catch {
        return false;
      }
    }
    return false;
  }

  /**
   * Between acquire attempts. Without a live feed: client-go's sliding jitter, RetryPeriod stretched by
   * up to JITTER_FACTOR. With one: until the observed lease expires (to the millisecond), or until the
   * feed reports a change; a release is contended for after a small per-identity stagger, so that with
   * many candidates the first writer's change usually reaches the others before they write too.
   */
  private async waitForNextAttempt(signal: AbortSignal): Promise<void> {
    const jitteredRetry = this.config.retryPeriodMs * (1 + this.random() * JITTER_FACTOR);
    if (this.backOff) {
      this.backOff = false;
      await this.clock.sleep(jitteredRetry, signal);
      this.feed.takeChange();
      return;
    }
    if (!this.feed.takeChange()) {
      const wait = this.feedObservation() ? this.untilExpiry() : jitteredRetry;
      await this.feed.sleep(this.clock, wait, signal);
      this.feed.takeChange();
    }
    const observed = this.feedObservation();
    if (observed && observed.record.holderIdentity === '' && !observed.damaged) await this.feed.sleep(this.clock, this.releaseStaggerMs, signal);
  }

  /** How long until the observed lease expires, plus the margin; 0 when it is free. */
  private untilExpiry(): number {
    const observed = this.observed!;
    if (observed.record.holderIdentity === '' && !observed.damaged) return 0;
    return Math.max(0, observed.time + this.leaseMs(observed) - this.clock.monotonic()) + EXPIRY_MARGIN_MS;
  }

  /** The record as the live feed last reported it, when it may stand in for a read. */
  private feedObservation(): LockObservation | undefined {
    if (!this.feed.live || this.feedBehind || !this.observed || this.currentTerm !== undefined) return undefined;
    const { record, raw, version, damaged } = this.observed;
    return { record, raw, version, ...(damaged ? { damaged } : {}) };
  }

  /** A change from the feed. A leader decides on its own renewals; only a candidate takes it in. */
  private observeFeed(observation: LockObservation): void {
    if (this.currentTerm !== undefined) return;
    this.feedBehind = false;
    this.observe(observation);
    this.maybeReportTransition();
  }

  private async lead(signal: AbortSignal): Promise<void> {
    const leadership = new AbortController();
    this.leadership = leadership;
    const onCancel = (): void => leadership.abort(abortReason(signal));
    // A cancel may land after the acquire's last look at the signal: an abort listener added to an aborted
    // signal never fires, and the term would renew (and its work run) until the process exits.
    if (signal.aborted) onCancel();
    else signal.addEventListener('abort', onCancel, { once: true });
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
      this.leadership = undefined;
      // What we last saw of our own lease is no basis for campaigning again (the next campaign reads); it
      // only lets the release try one write before it reads.
      const lastOwn = this.isLeader() ? this.observed : undefined;
      if (lastOwn) this.observed = undefined;
      this.metrics.leaderOff(this.config.name);
      this.config.lock.recordEvent(`${this.identity} stopped leading`);
      this.log.info({ term, reason: (leadership.signal.reason as Error).message }, 'stopped leading');
      try {
        await callbacks.onStoppedLeading();
      } catch (error) {
        this.log.error({ err: error }, 'onStoppedLeading failed');
      }
      if (this.config.releaseOnCancel) await this.releaseAfter(lastOwn);
    }
  }

  /**
   * Renews in rounds until one misses its deadline or `signal` aborts; returns why leadership ended. As in
   * client-go, the first round starts at once, each round gets the full RenewDeadline from its own start,
   * and the next one starts RetryPeriod after it ended.
   */
  private async renew(signal: AbortSignal, term: Term): Promise<Error> {
    for (let round = 0; ; round++) {
      if (round > 0) {
        try {
          await this.clock.sleep(this.config.retryPeriodMs, signal);
        } catch {
          return abortReason(signal);
        }
      }
      const renewed = await this.renewRound(signal);
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

  /** One renewal round: attempts every RetryPeriod until one succeeds, another holder shows, or RenewDeadline passes. */
  private async renewRound(signal: AbortSignal): Promise<boolean> {
    // Every request of the round is cut off at its deadline, so a hung backend cannot stretch it.
    const round = deadline(this.clock, this.config.renewDeadlineMs, () => new LeadershipLostError('renew deadline reached'), signal);
    try {
      while (!round.signal.aborted) {
        if (await this.attempt(round.signal, undefined)) return true;
        // Another holder behind a live lease will not let go within our deadline: stop now.
        if (!this.isLeader() && this.getLeader() !== '') return false;
        try {
          await this.clock.sleep(this.config.retryPeriodMs, round.signal);
        } catch {
          return false;
        }
      }
      return false;
    } finally {
      round.dispose();
    }
  }

  private request<T>(what: string, signal: AbortSignal | undefined, call: (signal: AbortSignal) => Promise<T>): Promise<T> {
    return withTimeout(this.clock, this.config.requestTimeoutMs, signal, `lock ${what}`, call);
  }

  private isLeaseValid(now: number): boolean {
    const observed = this.observed;
    if (!observed) return false;
    return observed.time + this.leaseMs(observed) > now;
  }

  /** The lease duration a record claims. A damaged record's own duration cannot be trusted: ours is used. */
  private leaseMs(observed: Observed): number {
    const seconds = observed.record.leaseDurationSeconds;
    return observed.damaged || !(seconds > 0) ? this.config.leaseDurationMs : seconds * 1000;
  }

  /** Takes in a read. The expiry countdown restarts only when the record changed; the version always moves on. */
  private observe(observation: LockObservation): void {
    const changed = observation.raw !== this.observed?.raw;
    if (changed && observation.damaged) this.log.warn({ damage: observation.damaged }, 'the lock record is damaged; it will be taken over once unchanged for a lease duration');
    this.observed = {
      record: { ...observation.record },
      raw: observation.raw,
      version: observation.version,
      time: changed ? this.clock.monotonic() : this.observed!.time,
      ...(observation.damaged ? { damaged: observation.damaged } : {}),
    };
  }

  /** Takes in our own successful write, counted from when it was sent (a monotonic reading). */
  private observeOwnWrite(record: LeaderElectionRecord, version: LockVersion, sentAt: number): void {
    this.observed = { record: { ...record }, raw: serializeRecord(record), version, time: sentAt };
    if (record.holderIdentity === this.identity) {
      this.lastRenewStart = sentAt;
      this.lastRenewWall = record.renewTime;
    }
  }

  private termFromObserved(): Term {
    const { record, version } = this.observed!;
    return {
      holderIdentity: record.holderIdentity,
      generation: version.generation,
      leaderTransitions: record.leaderTransitions,
      acquireTime: record.acquireTime,
    };
  }

  private maybeReportTransition(): void {
    const holder = this.getLeader();
    if (this.observed === undefined || holder === this.reportedLeader) return;
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

/** A fraction of `maxMs` fixed by the identity (FNV-1a), so that candidates contend in a stable order. */
function staggerOf(identity: string, maxMs: number): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < identity.length; i++) hash = Math.imul(hash ^ identity.charCodeAt(i), 0x01000193) >>> 0;
  return (hash / 0x1_0000_0000) * maxMs;
}
