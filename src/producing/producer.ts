import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Term } from '../election/record.js';
import type { ScheduledJob } from '../scheduling/define-job.js';
import type { RunState } from '../scheduling/plan.js';
import { systemClock, type Clock } from '../util/clock.js';
import { measureClockOffset } from '../redis/authoritative-clock.js';
import { Coalescer } from '../util/coalescer.js';
import { DueTimer } from './due-timer.js';
import { directWrites, type WritePath } from '../redis/durability.js';
import { FencedEnqueue, retentionMs } from './fenced-enqueue.js';
import { JobLane } from './job-lane.js';
import type { RuntimeScheduleSource } from './runtime-schedules.js';
import { ScheduleLanes, type ScheduleLanesTerm, type TakeoverTally } from './schedule-lanes.js';
import { TakeoverWait } from './takeover-wait.js';
import { producerMetricsByType, type LaneTerm, type ProducerMetrics } from './lane-term.js';
import { TriggerDesk, type DeskTerm } from './manual-triggers.js';
import { BackfillDesk } from './backfills.js';
import type { QueueSet } from '../redis/queue-set.js';
import { RedisReachability } from '../redis/redis-reachability.js';
import { takeBackRemovedJob, takeBackRemovedJobs } from './removed-jobs.js';
import { RunTakeBack } from './staging.js';
import type { FencingToken, TickLedger } from '../ledger/tick-ledger.js';
import { backoffMs } from '../util/backoff.js';

/** Hooks for the producer's Prometheus metrics. */
export type CannotProduceReason = 'fence-refused' | 'redis-unreachable';

export interface ProducerOptions {
  redis: Redis;
  ledger: TickLedger;
  queues: QueueSet;
  /** The jobs loaded from the job files right now; read again after every `reload()`. */
  jobs: () => ReadonlyMap<string, ScheduledJob>;
  /**
   * The runtime schedules, read from Redis as they fall due (see ScheduleLanes); none when not given. Tell
   * the producer of changes with `schedulesChanged` and `schedulesMissed`.
   */
  schedules?: RuntimeScheduleSource;
  /**
   * How long before a runtime schedule's next tick (less the staging horizon) its lane is made; default
   * `REVIEW_LEAD_MS` (10 s). Shorter parks lanes sooner (tests); longer holds more of them.
   */
  scheduleReviewLeadMs?: number;
  /**
   * How many parked runtime schedules' marks a term keeps; default `PARKED_MARKS_KEPT` (10,000). A lane
   * whose marks were dropped is taken over from the ledger when it is due again.
   */
  parkedMarksKept?: number;
  /**
   * The local self-fence: false once RenewDeadline has passed since the last successful renewal. Checked
   * right before every claim and every BullMQ add, so a leader that was paused cannot enqueue before it
   * notices. While it is false the producer pauses (owed ticks stay owed, in order) and resumes once it
   * is true again (the elector renewed late); only the end of the term ends the run.
   */
  stillLeading: () => boolean;
  /**
   * Called when this leader cannot produce, so that it gives up the lease for a healthy instance:
   * `fence-refused` when the fence stands past this term (a newer term, or another holder with the same
   * token; the run then ends), `redis-unreachable` when no round trip to Redis succeeded for longer than
   * `unreachableLimitMs` during the term (called again only after Redis was reached in between).
   */
  onCannotProduce?: (reason: CannotProduceReason, detail: string) => void;
  /** How long Redis may be unreachable during a term before `onCannotProduce`; default 10 s (RenewDeadline). */
  unreachableLimitMs?: number;
  logger: Logger;
  clock?: Clock;
  metrics?: ProducerMetrics;
  /** Called once per term when every job loaded at its start has been taken over, with how long that took. */
  onTakenOver?: (jobs: number, ms: number) => void;
  /**
   * Pre-staging: how long before its due time a tick of an `overlap: 'allow'` job without a flow is
   * claimed and added to BullMQ as a delayed job, so that at the tick only BullMQ's promotion remains.
   * Default 0 (every tick is claimed and added when due); the scheduler's default is
   * `DEFAULT_STAGE_AHEAD_MS` (2 s).
   */
  stageAheadMs?: number;
  /**
   * How often the term stamps the fence as its proof of life while its self-fence is open (see pulse.lua);
   * default 1 s. Workers hold staged runs of a term whose last stamp is older than its RenewDeadline.
   */
  pulseIntervalMs?: number;
  /**
   * How the producer's writes to BullMQ's keys (adds, take-back pulls) are made durable: confirmed on
   * replicas on the durable topologies (`ReplicaWait` on the control connection), so that the ledger is
   * told `enqueued` or `skipped` only once a failover cannot lose the add or the pull (on Cluster BullMQ's
   * keys live on another node than the ledger's). Default: straight to Redis.
   */
  writes?: WritePath;
}

