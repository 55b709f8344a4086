import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Cluster, Redis } from 'ioredis';
import type { Queue } from 'bullmq';
import type { Logger } from 'pino';
import { createAdmin, type Admin } from './admin/admin.js';
import type { Schedules } from './admin/schedules.js';
import { ScheduleFeed, type ScheduleMetrics } from './schedules/feed.js';
import { ScheduleStore } from './schedules/store.js';
import { StoredSchedules } from './schedules/stored-schedules.js';
import { checkElectionTimings, DEFAULT_LEASE_DURATION_MS, DEFAULT_RENEW_DEADLINE_MS, DEFAULT_RETRY_PERIOD_MS, type LeaderElectionMetrics } from './election/config.js';
import { defaultIdentity } from './election/identity.js';
import { LeaderElector } from './election/leader-elector.js';
import type { Term } from './election/record.js';
import { RedisLeaseLock } from './election/redis-lock.js';
import type { ResourceLock } from './election/resource-lock.js';
import { DeploymentRegistry, describeOthers } from './members/deployments.js';
import { Heartbeat, type MemberReport } from './members/heartbeat.js';
import { MemberMonitor, type MemberMetrics } from './members/monitor.js';
import { MAX_LISTED_JOBS, type WorkerState } from './members/record.js';
import { resolveMemberSettings, type MemberSettings } from './members/settings.js';
import { membersReport } from './members/status.js';
import { MemberStore, type CordonRequest } from './members/store.js';
import { DEFAULT_WAIT_TIMEOUT_MS, directWrites, DurableLock, ReplicaWait, replicaWaitFor } from './redis/durability.js';
import { KeySpace } from './redis/keys.js';
import type { ProducerMetrics } from './producing/lane-term.js';
import { Producer } from './producing/producer.js';
import { QueueSet } from './redis/queue-set.js';
import { bullPrefixFor, DEFAULT_KEY_PREFIX, isCluster, RedisConnections } from './redis/redis-topology.js';
import { TickLedger } from './ledger/tick-ledger.js';
import { DEFAULT_STAGE_AHEAD_MS } from './producing/staging.js';
import { RunRecords } from './workers/run-records.js';
import { stayConnected } from './util/stay-connected.js';
import { RunStopFeed } from './workers/run-stops.js';
import { DEFAULT_WORKER_TUNING, WorkerPool, type WorkerMetrics, type WorkerTuning } from './workers/worker-pool.js';
import { describeTrigger } from './scheduling/define-job.js';
import { JobRegistry } from './scheduling/loader.js';
import { listedTicks } from './scheduling/plan.js';
import { KubernetesLeaseLock } from './election/kubernetes-lock.js';
import { HistoryReader, kubernetesHistoryNote, type HistorySnapshot } from './serving/history.js';
import type { KnownLabels } from './serving/metrics.js';
import type { InstanceSource, ReadinessCheck, StatusSnapshot } from './serving/sources.js';
import { systemClock, type Clock } from './util/clock.js';
import { silentLogger } from './util/logger.js';

const VERSION = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;

