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
import type { LaneTerm, ProducerMetrics } from './lane-term.js';
import { TriggerDesk, type DeskTerm } from './manual-triggers.js';
import type { QueueSet } from '../redis/queue-set.js';
import { RedisReachability } from '../redis/redis-reachability.js';
import { takeBackRemovedJobs } from './removed-jobs.js';
import { RunTakeBack } from './staging.js';
import type { FencingToken, TickLedger } from '../ledger/tick-ledger.js';

/** Hooks for the producer's Prometheus metrics. */
export type CannotProduceReason = 'fence-refused' | 'redis-unreachable';

export interface ProducerOptions {
  redis: Redis;
  ledger: TickLedger;
  queues: QueueSet;
  /** The jobs loaded right now; read again after every `reload()`. */
  jobs: () => ReadonlyMap<string, ScheduledJob>;
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
interface ProducerTerm extends LaneTerm, DeskTerm {
  /** Ends the term's production (the elector's term may go on). */
  stop(): void;
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
  private wake: AbortController | undefined;
  /** What `reload` asked for since the lanes were last reconciled: every job, or these names. */
  private reloadAll = false;
  private readonly reloadNames = new Set<string>();

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

  /**
   * Picks up changed job definitions at once (hot reload): every job's, or only those of `names` (a
   * runtime schedule written or removed), so that one upsert among 100,000 schedules wakes one lane.
   */
  reload(names?: Iterable<string>): void {
    if (names === undefined) this.reloadAll = true;
    else if (!this.reloadAll) for (const name of names) this.reloadNames.add(name);
    this.wake?.abort();
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
        const raised = await this.options.ledger.raiseFence(context.token, holder, this.now());
        context.reached();
        if (raised.ok) {
          context.log.info('fence raised; producing');
          return true;
        }
        context.log.error({ fence: raised.fence }, 'the fence is already past this term; not producing');
        this.options.metrics?.fenced(1);
        this.options.onCannotProduce?.('fence-refused', `the fence stands at ${raised.fence.generation}/${raised.fence.leaderTransitions}`);
        return false;
      } catch (error) {
        if (context.signal.aborted) return false;
        const retryInMs = Math.min(RESTART_BACKOFF_MS * 2 ** attempt, MAX_RESTART_BACKOFF_MS);
        context.log.error({ err: error, retryInMs }, 'could not start producing; retrying');
        await this.clock.sleep(retryInMs, context.signal).catch(() => undefined);
      }
    }
    return false;
  }

  /** Runs one lane per job, keeps the lanes in step with the job definitions, and maintains the ledger. */
  private async produce(context: ProducerTerm): Promise<void> {
    const lanes = new Map<string, JobLane>();
    /** Lanes of removed jobs: they may still be taking back staged runs when the term ends. */
    const stopped: JobLane[] = [];
    const reconcileOne = (name: string, jobs: ReadonlyMap<string, ScheduledJob>, onTakenOver?: () => void): void => {
      const lane = lanes.get(name);
      if (lane && jobs.has(name)) return lane.wake();
      if (lane) {
        lane.stop();
        lanes.delete(name);
        stopped.push(lane);
        return;
      }
      if (!jobs.has(name)) return;
      const started = new JobLane(name, context, onTakenOver);
      lanes.set(name, started);
      started.start();
    };
    /** Brings the lanes in step with the jobs: all of them, or only the names a reload named. */
    const reconcile = (onTakenOver?: () => void, only?: Iterable<string>): void => {
      const jobs = this.options.jobs();
      if (only) {
        for (const name of only) reconcileOne(name, jobs);
        return;
      }
      for (const name of [...lanes.keys()]) reconcileOne(name, jobs);
      for (const name of jobs.keys()) if (!lanes.has(name)) reconcileOne(name, jobs, onTakenOver);
    };
    // Manual triggers (`leasebeat trigger`) run beside the lanes, under the same term and fence.
    const desk = new TriggerDesk(this.options.redis, this.options.ledger.keys, context, (job) => lanes.get(job)?.paused())
      .run()
      .catch((error: unknown) => context.log.error({ err: error }, 'trigger desk failed'));
    const pulse = this.pulse(context);
    let sweep: Promise<void> = Promise.resolve();
    // The term starts from every job: what was reloaded before it is part of that.
    this.reloadAll = false;
    this.reloadNames.clear();
    try {
      // Once every job is taken over, the staged runs of jobs this leader did not load are taken back.
      reconcile(this.takeoverReport(context, this.options.jobs().size, () => (sweep = this.sweepRemovedJobs(context))));
      let nextResync = this.clock.monotonic() + CLOCK_RESYNC_MS;
      while (!context.signal.aborted) {
        this.wake = new AbortController();
        await this.clock.sleep(nextResync - this.clock.monotonic(), AbortSignal.any([context.signal, this.wake.signal])).catch(() => undefined);
        if (context.signal.aborted) break;
        if (this.wake.signal.aborted) {
          const names = this.reloadAll ? undefined : [...this.reloadNames];
          this.reloadAll = false;
          this.reloadNames.clear();
          reconcile(undefined, names);
          if (names === undefined) context.log.info({ jobs: lanes.size }, 'schedules reloaded');
          else context.log.debug({ jobs: lanes.size, changed: names.length }, 'schedules changed');
          continue;
        }
        await this.maintain(context).catch((error: unknown) => context.log.warn({ err: error }, 'clock sync or ledger pruning failed'));
        nextResync = this.clock.monotonic() + CLOCK_RESYNC_MS;
      }
    } finally {
      context.stop();
      // Lanes end at their next check of the term; an add already on the wire may still land, which is
      // why the next term finishes every pending claim with the same job id.
      await Promise.allSettled([desk, pulse, sweep, ...[...stopped, ...lanes.values()].map((lane) => lane.settled())]);
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
   * What each lane of the term's start calls once it has taken its job over: once all `jobs` have, the
   * takeover is logged and reported (at once when there are none), then `then` is called.
   */
  private takeoverReport(context: ProducerTerm, jobs: number, then: () => void): () => void {
    const started = this.clock.monotonic();
    let waiting = jobs;
    const report = (): void => {
      if (context.signal.aborted) return;
      const ms = this.clock.monotonic() - started;
      context.log.info({ jobs, ms }, 'every job taken over');
      this.options.onTakenOver?.(jobs, ms);
      then();
    };
    if (waiting === 0) queueMicrotask(report);
    return () => {
      if (--waiting === 0) report();
    };
  }

  /** Takes back the staged runs of jobs this leader did not load (see takeBackRemovedJobs), retrying until the term ends. */
  private async sweepRemovedJobs(context: ProducerTerm): Promise<void> {
    for (let attempt = 0; !context.signal.aborted; attempt++) {
      try {
        const takenBack = await takeBackRemovedJobs(context, this.options.queues, this.options.jobs());
        if (takenBack > 0) context.log.info({ takenBack }, 'took back the staged runs of jobs no longer loaded');
        return;
      } catch (error) {
        if (context.signal.aborted) return;
        const retryInMs = Math.min(RESTART_BACKOFF_MS * 2 ** attempt, MAX_RESTART_BACKOFF_MS);
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
    const takeOvers = new Coalescer((names: string[]) => {
      const jobs = this.options.jobs();
      // Runs are staged up to the horizon (plus their jitter) ahead of their due time: earlier terms' staged
      // runs, whether due yet or not, lie within that of the watermark.
      return ledger.takeOverStates(names.map((job) => ({ job, stagedWithinMs: stageAheadMs + (jobs.get(job)?.maxJitterMs ?? 0) })), this.now());
    });
    const reviews = new Coalescer(async (names: string[]) => {
      const marked = await ledger.markReviewed(token, names);
      return names.map(() => marked);
    });
    const writes = this.options.writes ?? directWrites(this.options.redis);
    const enqueue = new FencedEnqueue({ ledger, queues: this.options.queues, token, leading, now: () => this.now(), writes });
    return {
      token,
      signal: term$.signal,
      log,
      ledger,
      clock: this.clock,
      timer: new DueTimer(this.clock, term$.signal),
      enqueue,
      stageAheadMs,
      takeBack: new RunTakeBack({
        writes,
        redis: this.options.redis,
        ledger,
        queues: this.options.queues,
        onTakenBack: (job, reason) => this.options.metrics?.skipped(job, reason, 1),
      }),
      metrics: this.options.metrics,
      now: () => this.now(),
      job: (name) => this.options.jobs().get(name),
      leading,
      waitLeading: () => {
        if (term$.signal.aborted) return Promise.resolve(false);
        if (this.options.stillLeading()) return Promise.resolve(true);
        // Every lane waits on the same pause: one warning, one poll.
        pause ??= pauseUntilRenewed().finally(() => (pause = undefined));
        return pause;
      },
      takeOverState: (job) => takeOvers.call(job),
      markReviewed: (job) => reviews.call(job),
      previousRun: (job) => this.previousRun(job),
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

  private async maintain(context: ProducerTerm): Promise<void> {
    await this.syncClock();
    for (const job of this.options.jobs().values()) {
      await this.options.ledger.prune(job.name, this.now() - retentionMs(job));
    }
    context.reached();
  }

  private async syncClock(): Promise<void> {
    const sync = await measureClockOffset(this.options.redis, this.clock);
    this.offsetMs = sync.offsetMs;
    this.log.debug(sync, 'synchronised with Redis TIME');
  }
}