/** How often the producer re-reads Redis time and prunes the ledger. */
const CLOCK_RESYNC_MS = 60_000;
/** Setting up a term (clock sync, fence) is retried after this, doubling up to the maximum. */
const RESTART_BACKOFF_MS = 500;
const MAX_RESTART_BACKOFF_MS = 10_000;
/** How often a self-fenced producer looks at the self-fence again. */
const SELF_FENCE_POLL_MS = 100;
const DEFAULT_UNREACHABLE_LIMIT_MS = 10_000;
const DEFAULT_PULSE_INTERVAL_MS = 1_000;

/** The term as the producer and its lanes see it. */
interface ProducerTerm extends LaneTerm, DeskTerm, ScheduleLanesTerm {
  /** Set once the fence is raised, before any lane starts. */
  fencedAt: number;
  /** Ends the term's production (the elector's term may go on). */
  stop(): void;
  /** The runtime schedules' lanes of this term; undefined without runtime schedules. */
  readonly schedules: ScheduleLanes | undefined;
  /** Lanes told to stop (a job removed): they may still be taking back staged runs when the term ends. */
  readonly retired: JobLane[];
  /** The file jobs' lanes, by job name. */
  readonly fileLanes: Map<string, JobLane>;
}

/**
 * Enqueues every due tick of every job while this instance leads. One `run` is one leadership term: it
 * raises the fence to the term, then runs one {@link JobLane} per job, which finishes what an earlier
 * leader left claimed, catches up missed ticks per the job's policy, then fires ticks on time until the
 * term ends. Each tick is claimed in the fenced ledger before it is added to BullMQ with a deterministic
 * job id, so it is enqueued at most once by any number of leaders; a job's ticks are recorded in tick
 * order with no holes, so a term ending at any point leaves the next leader a correct watermark; and a
 * claimed tick is always finished by the next leader.
 */
export class Producer {
  private readonly clock: Clock;
  private readonly log: Logger;
  private offsetMs: number | undefined;
  /** The term producing now (or last). */
  private current: ProducerTerm | undefined;
  private wake: AbortController | undefined;
  /** The job files changed since the lanes were last reconciled. */
  private filesChanged = false;
  /** Runtime schedules written or removed since their lanes were last told, and whether the feed missed some. */
  private readonly changedSchedules = new Set<string>();
  private schedulesMissed = false;

  constructor(private readonly options: ProducerOptions) {
    this.clock = options.clock ?? systemClock;
    this.log = options.logger.child({ component: 'producer' });
  }

  /**
   * The authoritative time in whole ms: Redis' clock as the last `TIME` sample put it on the local
   * monotonic clock (see authoritative-clock.ts). Until the first sample, the local wall clock.
   */
  now(): number {
    return Math.floor(this.offsetMs === undefined ? this.clock.now() : this.clock.monotonic() + this.offsetMs);
  }

  /** Picks up changed job files at once (hot reload): every lane reads its definition again. */
  reload(): void {
    this.filesChanged = true;
    this.wake?.abort();
  }

  /** Runtime schedules `ids` were written or removed: their lanes follow at once (one upsert wakes one lane). */
  schedulesChanged(ids: Iterable<string>): void {
    // Not producing: nothing to tell, and nothing kept (a term starts from the due index, where every write made its schedule due).
    if (!this.producing) return;
    for (const id of ids) this.changedSchedules.add(id);
    this.wake?.abort();
  }

  /** The schedule feed may have missed changes: every schedule lane reads its spec again, and the due index is read afresh. */
  schedulesResync(): void {
    if (!this.producing) return;
    this.schedulesMissed = true;
    this.wake?.abort();
  }

  /** The job files or runtime schedules changed since the lanes were last told. */
  private get changesPending(): boolean {
    return this.filesChanged || this.schedulesMissed || this.changedSchedules.size > 0;
  }