/** Options of `createScheduler`. Durations are milliseconds. */
export interface SchedulerOptions {
  /**
   * A Redis URL (one server, `redis+sentinel://` or `redis+cluster://`; see `parseRedisUrl`), or the
   * application's ioredis client (not closed by leasebeat). With a URL, leasebeat opens the connections
   * each of its parts needs; with a client, everything shares it.
   */
  connection: Redis | Cluster | string;
  /** The folder of job files. */
  jobsDir: string;
  /** The lock to campaign on. Default: a `RedisLeaseLock` named `leaseName` on `connection`. */
  lock?: ResourceLock;
  /** Name of the lease and of the cluster's Redis keys. Default `leasebeat`. */
  leaseName?: string;
  /**
   * Prefix of leasebeat's own keys. Default `leasebeat`. A deployment is the unit it names: with any other
   * prefix the BullMQ prefix follows it (`<prefix>-bull`), so two deployments on one Redis share nothing.
   */
  prefix?: string;
  /** BullMQ's prefix. Default `bull` with the default `prefix`, else `<prefix>-bull`; hash-tagged on Cluster (`{leasebeat-bull}`). */
  bullPrefix?: string;
  /**
   * Replicas that must acknowledge (`WAIT`) each write that decides safety (the Redis lock's writes, the
   * fence, the claims) before it counts; see docs/deployment.md. Default: the URL's `minReplicas`, else 1
   * on Sentinel and Cluster and 0 on one server; 0 when a client is given.
   */
  durability?: { minReplicas?: number; waitTimeoutMs?: number };
  /** Identity for the default lock. Default `hostname_<uuid>`. */
  identity?: string;
  election?: { leaseDurationMs?: number; renewDeadlineMs?: number; retryPeriodMs?: number };
  /** Run BullMQ workers on this instance (default true). */
  workers?: boolean;
  workerTuning?: WorkerTuning;
  /**
   * Pre-staging: how long before its due time a tick of an `overlap: 'allow'` job without a flow is
   * claimed and added to BullMQ as a delayed job, so that at the tick only BullMQ's promotion remains
   * (see docs/guarantees.md, "Pre-staging"). Default 2 s; 0 adds every tick when due.
   */
  stageAheadMs?: number;
  /** Bound on draining active runs at `stop()`. Default 25 s. */
  shutdownTimeoutMs?: number;
  /** Heartbeats and member health; see `MemberSettings` for the defaults. */
  members?: Partial<MemberSettings>;
  logger?: Logger;
  clock?: Clock;
  metrics?: { election?: LeaderElectionMetrics; producer?: ProducerMetrics; members?: MemberMetrics; workers?: WorkerMetrics; schedules?: ScheduleMetrics };
}

/** The default of `SchedulerOptions.shutdownTimeoutMs`. */
const DEFAULT_SHUTDOWN_TIMEOUT_MS = 25_000;

/**
 * `SchedulerOptions` with every default applied and durations in milliseconds, checked against the
 * topology: what a scheduler reads after its construction (`resolveSchedulerOptions`), as the elector
 * reads its `ResolvedElectionConfig`.
 */
export interface ResolvedSchedulerOptions {
  connection: Redis | Cluster | string;
  jobsDir: string;
  /** The lock given; undefined: a `RedisLeaseLock` named `leaseName` on the scheduler's own connection. */
  lock: ResourceLock | undefined;
  leaseName: string;
  prefix: string;
  /** BullMQ's prefix: `bull` (BullMQ's own), `<prefix>-bull`, or as given; hash-tagged on Cluster. */
  bullPrefix: string;
  /** 0 replicas: no `WAIT`. */
  durability: { minReplicas: number; waitTimeoutMs: number };
  /** The identity this instance campaigns and registers as: the given lock's, else `identity` or `hostname_<uuid>`. */
  identity: string;
  election: { leaseDurationMs: number; renewDeadlineMs: number; retryPeriodMs: number };
  workers: boolean;
  workerTuning: Required<WorkerTuning>;
  stageAheadMs: number;
  shutdownTimeoutMs: number;
  members: MemberSettings;
  logger: Logger;
  clock: Clock;
  metrics: NonNullable<SchedulerOptions['metrics']>;
}

/**
 * Applies `SchedulerOptions`' defaults and checks what can be checked before a connection opens: the key
 * names and the BullMQ prefix against the topology (`connections`, parsed from a URL; undefined for a
 * given client), and the election's timing rules. Throws `RedisTopologyError` or `ElectionConfigError`.
 */
