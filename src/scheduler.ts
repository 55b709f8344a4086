import { readFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import type { Queue } from 'bullmq';
import type { Logger } from 'pino';
import type { LeaderElectionMetrics } from './election/config.js';
import { defaultIdentity } from './election/identity.js';
import { LeaderElector } from './election/leader-elector.js';
import type { Term } from './election/record.js';
import { RedisLeaseLock } from './election/redis-lock.js';
import type { ResourceLock } from './election/resource-lock.js';
import { KeySpace } from './queueing/keys.js';
import { Producer, type ProducerMetrics } from './queueing/producer.js';
import { QueueSet } from './queueing/queue-set.js';
import { TickLedger } from './queueing/tick-ledger.js';
import { WorkerPool, type WorkerTuning } from './queueing/worker-pool.js';
import type { ScheduledJob } from './scheduling/define-job.js';
import { formatDuration } from './scheduling/duration.js';
import { JobRegistry } from './scheduling/loader.js';
import { nextTicks } from './scheduling/plan.js';
import type { InstanceSource, ReadinessCheck, StatusSnapshot } from './serving/sources.js';
import { systemClock, type Clock } from './util/clock.js';
import { silentLogger } from './util/logger.js';

const VERSION = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;

/** Options of `createScheduler`. Durations are milliseconds. */
export interface SchedulerOptions {
  /** The application's ioredis client (not closed by leasebeat), or a Redis URL. */
  connection: Redis | string;
  /** The folder of job files. */
  jobsDir: string;
  /** The lock to campaign on. Default: a `RedisLeaseLock` named `leaseName` on `connection`. */
  lock?: ResourceLock;
  /** Name of the lease and of the cluster's Redis keys. Default `leasebeat`. */
  leaseName?: string;
  /** Redis key prefix, for leasebeat's keys and BullMQ's. Default `leasebeat` and BullMQ's `bull`. */
  prefix?: string;
  bullPrefix?: string;
  /** Identity for the default lock. Default `hostname_<uuid>`. */
  identity?: string;
  election?: { leaseDurationMs?: number; renewDeadlineMs?: number; retryPeriodMs?: number };
  /** Run BullMQ workers on this instance (default true). */
  workers?: boolean;
  workerTuning?: WorkerTuning;
  /** Bound on draining active runs at `stop()`. Default 25 s. */
  shutdownTimeoutMs?: number;
  logger?: Logger;
  clock?: Clock;
  metrics?: { election?: LeaderElectionMetrics; producer?: ProducerMetrics };
}

/** A running leasebeat instance: elector, producer (while leading) and workers. */
export interface Scheduler extends InstanceSource {
  readonly elector: LeaderElector;
  readonly registry: JobRegistry;
  readonly ledger: TickLedger;
  /** Loads the jobs, starts the workers and starts campaigning. */
  start(): Promise<void>;
  /** Stops enqueuing, releases the lease, drains the workers and closes connections it opened. */
  stop(): Promise<void>;
}

/**
 * Creates a leasebeat instance over an existing Redis. Several instances on the same Redis (and lock)
 * elect one leader that enqueues every tick exactly once; all of them process the runs.
 */
export function createScheduler(options: SchedulerOptions): Scheduler {
  return new LeasebeatScheduler(options);
}

class LeasebeatScheduler implements Scheduler {
  readonly elector: LeaderElector;
  readonly registry: JobRegistry;
  readonly ledger: TickLedger;
  readonly identity: string;
  private readonly redis: Redis;
  private readonly ownsRedis: boolean;
  private readonly queueSet: QueueSet;
  private readonly workers: WorkerPool | undefined;
  private readonly producer: Producer;
  private readonly log: Logger;
  private readonly clock: Clock;
  private readonly campaign = new AbortController();
  private readonly startedAt = new Date();
  private electorRun: Promise<void> | undefined;
  private producerRun: Promise<void> = Promise.resolve();
  private stopping: Promise<void> | undefined;

  constructor(private readonly options: SchedulerOptions) {
    this.log = options.logger ?? silentLogger;
    this.clock = options.clock ?? systemClock;
    this.ownsRedis = typeof options.connection === 'string';
    this.redis = typeof options.connection === 'string' ? new Redis(options.connection, { maxRetriesPerRequest: null }) : options.connection;
    const leaseName = options.leaseName ?? 'leasebeat';
    const lock = options.lock ?? new RedisLeaseLock({ connection: this.redis, name: leaseName, identity: options.identity ?? defaultIdentity(), prefix: options.prefix });
    this.identity = lock.identity();
    this.ledger = new TickLedger(this.redis, new KeySpace(options.prefix, leaseName));
    this.queueSet = new QueueSet({ connection: this.redis, prefix: options.bullPrefix });
    this.registry = new JobRegistry(options.jobsDir, { logger: this.log.child({ component: 'jobs' }) });
    if (options.workers !== false) {
      this.workers = new WorkerPool({ connection: this.redis, prefix: options.bullPrefix, logger: this.log.child({ component: 'workers' }), tuning: options.workerTuning });
    }
    this.producer = new Producer({
      redis: this.redis,
      ledger: this.ledger,
      queues: this.queueSet,
      jobs: () => this.registry.jobs,
      stillLeading: () => this.stillLeading(),
      logger: this.log,
      clock: this.clock,
      metrics: options.metrics?.producer,
    });
    this.elector = new LeaderElector({
      lock,
      ...options.election,
      releaseOnCancel: true,
      recampaign: true,
      clock: this.clock,
      logger: this.log.child({ component: 'elector' }),
      metrics: options.metrics?.election,
      callbacks: {
        onStartedLeading: (signal, term) => this.lead(signal, term),
        // Awaited by the elector before it releases the lease: enqueuing has stopped by then.
        onStoppedLeading: () => this.producerRun,
      },
    });
  }

  async start(): Promise<void> {
    this.registry.on('change', (change) => {
      for (const error of change.errors) this.log.error({ file: error.file }, error.message);
      this.workers?.update(change.jobs);
      this.producer.reload();
    });
    const snapshot = await this.registry.start();
    this.log.info({ jobs: [...snapshot.jobs.keys()], errors: snapshot.errors.length, identity: this.identity }, 'jobs loaded');
    this.workers?.update(snapshot.jobs);
    this.electorRun = this.elector.run(this.campaign.signal).catch((error: unknown) => {
      this.log.fatal({ err: error }, 'the elector stopped unexpectedly');
    });
  }

  stop(): Promise<void> {
    this.stopping ??= this.shutdown();
    return this.stopping;
  }

  liveness(): Error | undefined {
    // kube-controller-manager's tolerance: a leader must have failed to renew for 20 s past its lease.
    return this.elector.check(20_000);
  }

  async readiness(): Promise<ReadinessCheck[]> {
    const redis = await Promise.race([
      this.redis.ping().then(
        () => ({ ok: true }),
        (error: unknown) => ({ ok: false, detail: String(error) }),
      ),
      new Promise<{ ok: boolean; detail: string }>((resolve) => setTimeout(() => resolve({ ok: false, detail: 'PING timed out after 1 s' }), 1000).unref()),
    ]);
    return [
      { name: 'redis', ...redis },
      { name: 'jobs', ok: this.registry.jobs.size > 0 || this.registry.errors.length === 0, detail: `${this.registry.jobs.size} loaded, ${this.registry.errors.length} failed` },
      { name: 'elector', ok: this.electorRun !== undefined && !this.campaign.signal.aborted },
      { name: 'workers', ok: this.workers ? this.workers.running() : true },
    ];
  }

  queues(): Queue[] {
    for (const job of this.registry.jobs.values()) this.queueSet.get(job.queue);
    return this.queueSet.all();
  }

  async status(): Promise<StatusSnapshot> {
    const term = this.elector.term();
    const leader = this.elector.getLeader();
    const paused = await this.ledger.pausedJobs();
    const now = this.clock.now();
    const jobs = await Promise.all([...this.registry.jobs.values()].map(async (job) => {
      const state = await this.ledger.jobState(job.name);
      return {
        name: job.name,
        file: job.file,
        queue: job.queue,
        schedule: describeTrigger(job),
        timezone: job.timezone,
        paused: job.paused || paused.has(job.name),
        nextRuns: nextTicks(job, now, 3).map((tick) => new Date(tick).toISOString()),
        lastTick: state.lastScheduledTick === undefined ? null : new Date(state.lastScheduledTick).toISOString(),
        lastJobId: state.lastJobId ?? null,
        enqueued: state.enqueued,
        skipped: state.skipped,
        fenced: state.fenced,
      };
    }));
    const members = [{ identity: this.identity, role: this.elector.isLeader() ? 'leader' : 'follower', lastSeen: new Date(now).toISOString() }];
    if (leader && leader !== this.identity) members.push({ identity: leader, role: 'leader', lastSeen: '' });
    return {
      instance: { identity: this.identity, role: this.elector.isLeader() ? 'leader' : 'follower', startedAt: this.startedAt.toISOString(), version: VERSION },
      cluster: {
        lock: this.elector.settings.lock.describe(),
        leader,
        term: term ? { generation: term.generation, leaderTransitions: term.leaderTransitions, acquireTime: new Date(term.acquireTime).toISOString() } : null,
        members,
      },
      jobs,
      loadErrors: this.registry.errors.map((e) => ({ file: e.file, message: e.message })),
    };
  }

  private lead(signal: AbortSignal, term: Term): void {
    this.producerRun = this.producer.run(term, signal);
  }

  /** The local self-fence: leading, and less than RenewDeadline since the last successful renewal. */
  private stillLeading(): boolean {
    return this.elector.term() !== undefined && this.clock.now() - this.elector.lastRenewTime() < this.elector.settings.renewDeadlineMs;
  }

  private async shutdown(): Promise<void> {
    this.log.info('shutting down: stop enqueuing, release the lease, drain the workers');
    // 1-2. Cancelling the campaign stops the producer, then releases the lease (releaseOnCancel).
    this.campaign.abort(new Error('shutdown'));
    await this.electorRun;
    await this.registry.close();
    // 3. Workers finish their active runs, bounded by the shutdown timeout.
    await this.workers?.close(this.options.shutdownTimeoutMs ?? 25_000);
    await this.queueSet.close();
    if (this.ownsRedis) await this.redis.quit().catch(() => this.redis.disconnect());
    this.log.info('shut down');
  }
}

function describeTrigger(job: ScheduledJob): string {
  return job.trigger.kind === 'cron' ? job.trigger.expression : `every ${formatDuration(job.trigger.everyMs)}`;
}