  private get producing(): boolean {
    return this.current !== undefined && !this.current.signal.aborted;
  }

  /**
   * How many lanes the current term holds: one per file job, and one per runtime schedule due soon (the
   * others wait in the due index); and how many parked schedules' marks it keeps. Zeros between terms.
   */
  laneCounts(): { files: number; schedules: number; parked: number } {
    const term = this.current;
    if (!term || term.signal.aborted) return { files: 0, schedules: 0, parked: 0 };
    return { files: term.fileLanes.size, schedules: term.schedules?.size ?? 0, parked: term.schedules?.parkedSize ?? 0 };
  }

  /** Produces for one term until `signal` aborts, or until the fence shows the term is over. */
  async run(term: Term, signal: AbortSignal): Promise<void> {
    const term$ = new AbortController();
    const stop = (): void => term$.abort();
    signal.addEventListener('abort', stop, { once: true });
    const token: FencingToken = { generation: term.generation, leaderTransitions: term.leaderTransitions };
    const log = this.log.child({ term: token });
    const limitMs = this.options.unreachableLimitMs ?? DEFAULT_UNREACHABLE_LIMIT_MS;
    const reachability = new RedisReachability(this.options.redis, this.clock, limitMs, (unreachableForMs) => {
      log.error({ unreachableForMs, limitMs }, 'Redis unreachable for longer than the limit: this leader cannot produce');
      this.options.onCannotProduce?.('redis-unreachable', `no round trip to Redis succeeded for ${unreachableForMs} ms (limit ${limitMs} ms)`);
    });
    const watching = this.options.onCannotProduce ? reachability.watch(term$.signal) : Promise.resolve();
    const context = this.termContext(token, term$, log, reachability);
    try {
      if (await this.setUp(context, term.holderIdentity)) await this.produce(context);
    } finally {
      signal.removeEventListener('abort', stop);
      term$.abort();
      await watching;
      log.info('producer stopped');
    }
  }

  /**
   * Syncs the clock and raises the fence, retrying while Redis is unreachable (a restart, a failover).
   * False when the term ended first, or the fence is already past this term.
   */
  private async setUp(context: ProducerTerm, holder: string): Promise<boolean> {
    for (let attempt = 0; !context.signal.aborted; attempt++) {
      try {
        await this.syncClock();
        context.reached();
        if (!(await context.waitLeading())) return false;
        const fencedAt = this.now();
        const raised = await this.options.ledger.raiseFence(context.token, holder, fencedAt);
        context.reached();
        if (raised.ok) {
          context.fencedAt = fencedAt;
          context.log.info('fence raised; producing');
          return true;
        }
        context.log.error({ fence: raised.fence }, 'the fence is already past this term; not producing');
        this.options.metrics?.fenced(1);
        this.options.onCannotProduce?.('fence-refused', `the fence stands at ${raised.fence.generation}/${raised.fence.leaderTransitions}`);
        return false;
      } catch (error) {
        if (context.signal.aborted) return false;
        const retryInMs = backoffMs(attempt, RESTART_BACKOFF_MS, MAX_RESTART_BACKOFF_MS);
        context.log.error({ err: error, retryInMs }, 'could not start producing; retrying');
        await this.clock.sleep(retryInMs, context.signal).catch(() => undefined);
      }
    }
    return false;
  }