export function resolveSchedulerOptions(options: SchedulerOptions, connections: RedisConnections | undefined): ResolvedSchedulerOptions {
  const leaseName = options.leaseName ?? 'leasebeat';
  const prefix = options.prefix ?? DEFAULT_KEY_PREFIX;
  // Key rules first: a configuration that would break on Cluster opens no connection.
  connections?.checkLeaseName(leaseName, prefix);
  const bullPrefix = connections ? connections.bullPrefix(options.bullPrefix, prefix) : bullPrefixFor(options.connection as Redis | Cluster, options.bullPrefix, prefix);
  const given = options.durability ?? {};
  return {
    connection: options.connection,
    jobsDir: options.jobsDir,
    lock: options.lock,
    leaseName,
    prefix,
    // Undefined is BullMQ's default prefix.
    bullPrefix: bullPrefix ?? 'bull',
    durability: {
      // From a URL its topology decides (the URL's `minReplicas`, else 1 on Sentinel and Cluster); a given client waits only when asked.
      minReplicas: given.minReplicas ?? connections?.defaultMinReplicas() ?? 0,
      // 0 counts as unset: Redis' WAIT 0 would block for ever.
      waitTimeoutMs: given.waitTimeoutMs || connections?.topology.waitTimeoutMs || DEFAULT_WAIT_TIMEOUT_MS,
    },
    identity: options.lock?.identity() ?? options.identity ?? defaultIdentity(),
    election: checkElectionTimings({
      leaseDurationMs: options.election?.leaseDurationMs ?? DEFAULT_LEASE_DURATION_MS,
      renewDeadlineMs: options.election?.renewDeadlineMs ?? DEFAULT_RENEW_DEADLINE_MS,
      retryPeriodMs: options.election?.retryPeriodMs ?? DEFAULT_RETRY_PERIOD_MS,
    }),
    workers: options.workers ?? true,
    workerTuning: withDefaults(DEFAULT_WORKER_TUNING, options.workerTuning),
    // The producer's own default is 0 (add every tick when due); the scheduler stages 2 s ahead.
    stageAheadMs: options.stageAheadMs ?? DEFAULT_STAGE_AHEAD_MS,
    shutdownTimeoutMs: options.shutdownTimeoutMs ?? DEFAULT_SHUTDOWN_TIMEOUT_MS,
    members: resolveMemberSettings(options.members),
    logger: options.logger ?? silentLogger,
    clock: options.clock ?? systemClock,
    metrics: options.metrics ?? {},
  };
}

/** `defaults` with every field `given` sets (a field set to undefined keeps its default). */
function withDefaults<T extends object>(defaults: Required<T>, given: T | undefined): Required<T> {
  const merged = { ...defaults };
  for (const [field, value] of Object.entries(given ?? {}) as Array<[keyof T, Required<T>[keyof T] | undefined]>) {
    if (value !== undefined) merged[field] = value;
  }
  return merged;
}

/** What a scheduler tells about its leadership; the elector's write operations are not exposed. */
export interface LeadershipView {
  isLeader(): boolean;
  /** The current term while leading. */
  term(): Term | undefined;
  /** The last observed holder; `""` when none. */
  getLeader(): string;
}

/**
 * A running leasebeat instance: elector, producer and member health monitor (while leading), workers, and
 * a heartbeat that registers it as a member and obeys cordons.
 */
export interface Scheduler extends InstanceSource {
  /** This instance's view of the election, read-only: campaigning and releasing stay inside. */
  readonly elector: LeadershipView;
  /** The member registry: records, cordons and the leader's judgement. */
  readonly members: MemberStore;
  /**
   * The cluster's admin API over this instance's Redis connection and lock (the HTTP API's operations):
   * the same `createAdmin` the CLI uses. Closed by `stop()`.
   */
  readonly admin: Admin;
  /**
   * The runtime schedules (`admin.schedules`): each one a job type's work on ticks of its own, stored in
   * Redis and followed by every instance as it changes (docs/schedules.md).
   */
  readonly schedules: Schedules;
  /** Loads the jobs and schedules, registers as a member, starts the workers and (unless cordoned) campaigns. */
  start(): Promise<void>;
  /** Reports draining, stops enqueuing, releases the lease, drains the workers, leaves the registry. */
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
  private readonly registry: JobRegistry;
  /** The runtime schedules as Redis has them, followed through their change stream. */
  private readonly scheduleFeed: ScheduleFeed;
  readonly schedules: Schedules;
  private readonly ledger: TickLedger;
  readonly members: MemberStore;
  readonly admin: Admin;
  readonly identity: string;
  private readonly redis: Redis;
  private readonly ownsRedis: boolean;
  private readonly workerRedis: Redis;
  /** Ends what durable writes hold open (the Sentinel primary check's connections). */
  private closeDurability: () => void = () => undefined;
  private readonly queueSet: QueueSet;
  private readonly historyReader: HistoryReader;
  private readonly workers: WorkerPool | undefined;
  private readonly producer: Producer;
  private readonly log: Logger;
  private readonly clock: Clock;
  private readonly heartbeat: Heartbeat;
  private readonly heartbeatControl = new AbortController();
  /** The deployments on this deployment's BullMQ prefix: only this one may use it. */
  private readonly deployments: DeploymentRegistry;
  /** The other deployments the last heartbeat found there, as last reported (one error per change). */
  private othersReported = '';
  /** The topology from a URL, checked at start (a given client is the application's to check). */
  private readonly connections: RedisConnections | undefined;
  /** The Redis lock's change channel, whose use start checks; none under another lock. */
  private readonly leaseChannel: string | undefined;
  private readonly startedAt = new Date();
  /** The elector's current run; none while cordoned or stopped. */
  private campaign: { controller: AbortController; run: Promise<void> } | undefined;
  private heartbeatRun: Promise<void> = Promise.resolve();
  private producerRun: Promise<void> = Promise.resolve();
  private monitorRun: Promise<void> = Promise.resolve();
  /** Whether this instance obeys a cordon; changes one at a time through `cordonChange`. */
  private cordoned = false;
  private cordonChange: Promise<unknown> = Promise.resolve();
  private stopping: Promise<void> | undefined;
  /** Set when the shutdown closes the connections: an end after that is ours, not one to revive. */
  private closingRedis = false;