  /**
   * Runs one lane per file job and, through ScheduleLanes, one per runtime schedule due soon; keeps them
   * in step with the definitions, and maintains the ledger.
   */
  private async produce(context: ProducerTerm): Promise<void> {
    const lanes = context.fileLanes;
    /** Brings the file jobs' lanes in step with the job files. */
    const reconcile = (takeover?: TakeoverTally): void => {
      const jobs = this.options.jobs();
      for (const [name, lane] of [...lanes]) {
        if (jobs.has(name)) {
          lane.wake();
          continue;
        }
        lanes.delete(name);
        context.retireLane(lane);
      }
      for (const name of jobs.keys()) {
        if (lanes.has(name)) continue;
        const started = new JobLane(name, context, takeover ? { onTakenOver: takeover.expect() } : {});
        lanes.set(name, started);
        started.start();
      }
    };
    // Manual triggers (`leasebeat trigger`) and backfills run beside the lanes, under the same term and fence;
    // a backfill's notice on the trigger stream starts it at once.
    const backfillDesk = new BackfillDesk(this.options.redis, this.options.ledger.keys, context, this.options.queues);
    const backfills = backfillDesk.run().catch((error: unknown) => context.log.error({ err: error }, 'backfill desk failed'));
    const desk = new TriggerDesk(
      this.options.redis,
      this.options.ledger.keys,
      context,
      (job) => {
        lanes.get(job)?.paused();
        context.schedules?.lane(job)?.paused();
      },
      () => backfillDesk.requested(),
    )
      .run()
      .catch((error: unknown) => context.log.error({ err: error }, 'trigger desk failed'));
    const pulse = this.pulse(context);
    let sweep: Promise<void> = Promise.resolve();
    // The term starts from every job and schedule: what changed before it is part of that.
    this.filesChanged = false;
    this.changedSchedules.clear();
    this.schedulesMissed = false;
    // Once every job (and every schedule due at the start) is taken over, the staged runs of jobs this
    // leader did not load are taken back.
    const takeover = this.takeoverTally(context, () => (sweep = this.sweepRemovedJobs(context)));
    const scanning = context.schedules?.run(takeover) ?? Promise.resolve();
    try {
      reconcile(takeover);
      // Without runtime schedules the file lanes are all the takeover waits for: sealed once they are made
      // (the schedules' scan seals it itself, after its first read).
      if (!context.schedules) takeover.seal();
      let nextResync = this.clock.monotonic() + CLOCK_RESYNC_MS;
      while (!context.signal.aborted) {
        this.wake = new AbortController();
        // Changes told while the last ones were being followed (an await) aborted the controller before
        // this one: follow them now, not a resync interval later.
        if (!this.changesPending) await this.clock.sleep(nextResync - this.clock.monotonic(), AbortSignal.any([context.signal, this.wake.signal])).catch(() => undefined);
        if (context.signal.aborted) break;
        if (this.changesPending) {
          await this.followChanges(context, reconcile, lanes.size);
          continue;
        }
        await this.maintain(context, lanes.keys()).catch((error: unknown) => context.log.warn({ err: error }, 'clock sync or ledger pruning failed'));
        nextResync = this.clock.monotonic() + CLOCK_RESYNC_MS;
      }
    } finally {
      context.stop();
      // Lanes end at their next check of the term; an add already on the wire may still land, which is
      // why the next term finishes every pending claim with the same job id.
      const running = [...context.retired, ...lanes.values(), ...(context.schedules?.lanesNow() ?? [])];
      await Promise.allSettled([desk, backfills, pulse, sweep, scanning, ...running.map((lane) => lane.settled())]);
    }
  }

  /** Tells the lanes what changed since they were last told: the job files, runtime schedules. */
  private async followChanges(context: ProducerTerm, reconcile: () => void, fileLanes: number): Promise<void> {
    const files = this.filesChanged;
    if (files) {
      this.filesChanged = false;
      reconcile();
      context.log.info({ jobs: fileLanes }, 'job files reloaded');
    }
    const schedules = context.schedules;
    if (!schedules) return;
    const missed = this.schedulesMissed;
    const ids = [...this.changedSchedules];
    this.schedulesMissed = false;
    this.changedSchedules.clear();
    try {
      // Each schedule's lane is compiled again against the new job types.
      if (files) await schedules.filesChanged();
      if (missed) await schedules.resync();
      if (ids.length > 0) await schedules.changed(ids);
      if (ids.length > 0) context.log.debug({ changed: ids.length, lanes: schedules.size }, 'schedules changed');
    } catch (error) {
      if (context.signal.aborted) return;
      // Told again on the next wake-up, which comes after the backoff.
      this.filesChanged ||= files;
      this.schedulesMissed ||= missed;
      for (const id of ids) this.changedSchedules.add(id);
      context.log.warn({ err: error, retryInMs: RESTART_BACKOFF_MS }, 'could not read changed runtime schedules; retrying');
      await context.timer.nap(RESTART_BACKOFF_MS).done;
      this.wake?.abort();
    }
  }

  /**
   * Stamps the fence every `pulseIntervalMs` while the self-fence is open: the term's proof of life, without
   * which workers hold the runs it staged (stagedRunMayStart.lua). Ends with the term.
   */
  private async pulse(context: ProducerTerm): Promise<void> {
    const intervalMs = this.options.pulseIntervalMs ?? DEFAULT_PULSE_INTERVAL_MS;
    while (!context.signal.aborted) {
      if (context.leading()) {
        try {
          if (!(await this.options.ledger.pulse(context.token))) return context.fenced();
          context.reached();
        } catch (error) {
          context.log.debug({ err: error }, 'could not stamp the fence; trying again');
        }
      }
      await context.timer.nap(intervalMs).done;
    }
  }

  /**
   * Counts the lanes of the term's start (the file jobs', and the runtime schedules' of the first scan):
   * once the count is sealed and every one has taken its job over, the takeover is logged and reported,
   * then `then` is called.
   */
  private takeoverTally(context: ProducerTerm, then: () => void): TakeoverTally {
    const started = this.clock.monotonic();
    const tally = new TakeoverWait();
    void tally.done.then(() => {
      if (context.signal.aborted) return;
      const ms = this.clock.monotonic() - started;
      context.log.info({ jobs: tally.expected, ms }, 'every job taken over');
      this.options.onTakenOver?.(tally.expected, ms);
      then();
    });
    return tally;
  }

  /** Takes back the staged runs of jobs this leader did not load (see takeBackRemovedJobs), retrying until the term ends. */
  private async sweepRemovedJobs(context: ProducerTerm): Promise<void> {
    for (let attempt = 0; !context.signal.aborted; attempt++) {
      try {
        const takenBack = await takeBackRemovedJobs(context, this.options.jobs(), this.options.schedules);
        if (takenBack > 0) context.log.info({ takenBack }, 'took back the staged runs of jobs no longer loaded');
        return;
      } catch (error) {
        if (context.signal.aborted) return;
        const retryInMs = backoffMs(attempt, RESTART_BACKOFF_MS, MAX_RESTART_BACKOFF_MS);
        context.log.warn({ err: error, retryInMs }, 'could not take back the staged runs of jobs no longer loaded; retrying');
        await context.timer.nap(retryInMs).done;
      }
    }
  }