  /** The options, resolved once: nothing below reads `SchedulerOptions` or a default of its own. */
  private readonly settings: ResolvedSchedulerOptions;

  constructor(options: SchedulerOptions) {
    const connections = typeof options.connection === 'string' ? RedisConnections.fromUrl(options.connection) : undefined;
    // Before any connection opens: a configuration that would break opens none.
    const settings = resolveSchedulerOptions(options, connections);
    this.settings = settings;
    this.log = settings.logger;
    this.clock = settings.clock;
    this.ownsRedis = typeof settings.connection === 'string';
    this.connections = connections;
    const { leaseName, prefix, bullPrefix } = settings;
    // Our own control connection does not replay commands across a lost connection (they fail at the
    // first failed reconnect instead): a claim or an add arriving late, after another leader took over, is
    // exactly what fencing is about. Workers get a separate connection with BullMQ's required settings.
    // leasebeat's modules are typed with ioredis' `Redis`; a Cluster client serves every command they send
    // (each script's keys share one hash tag).
    this.redis = (connections?.open('control') ?? settings.connection) as Redis;
    this.workerRedis = (connections?.open('worker') ?? settings.connection) as Redis;
    if (this.ownsRedis) {
      for (const client of [this.redis, this.workerRedis]) {
        client.on('error', (error: Error) => this.log.warn({ err: error }, 'Redis connection error; reconnecting'));
        stayConnected(client, () => this.closingRedis, this.log);
      }
    }
    const durability = this.durableWrites(connections, settings.durability);
    let lock = settings.lock;
    let leaseHistoryKey = lock instanceof RedisLeaseLock ? lock.historyKey : undefined;
    let leaseChannel = lock instanceof RedisLeaseLock ? lock.channel : undefined;
    if (!lock) {
      // Durable writes mean replicated Redis: there the record's replication epoch is held too.
      const own = new RedisLeaseLock({
        connection: this.redis, name: leaseName, identity: settings.identity, prefix, replicationEpochs: durability !== undefined,
      });
      leaseHistoryKey = own.historyKey;
      leaseChannel = own.channel;
      lock = durability ? new DurableLock(own, own.key, durability) : own;
    }
    this.identity = settings.identity;
    this.leaseChannel = leaseChannel;
    const keys = new KeySpace(prefix, leaseName);
    // Fence and claims must outlive a failover as much as the lease does, whichever lock is used.
    const writes = durability ?? directWrites(this.redis);
    this.ledger = new TickLedger(this.redis, keys, writes);
    this.members = new MemberStore(this.redis, keys);
    this.queueSet = new QueueSet({
      connection: this.redis,
      prefix: bullPrefix,
      onError: (error) => this.log.warn({ err: error }, 'BullMQ queue connection error'),
    });
    this.registry = new JobRegistry(settings.jobsDir, { logger: this.log.child({ component: 'jobs' }) });
    const scheduleLog = this.log.child({ component: 'schedules' });
    const scheduleStore = new ScheduleStore(this.redis, keys, writes);
    this.scheduleFeed = new ScheduleFeed(this.redis, scheduleStore, scheduleLog);
    const storedSchedules = new StoredSchedules(scheduleStore, () => this.registry.jobs, scheduleLog);
    // The status page's strips and timeline, from what Redis already holds (the ledger, BullMQ, the lease's writes).
    const [namespace = '', lease = ''] = lock.describe().split('/');
    this.historyReader = new HistoryReader({
      redis: this.redis,
      keys,
      // File jobs only: a runtime schedule's runs are on the Schedules section and `leasebeat schedules
      // describe`, and 100,000 of them would make the strips and the timeline megabytes per refresh.
      jobs: () => [...this.registry.jobs.values()].map((job) => ({ name: job.name, queue: this.queueSet.get(job.queue) })),
      ...(leaseHistoryKey ? { leaseHistoryKey } : {}),
      ...(lock instanceof KubernetesLeaseLock ? { noHistoryNote: kubernetesHistoryNote(namespace, lease) } : {}),
    });
    this.admin = createAdmin({
      // The job files (job types among them); a schedule is live here once the feed has passed its write on.
      connection: this.redis, prefix, leaseName, bullPrefix, lock, jobsDir: settings.jobsDir, jobs: () => this.registry.jobs, writes,
      scheduleApplied: (record) => this.scheduleFeed.applied(record),
    });
    this.schedules = this.admin.schedules;
    if (settings.workers) {
      // A run starts only once its take would survive a failover, and is handed back only once its finish
      // would: else a failover can hand one run to two workers, or run a finished run again.
      this.workers = new WorkerPool({
        connection: this.workerRedis,
        prefix: bullPrefix,
        logger: this.log.child({ component: 'workers' }),
        tuning: settings.workerTuning,
        records: new RunRecords(durability?.on(this.workerRedis) ?? directWrites(this.workerRedis), this.identity),
        // A staged run starts only while a live term stands behind it: the one that staged it, or a newer one
        // once it has applied its pause and catch-up rules to it.
        mayStartStaged: (run, data) => this.ledger.stagedRunMayStart(run, data, settings.election.renewDeadlineMs),
        // On one server the take makes that check in its own script; a Cluster keeps them in two slots.
        ...(isCluster(this.workerRedis) ? {} : { stagedCheck: (run, data) => this.ledger.stagedRunCheck(run, data, settings.election.renewDeadlineMs) }),
        failedRuns: this.ledger,
        runStops: new RunStopFeed(this.workerRedis, keys, this.log),
        ...(settings.metrics.workers ? { metrics: settings.metrics.workers } : {}),
      });
    }
    this.elector = new LeaderElector({
      lock,
      ...settings.election,
      releaseOnCancel: true,
      recampaign: true,
      clock: this.clock,
      logger: this.log.child({ component: 'elector' }),
      metrics: settings.metrics.election,
      callbacks: {
        onStartedLeading: (signal, term) => this.lead(signal, term),
        // Awaited by the elector before it releases the lease: enqueuing has stopped by then.
        // Bounded, so that a producer stuck on an unreachable Redis cannot hold the lease hostage; its
        // signal is already aborted, so nothing it still has in flight can be added after this.
        onStoppedLeading: async () => {
          const stopped = Promise.all([this.producerRun, this.monitorRun]);
          const bound = settings.election.renewDeadlineMs;
          const late = await Promise.race([stopped.then(() => false), sleep(bound, true, { ref: false })]);
          if (late) this.log.warn({ waitedMs: bound }, 'the producer did not stop in time; releasing the lease anyway');
        },
      },
    });
    this.producer = new Producer({
      redis: this.redis,
      ledger: this.ledger,
      queues: this.queueSet,
      jobs: () => this.registry.jobs,
      schedules: storedSchedules,
      stillLeading: () => this.stillLeading(),
      // A leader that cannot produce must not keep the lease: with the Kubernetes lock it could renew
      // for ever while cut off from Redis, or while the fence belongs to a newer term.
      onCannotProduce: (reason, detail) => this.elector.resign(`${reason}: ${detail}`),
      unreachableLimitMs: settings.election.renewDeadlineMs,
      logger: this.log,
      clock: this.clock,
      // A runtime schedule's ticks and runs are counted under its job type's name (producerMetricsByType, metricName).
      ...(settings.metrics.producer ? { metrics: settings.metrics.producer } : {}),
      // Always passed: the producer's own default (0) is not the scheduler's.
      stageAheadMs: settings.stageAheadMs,
      pulseIntervalMs: settings.election.retryPeriodMs,
      writes,
    });
    this.deployments = new DeploymentRegistry(this.redis, bullPrefix, prefix, leaseName, this.identity, settings.members.graceMs);
    this.heartbeat = new Heartbeat({
      store: this.members,
      identity: this.identity,
      version: VERSION,
      clock: this.clock,
      intervalMs: settings.members.heartbeatIntervalMs,
      timeoutMs: settings.members.graceMs,
      logger: this.log.child({ component: 'heartbeat' }),
      report: () => this.memberReport(),
      onCordon: (request) => this.onCordon(request),
      alongside: () => this.checkDeployments(),
    });
  }