  /** The term as its lanes see it. */
  private termContext(token: FencingToken, term$: AbortController, log: Logger, reachability: RedisReachability): ProducerTerm {
    let pause: Promise<boolean> | undefined;
    let fenced = false;
    const pauseUntilRenewed = async (): Promise<boolean> => {
      log.warn('renew deadline passed without a renewal: pausing enqueues until the lease is renewed or the term ends');
      while (!term$.signal.aborted) {
        await this.clock.sleep(SELF_FENCE_POLL_MS, term$.signal).catch(() => undefined);
        if (!term$.signal.aborted && this.options.stillLeading()) {
          log.info('the lease was renewed: enqueuing again');
          return true;
        }
      }
      return false;
    };
    const leading = (): boolean => !term$.signal.aborted && this.options.stillLeading();
    const { ledger } = this.options;
    const stageAheadMs = this.options.stageAheadMs ?? 0;
    let schedules: ScheduleLanes | undefined;
    const job = (name: string): ScheduledJob | undefined => this.options.jobs().get(name) ?? schedules?.job(name);
    const takeOvers = new Coalescer(async (names: string[]) => {
      // Runs are staged up to the horizon (plus their jitter) ahead of their due time: earlier terms' staged
      // runs, whether due yet or not, lie within that of the watermark.
      const readAt = this.now();
      const states = await ledger.takeOverStates(names.map((name) => ({ job: name, stagedWithinMs: stageAheadMs + (job(name)?.maxJitterMs ?? 0) })), readAt);
      return states.map((state) => ({ ...state, readAt }));
    });
    const reviews = new Coalescer(async (entries: Array<{ job: string; revision: string }>) => {
      const marked = await ledger.markReviewed(
        token,
        entries.map((entry) => entry.job),
        entries.map((entry) => entry.revision),
      );
      return entries.map(() => marked);
    });
    const writes = this.options.writes ?? directWrites(this.options.redis);
    const metrics = this.options.metrics && producerMetricsByType(this.options.metrics, (name) => job(name)?.type ?? name);
    const enqueue = new FencedEnqueue({ ledger, queues: this.options.queues, token, leading, now: () => this.now(), writes });
    const retired: JobLane[] = [];
    const context: ProducerTerm = {
      token,
      signal: term$.signal,
      log,
      ledger,
      clock: this.clock,
      timer: new DueTimer(this.clock, term$.signal),
      enqueue,
      stageAheadMs,
      fencedAt: Infinity,
      takeBack: new RunTakeBack({
        writes,
        redis: this.options.redis,
        ledger,
        queues: this.options.queues,
        onTakenBack: (name, reason) => metrics?.skipped(name, reason, 1),
      }),
      metrics,
      now: () => this.now(),
      job,
      resolveJob: async (name) => {
        const known = job(name);
        if (known || !this.options.schedules || this.options.jobs().has(name)) return known;
        const [stored] = await this.options.schedules.load([name]);
        return stored?.job;
      },
      get schedules() {
        return schedules;
      },
      replacedVersions: async (name) => (this.options.schedules && !this.options.jobs().has(name) ? this.options.schedules.replaced(name) : []),
      forgetReplaced: async (name, endedAt) => this.options.schedules?.forgetPrevious(name, endedAt),
      retired,
      fileLanes: new Map(),
      startLane: (lane) => lane.start(),
      retireLane: (lane) => {
        lane.stop();
        retired.push(lane);
      },
      leading,
      waitLeading: () => {
        if (term$.signal.aborted) return Promise.resolve(false);
        if (this.options.stillLeading()) return Promise.resolve(true);
        // Every lane waits on the same pause: one warning, one poll.
        pause ??= pauseUntilRenewed().finally(() => (pause = undefined));
        return pause;
      },
      takeOverState: (job) => takeOvers.call(job),
      markReviewed: (job, revision = '') => reviews.call({ job, revision }),
      takeBackRemoved: (job, queue) => takeBackRemovedJob(context, job, this.options.jobs(), queue),
      previousRun: (job) => this.previousRun(job),
      stopPreviousRun: async (job, how, byTick) => {
        const { lastJobId } = await ledger.jobState(job.name);
        return !lastJobId || ledger.requestRunStop(token, { jobId: lastJobId, how, byTick });
      },
      reached: () => reachability.reached(),
      fenced: () => {
        this.options.metrics?.fenced(1);
        term$.abort();
        // Several lanes may meet the fence at once: one report per term.
        if (fenced) return;
        fenced = true;
        log.error('a write was rejected by the fence: a newer term exists; stopping the producer');
        this.options.onCannotProduce?.('fence-refused', 'a write was rejected by the fence: a newer term exists');
      },
      stop: () => term$.abort(),
    };
    if (this.options.schedules) schedules = new ScheduleLanes(this.options.schedules, context, this.options.scheduleReviewLeadMs, this.options.parkedMarksKept);
    this.current = context;
    return context;
  }

  /**
   * The state of the job's newest run: the one named by `lastJobId`, set when it was claimed. A run
   * claimed but not in BullMQ yet (its term may still add it, or the next term will) counts as waiting;
   * one recorded as enqueued but gone from BullMQ (removeOnComplete) has finished.
   */
  private async previousRun(job: ScheduledJob): Promise<RunState> {
    const { lastJobId, lastJobTick } = await this.options.ledger.jobState(job.name);
    if (!lastJobId) return 'none';
    const state = await this.options.queues.get(job.queue).getJobState(lastJobId);
    switch (state) {
      case 'active':
        return 'active';
      case 'delayed':
        return 'delayed';
      case 'waiting':
      case 'waiting-children':
      case 'prioritized':
        return 'waiting';
      case 'unknown': {
        const recorded = lastJobTick === undefined ? undefined : await this.options.ledger.tickRecord(job.name, lastJobTick);
        return recorded?.kind === 'claimed' ? 'waiting' : 'finished';
      }
      default:
        return 'finished';
    }
  }

  /** Syncs the clock, and prunes the ledger of the jobs with a lane (a parked schedule's is pruned when it parks). */
  private async maintain(context: ProducerTerm, fileLanes: Iterable<string>): Promise<void> {
    await this.syncClock();
    for (const name of [...fileLanes, ...(context.schedules?.ids() ?? [])]) {
      const job = context.job(name);
      if (job) await this.options.ledger.prune(name, this.now() - retentionMs(job));
    }
    context.reached();
  }

  private async syncClock(): Promise<void> {
    const sync = await measureClockOffset(this.options.redis, this.clock);
    this.offsetMs = sync.offsetMs;
    this.log.debug(sync, 'synchronised with Redis TIME');
  }
}