  async start(): Promise<void> {
    // Before anything is written or taken: a URL the server cannot honour, or a BullMQ prefix another
    // deployment uses, would put this instance among someone else's keys and jobs; a user without the
    // commands, keys or channel it needs would start and fail at its first tick.
    await this.connections?.checkServer(this.redis, {
      keyBase: this.ledger.keys.base,
      bullPrefix: this.settings.bullPrefix,
      ...(this.leaseChannel ? { leaseChannel: this.leaseChannel } : {}),
      runStopChannel: this.ledger.keys.runStops,
      replicated: this.settings.durability.minReplicas > 0,
    });
    await this.connections?.checkServer(this.workerRedis);
    await this.deployments.claim();
    // Register first: a cordon stored for this identity is obeyed before any worker starts or vote is cast.
    await this.heartbeat.beat().catch((error: unknown) => this.log.warn({ err: error }, 'first heartbeat failed; retrying every interval'));
    this.registry.on('change', (change) => {
      for (const error of change.errors) this.log.error({ file: error.file }, error.message);
      this.workers?.update(this.registry.jobs);
      this.producer.reload();
    });
    const snapshot = await this.registry.start();
    // Names only up to a screenful: with 100,000 schedules the whole list would be megabytes of log.
    const names = [...snapshot.jobs.keys()];
    this.log.info({ jobs: names.length, names: names.slice(0, 20), errors: snapshot.errors.length, identity: this.identity }, 'jobs loaded');
    // The leader's lanes follow each change; the feed holds no copy of the schedules (see ScheduleFeed).
    this.scheduleFeed.on('change', (changes) => {
      this.producer.schedulesChanged(changes.map((change) => change.id));
      const applied = this.settings.metrics.schedules;
      if (applied) {
        const now = Date.now();
        for (const { record } of changes) if (record) applied.applied((now - record.updatedAt) / 1000);
      }
    });
    this.scheduleFeed.on('resync', () => this.producer.schedulesResync());
    await this.scheduleFeed.start();
    this.workers?.update(this.registry.jobs);
    // A stop() that arrived during start-up has already cancelled the campaign: do not begin a new one.
    if (!this.cordoned && !this.shuttingDown) this.startCampaign();
    this.heartbeatRun = this.heartbeat.run(this.heartbeatControl.signal);
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
      // Shown, not gating: Redis is every instance's, and with it down all would be unready at once (see /readyz).
      { name: 'redis', required: false, ...redis },
      { name: 'jobs', ...this.jobsCheck() },
      // A cordoned instance is still Ready, as a cordoned Kubernetes node is: it is out of rotation by choice.
      this.cordoned && !this.shuttingDown
        ? { name: 'elector', ok: true, detail: 'cordoned: not campaigning' }
        : { name: 'elector', ok: this.campaign !== undefined },
      { name: 'workers', ok: !this.shuttingDown && this.workerState() !== 'stopped', detail: this.workerState() },
    ];
  }

  queues(): Queue[] {
    // A runtime schedule runs on its job type's queue: the job files name every queue.
    for (const job of this.registry.jobs.values()) this.queueSet.get(job.queue);
    return this.queueSet.all();
  }

  history(): Promise<HistorySnapshot> {
    return this.historyReader.read();
  }

  metricLabels(): KnownLabels {
    // Runtime schedules are counted under their job type's name (producerMetricsByType, metricName), a file definition.
    return { election: this.elector.settings.name, jobs: [...this.registry.jobs.keys()] };
  }

  async status(): Promise<StatusSnapshot> {
    const term = this.elector.term();
    const leader = this.elector.getLeader();
    const paused = await this.ledger.pausedJobs();
    const now = this.clock.now();
    // File jobs: runtime schedules are listed page by page through `schedules`, not in every status.
    const jobs = await Promise.all([...this.registry.jobs.values()].map(async (job) => {
      const state = await this.ledger.jobState(job.name);
      return {
        name: job.name,
        file: job.file,
        queue: job.queue,
        schedule: describeTrigger(job),
        timezone: job.timezone,
        paused: job.paused || paused.has(job.name),
        pauseNote: paused.get(job.name)?.note ?? null,
        nextRuns: listedTicks(job, now, 3),
        lastTick: state.lastScheduledTick === undefined ? null : new Date(state.lastScheduledTick).toISOString(),
        lastJobId: state.lastJobId ?? null,
        enqueued: state.enqueued,
        skipped: state.skipped,
        fenced: state.fenced,
      };
    }));
    const [records, cordons, view] = await Promise.all([this.members.list(), this.members.cordons(), this.members.health()]);
    // The lease holder, not the records: a dead leader's last record still says "leader".
    const { members, disruption } = membersReport(records, cordons, view, leader);
    return {
      instance: { identity: this.identity, role: this.elector.isLeader() ? 'leader' : 'follower', startedAt: this.startedAt.toISOString(), version: VERSION },
      cluster: {
        lock: this.elector.settings.lock.describe(),
        leader,
        term: term ? { generation: term.generation, leaderTransitions: term.leaderTransitions, acquireTime: new Date(term.acquireTime).toISOString() } : null,
        members,
        disruption,
      },
      jobs,
      loadErrors: this.registry.errors.map((e) => ({ file: e.file, message: e.message })),
    };
  }

  /**
   * The replica acknowledgement every deciding write waits for, or undefined when none is asked for
   * (`minReplicas` 0). From a URL, on Sentinel, it adds the check that the node is still the agreed primary.
   */
  private durableWrites(connections: RedisConnections | undefined, { minReplicas, waitTimeoutMs }: ResolvedSchedulerOptions['durability']): ReplicaWait | undefined {
    if (connections) {
      const durable = replicaWaitFor(connections, this.redis, { minReplicas, timeoutMs: waitTimeoutMs });
      this.closeDurability = () => durable.close();
      return durable.wait.enabled ? durable.wait : undefined;
    }
    return minReplicas > 0 ? new ReplicaWait(this.redis, { minReplicas, timeoutMs: waitTimeoutMs }) : undefined;
  }

  private lead(signal: AbortSignal, term: Term): void {
    this.producerRun = this.producer.run(term, signal);
    // A fresh monitor per term: a new leader rebuilds member health from Redis.
    const monitor = new MemberMonitor({
      store: this.members,
      self: this.identity,
      settings: this.settings.members,
      clock: this.clock,
      logger: this.log.child({ component: 'members' }),
      metrics: this.settings.metrics.members,
    });
    this.monitorRun = monitor.run(signal);
  }

  private startCampaign(): void {
    const controller = new AbortController();
    const run = this.elector.run(controller.signal).catch((error: unknown) => {
      this.log.fatal({ err: error }, 'the elector stopped unexpectedly');
    });
    this.campaign = { controller, run };
  }

  /** Cancels the campaign: the producer and monitor stop, then the lease is released (releaseOnCancel). */
  private async stopCampaign(reason: string): Promise<void> {
    const campaign = this.campaign;
    this.campaign = undefined;
    if (!campaign) return;
    campaign.controller.abort(new Error(reason));
    await campaign.run;
  }

  /** Applies the cordon the heartbeat found, after any change still in progress. True when it changed something. */
  private onCordon(request: CordonRequest | undefined): Promise<boolean> {
    const change = this.cordonChange.then(() => this.applyCordon(request));
    this.cordonChange = change.catch(() => undefined);
    return change;
  }

  private async applyCordon(request: CordonRequest | undefined): Promise<boolean> {
    const cordon = request !== undefined;
    if (cordon === this.cordoned || this.shuttingDown) return false;
    this.cordoned = cordon;
    if (!cordon) {
      this.log.info('uncordoned: taking jobs and campaigning again');
      this.workers?.resume();
      this.startCampaign();
      return true;
    }
    this.log.warn({ note: request.note }, 'cordoned: leaving the election (releasing the lease if held), finishing active jobs, taking no new ones');
    this.workers?.pause().then(
      () => this.log.info('cordoned and drained: no active jobs'),
      (error: unknown) => this.log.error({ err: error }, 'pausing the workers failed'),
    );
    await this.stopCampaign('cordoned');
    return true;
  }

  /** Registers this deployment again, and says (once per change) when another one shares its BullMQ prefix. */
  private async checkDeployments(): Promise<void> {
    const others = await this.deployments.refresh();
    const key = others.map((o) => `${o.deployment}@${o.identity}`).join(',');
    if (key === this.othersReported) return;
    this.othersReported = key;
    if (others.length > 0) {
      this.log.error({ bullPrefix: this.settings.bullPrefix, others }, `another leasebeat deployment uses this BullMQ prefix (${describeOthers(others)}): the two run each other's jobs; give each its own LEASEBEAT_PREFIX`);
    }
  }

  private get shuttingDown(): boolean {
    return this.stopping !== undefined;
  }

  private workerState(): WorkerState {
    return this.workers?.state() ?? 'disabled';
  }

  private jobsCheck(): { ok: boolean; detail: string } {
    const { jobs, errors } = this.registry;
    return { ok: jobs.size > 0 || errors.length === 0, detail: `${jobs.size} loaded, ${errors.length} failed` };
  }

  /** What the heartbeat writes about this instance. */
  private memberReport(): MemberReport {
    const workers = this.workerState();
    const activeJobIds = this.workers?.activeJobIds() ?? [];
    const jobs = this.jobsCheck();
    const problem = this.shuttingDown
      ? 'shutting down'
      : !jobs.ok
        ? `no jobs loaded (${jobs.detail})`
        : workers === 'stopped'
          ? 'workers stopped'
          : undefined;
    return {
      role: this.elector.isLeader() ? 'leader' : 'follower',
      workers,
      activeJobs: activeJobIds.length,
      activeJobIds: activeJobIds.slice(0, MAX_LISTED_JOBS),
      cordoned: this.cordoned,
      draining: this.shuttingDown || workers === 'draining',
      ready: problem === undefined,
      ...(problem ? { reason: problem } : {}),
    };
  }

  /**
   * The local self-fence: leading, and less than RenewDeadline since the last successful renewal was sent.
   * A follower cannot take over before it has seen that renewal unchanged for LeaseDuration on its own
   * clock, so LeaseDuration − RenewDeadline is the margin left for clock-rate drift and for a claim already
   * on its way to Redis (which the fence turns away once a newer term raised it). The elector's own term
   * can outlast this (client-go gives each renewal round a full RenewDeadline); the producer pauses
   * meanwhile and resumes if the renewal succeeds.
   */
  private stillLeading(): boolean {
    return this.elector.term() !== undefined && this.elector.renewedWithin(this.settings.election.renewDeadlineMs);
  }

  private async shutdown(): Promise<void> {
    this.log.info('shutting down: report draining, stop enqueuing, release the lease, drain the workers, leave');
    await this.cordonChange;
    // 1. Report draining at once, so the leader and operators see it before the lease moves.
    await this.heartbeat.beat().catch((error: unknown) => this.log.warn({ err: error }, 'could not report draining'));
    // 2-3. Cancelling the campaign stops the producer and monitor, then releases the lease (releaseOnCancel).
    await this.stopCampaign('shutdown');
    await this.registry.close();
    await this.scheduleFeed.stop();
    // 4. Workers finish their active runs, bounded by the shutdown timeout; heartbeats go on meanwhile.
    await this.workers?.close(this.settings.shutdownTimeoutMs);
    // 5. Leave the registry: a clean departure is not a failure for the leader to judge.
    this.heartbeatControl.abort(new Error('shutdown'));
    await this.heartbeatRun;
    await this.heartbeat.leave().catch((error: unknown) => this.log.warn({ err: error }, 'could not leave the member registry'));
    await this.deployments.leave().catch((error: unknown) => this.log.warn({ err: error }, 'could not leave the registry of deployments'));
    await this.queueSet.close();
    await this.admin.close();
    this.closeDurability();
    if (this.ownsRedis) {
      this.closingRedis = true;
      await Promise.all([this.redis, this.workerRedis].map((client) => client.quit().catch(() => client.disconnect())));
    }
    this.log.info('shut down');
  }
}
