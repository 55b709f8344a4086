import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { hostname, userInfo } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { Cluster, Redis } from 'ioredis';
import { RedisLeaseLock } from '../election/redis-lock.js';
import { LockNotFoundError, type ResourceLock } from '../election/resource-lock.js';
import { waitForDrain, type DrainOutcome } from '../members/drain.js';
import type { MemberRecord } from '../members/record.js';
import { cannotLead, membersReport, type MembersReport } from '../members/status.js';
import { MemberStore } from '../members/store.js';
import { directWrites, replicaWaitFor, type WritePath } from '../redis/durability.js';
import { KeySpace } from '../redis/keys.js';
import { submitTrigger, triggerOutcome, type TriggerOutcome } from '../producing/manual-triggers.js';
import { QueueSet } from '../redis/queue-set.js';
import { bullPrefixFor, isCluster, RedisConnections, RedisTopologyError, redact, type RedisClient } from '../redis/redis-topology.js';
import { parseLedgerRecord, parseTriggerRecord, recordedRun } from '../ledger/records.js';
import { TickLedger, type FenceState, type JobState, type SkippedRange } from '../ledger/tick-ledger.js';
import { describeTrigger, type ScheduledJob } from '../scheduling/define-job.js';
import { formatDuration } from '../scheduling/duration.js';
import { JOB_DEFAULTS } from '../scheduling/schema.js';
import { loadJobs, type LoadError, type LoadResult } from '../scheduling/loader.js';
import { listedTicks, nextTicks } from '../scheduling/plan.js';
import { definitionHash } from '../scheduling/definition-hash.js';
import { compileSpec } from '../schedules/catalog.js';
import { systemClock } from '../util/clock.js';
import { ScheduleStore, type ScheduleRecord } from '../schedules/store.js';
import { createSchedules, type Schedules } from './schedules.js';
import { NO_RUN_DETAILS, type RecentRun, type TriggerResult } from './run-views.js';
import { runDetails, RUNNER_FIELD } from './run-details.js';
import { AuditLog, type AuditEntry } from './audit-log.js';
import { formatBackfill, requestBackfill, type BackfillOptions, type BackfillProgress } from './backfill.js';
import { jobBackfills } from '../producing/backfills.js';

export type { RecentRun, TriggerResult } from './run-views.js';

/** Why an admin operation was refused or failed; `code` is stable for scripts, `message` is for people. */
export type AdminErrorCode =
  | 'unknown-job'
  | 'paused'
  | 'unknown-member'
  | 'ambiguous-member'
  /** A cordon or drain refused because no other member could lead after it (`force` overrides). */
  | 'no-eligible-leader'
  | 'no-definitions'
  | 'timeout'
  | 'unreachable'
  | 'config';

export class AdminError extends Error {
  override readonly name = 'AdminError';
  constructor(
    readonly code: AdminErrorCode,
    message: string,
  ) {
    super(message);
  }
}

export interface AdminOptions {
  /** An ioredis client (not closed by `close()`), or a Redis URL (a connection of its own, closed by `close()`). */
  connection: Redis | Cluster | string;
  /** Redis key prefix and cluster (lease) name, as the instances use them. Defaults `leasebeat`. */
  prefix?: string;
  leaseName?: string;
  bullPrefix?: string;
  /**
   * The lock the instances campaign on, read for the leader: the Kubernetes Lease under the Kubernetes
   * lock. Default: the Redis lease record named `leaseName`.
   */
  lock?: ResourceLock;
  /**
   * The folder of job files, loaded when a call needs it and again once its files change. `status` uses it for next run
   * times and for jobs no leader has scheduled yet, `schedules` for the job types. (`trigger` does not:
   * the leader runs the definition it has loaded.)
   */
  jobsDir?: string;
  /**
   * The job definitions a running instance has loaded, used instead of importing `jobsDir` on every call
   * (each import of a job file stays in memory, so a long-lived process must not repeat it per request).
   */
  jobs?: () => ReadonlyMap<string, ScheduledJob>;
  /** Whether the running instance has taken a schedule's stored write on, for `schedules` views' `live`. */
  scheduleApplied?: (record: ScheduleRecord) => boolean;
  /** Who `schedules` writes are recorded as, when a call does not say; default the OS user@host. */
  who?: string;
  /** Bound on every operation, Redis and the lease included. Default 10 s. */
  timeoutMs?: number;
  /**
   * How pauses, resumes and refused triggers are made durable (they decide what runs): a running
   * instance passes its own. Default: from a URL, its topology's (`WAIT` on Sentinel and Cluster); with a
   * given client, none.
   */
  writes?: WritePath;
}

/** One job as the admin API sees it: from Redis, completed from its definition when one is loaded. */
export interface AdminJobStatus {
  name: string;
  /** From the loaded definition; null when no definition is loaded here. */
  queue: string | null;
  schedule: string | null;
  timezone: string | null;
  next: string | null;
  paused: boolean;
  pauseNote: string | null;
  /** The newest recorded tick due by now (Redis time): run, skipped or pending. */
  lastTick: string | null;
  /** The newest run: with ticks staged, the run of `lastTick` (null when that tick has none). */
  lastJobId: string | null;
  /** Ticks recorded ahead of their due time, oldest first: their runs wait in BullMQ as delayed jobs. */
  staged: string[];
  enqueued: number;
  skipped: Record<string, number>;
  fenced: number;
}

/** `Admin.describe`: a job (or runtime schedule) with its next ticks and newest runs. */
export interface JobDescription extends AdminJobStatus {
  /** `job`: defined in jobs/; `schedule`: a runtime schedule. */
  kind: 'job' | 'schedule';
  /** The content hash of its definition as loaded here (compare with each run's `definition`); null when not loaded here. */
  definition: string | null;
  /** Its next ticks (ISO instants, by Redis' clock); empty when its definition is not loaded here. */
  nextTicks: string[];
  /** Its runs that failed for good in a row, as `pauseOnFailure` counts them (0 for a job without it). */
  failedInARow: number;
  /** Its newest runs, ticks and skipped ranges, newest first (see `Admin.runs`). */
  runs: RecentRun[];
  /** Its newest backfills (at most 5) with their progress, newest first (see `Admin.backfills`). */
  backfills: BackfillProgress[];
}

export interface ClusterStatus {
  /** The lock read for the leader, e.g. `redis/leasebeat` or `default/leasebeat`. */
  lock: string;
  /** The lease holder; null when nobody holds it or the lease does not exist. */
  leader: string | null;
  leaderTransitions: number | null;
  /** When the holder last renewed (RFC 3339), and the lease's duration. */
  renewTime: string | null;
  leaseDurationSeconds: number | null;
  /** Why the lease could not be read, if it could not. */
  leaseError: string | null;
  fence: FenceState;
  /** Every registered member with its condition as the leader judges it; the leader first. */
  members: MembersReport['members'];
  /** The leader's latest judgement of the cluster, and who made it; null while no leader publishes one. */
  disruption: MembersReport['disruption'];
  judgedBy: MembersReport['judgedBy'];
  jobs: AdminJobStatus[];
  /** The jobs folder as seen here: null when no folder was given or it does not exist. */
  jobsDir: { path: string; loaded: number; errors: string[] } | null;
  /** How many runtime schedules are stored (not in `jobs`: `schedules.list` pages through them). */
  schedules: number;
}

export interface DrainOptions {
  note?: string;
  /** Cordon it even when no other member could lead then (see `Admin.cordon`). */
  force?: boolean;
  /** Wait until the member reports no active jobs; bounded by `timeoutMs`. */
  wait?: boolean;
  timeoutMs?: number;
  /** Called once the cordon is stored, before the wait. */
  onCordoned?: (identity: string) => void;
  onProgress?: (record: MemberRecord) => void;
}

/**
 * The operations surface of a leasebeat cluster, for the CLI, the HTTP API and applications. Every
 * answer comes from Redis and the lease, so it works from any machine that reaches them.
 */
export interface Admin {
  status(): Promise<ClusterStatus>;
  members(): Promise<MembersReport>;
  /**
   * Runs a job now, outside its schedule: the leader takes the request and adds it under its term's fence
   * through the same enqueue as a tick (flows included; `manual` is true), at most once. Fails with
   * `unknown-job` or `paused` when the leader refuses it, and `timeout` when no leader took it within the
   * bound (it then never runs).
   */
  trigger(job: string, options?: { by?: string }): Promise<TriggerResult>;
  /**
   * Pauses a job at run time. Refuses a name neither known to the cluster (scheduled by a leader) nor
   * defined in the jobs folder, unless `force` (to pause a job before it is deployed).
   */
  pause(job: string, options?: { note?: string; force?: boolean; by?: string }): Promise<void>;
  /** Resumes a paused job; false when it was not paused. Unknown names are refused unless `force`. */
  resume(job: string, options?: { force?: boolean; by?: string }): Promise<boolean>;
  /**
   * Who paused, resumed, triggered, backfilled, edited or removed a job or schedule, and when: its newest `limit`
   * entries (default 20, at most 100), newest first, of the deployment's newest 100,000 (see
   * `AUDIT_STREAM_MAXLEN`). `by` of each action is the caller's (default: `who`).
   */
  history(job: string, options?: { limit?: number }): Promise<AuditEntry[]>;
  /**
   * Cordons a member (identity or a unique prefix); returns the full identity. Refused with
   * `no-eligible-leader` when the member is the last one that could lead (Ready, uncordoned, not shutting
   * down), since the cluster would then run without a leader, unless `force`.
   */
  cordon(member: string, options?: { note?: string; force?: boolean }): Promise<string>;
  uncordon(member: string): Promise<{ identity: string; changed: boolean }>;
  /** Cordons a member (refused as `cordon` is) and, with `wait`, waits until it has no active jobs (bounded by `timeoutMs`). */
  drain(member: string, options?: DrainOptions): Promise<{ identity: string; outcome: DrainOutcome | undefined }>;
  /**
   * The newest `limit` entries of a job (default 20), newest first: its ticks, its ranges of skipped ticks
   * and its manual runs, each run with its BullMQ state as Redis has it.
   */
  runs(job: string, options?: { limit?: number }): Promise<RecentRun[]>;
  /**
   * A job or runtime schedule in full: its status, its next `ticks` ticks (default 10; at most 1,000, none
   * more than 10 years ahead), its newest `runs`
   * runs (default 10) with duration, lag, term, instance and definition hash. Throws AdminError
   * `unknown-job` for a name neither the cluster nor the loaded definitions know.
   */
  describe(job: string, options?: { ticks?: number; runs?: number }): Promise<JobDescription>;
  /**
   * Asks the leader to run every tick of `job` in [from, to] that the ledger has no run of, once, at
   * `rate` a second (docs/operations.md, "Backfilling a range"); returns the backfill as stored, queued.
   * Needs the job's definition (the jobs folder). Throws `BackfillError` for a range or option it cannot
   * run (nothing written), `AdminError` `unknown-job` for a job not defined here.
   */
  backfill(job: string, options: BackfillOptions): Promise<BackfillProgress>;
  /** A job's backfills with their progress, newest first. */
  backfills(job: string): Promise<BackfillProgress[]>;
  /** The runtime schedules: create, edit, remove, list and describe them (docs/schedules.md). */
  readonly schedules: Schedules;
  close(): Promise<void>;
}

const DEFAULT_TIMEOUT_MS = 10_000;
/** The backfills `describe` shows: the newest few; `backfills()` has them all. */
const DESCRIBED_BACKFILLS = 5;
/** How often the jobs folder is looked at for changes (see `definitions`). */
const FOLDER_CHECK_MS = 1_000;
/** How often `trigger` looks for the leader's outcome. */
const TRIGGER_RESULT_POLL_MS = 100;
/** The share of the bound within which a leader must take a trigger request (the rest is for its add). */
const TRIGGER_WINDOW_SHARE = 0.75;

/** Creates the admin API over a cluster's Redis (and, for the leader, its lock). */
export function createAdmin(options: AdminOptions): Admin {
  return new ClusterAdmin(options);
}

class ClusterAdmin implements Admin {
  private readonly redis: Redis;
  private readonly ownsRedis: boolean;
  private readonly keys: KeySpace;
  private readonly ledger: TickLedger;
  /** Ends what durable writes hold open (the Sentinel primary check's connections). */
  private readonly closeDurability: () => void;
  /** The topology of the admin's own URL; undefined with a given client (then `connected()` checks nothing). */
  private readonly connections: RedisConnections | undefined;
  private serverChecked: Promise<void> | undefined;
  private readonly store: MemberStore;
  private readonly lock: ResourceLock;
  private readonly queues: QueueSet;
  private readonly timeoutMs: number;
  private readonly where: string;
  private readonly audit: AuditLog;
  private readonly writes: WritePath;
  /** Who acts, when the caller does not say: the CLI's user@host. */
  private readonly who: string;
  /** The job folder as last loaded, and the names and modification times of its files then. */
  private loadedJobs: { stamp: string; checkedAt: number; settled: boolean; result: Promise<LoadResult> } | undefined;
  readonly schedules: Schedules;
  private readonly scheduleStore: ScheduleStore;

  constructor(private readonly options: AdminOptions) {
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.ownsRedis = typeof options.connection === 'string';
    const connections = typeof options.connection === 'string' ? RedisConnections.fromUrl(options.connection) : undefined;
    this.connections = connections;
    // The queues' prefix as the instances choose it: hash-tagged on Cluster.
    const bullPrefix = connections ? connections.bullPrefix(options.bullPrefix, options.prefix) : bullPrefixFor(options.connection as Redis, options.bullPrefix, options.prefix);
    this.redis =
      connections
        ? // Through the topology (one server, Sentinel or Cluster), failing fast instead of queueing commands
          // for a Redis that is down or hung: every call has a bound.
          (connections.open('control', {
            lazyConnect: true,
            connectTimeout: this.timeoutMs,
            commandTimeout: this.timeoutMs,
            maxRetriesPerRequest: 1,
          }) as Redis)
        : (options.connection as Redis);
    if (this.ownsRedis) this.redis.on('error', () => undefined);
    this.where = typeof options.connection === 'string' ? redact(options.connection) : 'the given Redis connection';
    const leaseName = options.leaseName ?? 'leasebeat';
    this.keys = new KeySpace(options.prefix, leaseName);
    // Pauses, resumes and refused triggers decide what runs: on a replicated topology they count once
    // replicas hold them, as the instances' writes do.
    const durable = !options.writes && connections ? replicaWaitFor(connections, this.redis) : undefined;
    this.closeDurability = () => durable?.close();
    const writes = options.writes ?? (durable?.wait.enabled ? durable.wait : directWrites(this.redis));
    this.writes = writes;
    this.ledger = new TickLedger(this.redis, this.keys, writes);
    this.audit = new AuditLog(this.redis, this.keys, writes);
    this.who = options.who ?? `${userInfo().username}@${hostname()}`;
    this.scheduleStore = new ScheduleStore(this.redis, this.keys, writes);
    this.schedules = createSchedules({
      store: this.scheduleStore,
      types: async () => (await this.definitions(false))?.jobs,
      ...(options.scheduleApplied ? { applied: options.scheduleApplied } : {}),
      redisNow: () => this.redisTime(),
      runs: async (name, limit) => {
        try {
          return await this.runs(name, { limit });
        } catch (error) {
          // A schedule no leader has recorded yet is unknown to the cluster: it has no runs so far.
          if (error instanceof AdminError && error.code === 'unknown-job') return [];
          throw error;
        }
      },
      jobCounts: (name) => this.ledger.jobState(name),
      pausedJobs: () => this.ledger.pausedJobs(),
      pause: (name, note, by) => this.pause(name, { note, force: true, by }),
      resume: (name, by) => this.resume(name, { force: true, by }),
      trigger: (name, by) => this.trigger(name, { by }),
      who: this.who,
    });
    this.store = new MemberStore(this.redis, this.keys);
    this.lock = options.lock ?? new RedisLeaseLock({ connection: this.redis, name: leaseName, prefix: options.prefix, identity: 'leasebeat-admin' });
    this.queues = new QueueSet({ connection: this.redis, prefix: bullPrefix, onError: () => undefined });
  }

  status(): Promise<ClusterStatus> {
    return this.bounded('status', async (signal) => {
      const [lease, fence, paused, known, definitions] = await Promise.all([
        this.readLease(signal),
        this.ledger.fence(),
        this.ledger.pausedJobs(),
        this.knownJobs(),
        this.definitions(false),
      ]);
      const [members, redisNow, scheduleIds] = await Promise.all([this.membersNow(holderOf(lease)), this.redisTime(), this.redis.zrange(this.keys.scheduleIds, 0, -1)]);
      // Runtime schedules are listed page by page (`schedules.list`), not each in every status.
      const schedules = new Set(scheduleIds);
      const names = new Set([...known, ...paused.keys(), ...(definitions?.jobs.keys() ?? [])].filter((name) => !schedules.has(name)));
      const jobs = await Promise.all([...names].sort().map((name) => this.jobStatus(name, definitions?.jobs.get(name), paused, redisNow)));
      return {
        lock: this.lock.describe(),
        leader: lease.record?.holderIdentity || null,
        leaderTransitions: lease.record?.leaderTransitions ?? null,
        renewTime: lease.record && Number.isFinite(lease.record.renewTime) ? new Date(lease.record.renewTime).toISOString() : null,
        leaseDurationSeconds: lease.record?.leaseDurationSeconds ?? null,
        leaseError: lease.error ?? null,
        fence,
        members: members.members,
        disruption: members.disruption,
        judgedBy: members.judgedBy,
        jobs,
        schedules: schedules.size,
        jobsDir: definitions ? { path: this.options.jobsDir ?? '(loaded by this instance)', loaded: definitions.jobs.size, errors: definitions.errors.map((e) => e.message) } : null,
      };
    });
  }

  /**
   * One job, or runtime schedule, in full: its status, its next `ticks` ticks in its time zone, its newest
   * `runs` runs (with their duration, lag, term, instance and definition hash), and the content hash of
   * its definition as loaded here. Throws AdminError `unknown-job` for a name neither the cluster nor
   * the loaded definitions know.
   */
  describe(name: string, options: { ticks?: number; runs?: number } = {}): Promise<JobDescription> {
    return this.bounded(`describe ${name}`, async () => {
      const [paused, definitions, record, redisNow] = await Promise.all([this.ledger.pausedJobs(), this.definitions(false), this.scheduleStore.get(name), this.redisTime()]);
      const job = this.definitionOf(name, definitions?.jobs, record);
      // runs() refuses a name no one knows: a job not deployed yet, or a typo.
      const [status, runs, failures, backfills] = await Promise.all([
        this.jobStatus(name, job, paused, redisNow),
        this.runs(name, { limit: options.runs ?? 10 }).catch((error: unknown) => {
          if (error instanceof AdminError && error.code === 'unknown-job' && (job || record)) return [];
          throw error;
        }),
        this.ledger.failedRunsInARow(name),
        jobBackfills(this.redis, this.keys, name),
      ]);
      return {
        ...status,
        kind: record && !definitions?.jobs.has(name) ? 'schedule' : 'job',
        definition: job ? definitionHash(job) : null,
        nextTicks: job ? listedTicks(job, redisNow, options.ticks ?? 10) : [],
        failedInARow: failures,
        runs,
        backfills: backfills.slice(0, DESCRIBED_BACKFILLS),
      };
    });
  }

  /** A file job's definition as loaded here, else the runtime schedule `record` as its spec reads (its ticks, if not its handler). */
  private definitionOf(name: string, files: ReadonlyMap<string, ScheduledJob> | undefined, record: ScheduleRecord | undefined): ScheduledJob | undefined {
    const file = files?.get(name);
    if (file || !record) return file;
    const compiled = compileSpec(record, files);
    return compiled.ok ? compiled.job : undefined;
  }

  /** A job's line of the cluster status: its definition's trigger (when loaded here) and the ledger's record of it. */
  private async jobStatus(name: string, job: ScheduledJob | undefined, paused: ReadonlyMap<string, { note: string }>, redisNow: number): Promise<AdminJobStatus> {
    const state = await this.ledger.jobState(name);
    const recorded = await this.lastAndStaged(name, state, redisNow);
    const next = job ? nextTicks(job, redisNow, 1)[0] : undefined;
    return {
      name,
      queue: job?.queue ?? null,
      schedule: job ? describeTrigger(job) : null,
      timezone: job?.timezone ?? null,
      next: next === undefined ? null : new Date(next).toISOString(),
      paused: (job?.paused ?? false) || paused.has(name),
      pauseNote: paused.get(name)?.note ?? null,
      ...recorded,
      enqueued: state.enqueued,
      skipped: state.skipped,
      fenced: state.fenced,
    };
  }

  members(): Promise<MembersReport> {
    return this.bounded('members', async (signal) => this.membersNow(holderOf(await this.readLease(signal))));
  }

  trigger(name: string, options: { by?: string } = {}): Promise<TriggerResult> {
    // A leader must take the request within the first part of the bound; the rest is for its add.
    const windowMs = Math.max(1, Math.floor(this.timeoutMs * TRIGGER_WINDOW_SHARE));
    return this.bounded(`trigger ${name}`, async (signal) => {
      const request = await submitTrigger(this.redis, this.keys, name, windowMs);
      const started = Date.now();
      for (;;) {
        const outcome = await triggerOutcome(this.redis, this.keys, request.id);
        if (outcome) {
          const result = this.triggered(name, outcome);
          await this.audit.record(name, 'trigger', options.by ?? this.who, { ...result });
          return result;
        }
        if (Date.now() - started >= windowMs && (await this.ledger.abandonTrigger(request))) {
          // Recorded as refused before any leader took it: no leader will ever run it.
          throw new AdminError(
            'timeout',
            `no leader took request ${request.id} within ${formatDuration(windowMs)}; it will not run (is an instance of the cluster running?)`,
          );
        }
        // Taken, or not yet time to give up: the leader pushes the outcome right after its add.
        await sleep(TRIGGER_RESULT_POLL_MS, undefined, { signal }).catch(() => undefined);
        if (signal.aborted) throw signal.reason;
      }
    });
  }

  private triggered(name: string, outcome: TriggerOutcome): TriggerResult {
    if (!('refused' in outcome)) return outcome;
    if (outcome.refused === 'paused') throw new AdminError('paused', `${name} is paused: \`leasebeat resume ${name}\` first; the trigger did not run`);
    if (outcome.refused === 'unknown-job') {
      throw new AdminError('unknown-job', `the leader has no job named "${name}" loaded: \`leasebeat status\` lists the jobs`);
    }
    throw new AdminError('timeout', `the leader refused the trigger of ${name} (${outcome.refused}); it will not run`);
  }

  pause(name: string, options: { note?: string; force?: boolean; by?: string } = {}): Promise<void> {
    return this.bounded(`pause ${name}`, async () => {
      if (!options.force) await this.requireKnownJob(name);
      await this.ledger.pause(name, options.note ?? '');
      await this.audit.record(name, 'pause', options.by ?? this.who, { note: options.note ?? '' });
    });
  }

  resume(name: string, options: { force?: boolean; by?: string } = {}): Promise<boolean> {
    return this.bounded(`resume ${name}`, async () => {
      const resumed = await this.ledger.resume(name);
      if (!resumed && !options.force) await this.requireKnownJob(name);
      if (resumed) await this.audit.record(name, 'resume', options.by ?? this.who);
      return resumed;
    });
  }

  backfill(name: string, options: BackfillOptions): Promise<BackfillProgress> {
    return this.bounded(`backfill ${name}`, async () => {
      const [definitions, record] = await Promise.all([this.definitions(false), this.scheduleStore.get(name)]);
      const job = this.definitionOf(name, definitions?.jobs, record);
      if (!job) {
        await this.requireKnownJob(name, 'backfill reads the schedule from the definition: point LEASEBEAT_JOBS_DIR (or --jobs-dir) at the folder the instances load');
        throw new AdminError('unknown-job', `"${name}" is neither defined in ${this.options.jobsDir ?? 'the loaded jobs'} nor a runtime schedule: backfill reads its ticks from its definition`);
      }
      const context = { redis: this.redis, keys: this.keys, writes: this.writes, redisNow: () => this.redisTime(), audit: (job: string, by: string, detail: Record<string, unknown>) => this.audit.record(job, 'backfill', by, detail) };
      return requestBackfill(context, job, options, options.by ?? this.who);
    });
  }

  backfills(name: string): Promise<BackfillProgress[]> {
    return this.bounded(`backfills ${name}`, () => jobBackfills(this.redis, this.keys, name));
  }

  history(name: string, options: { limit?: number } = {}): Promise<AuditEntry[]> {
    return this.bounded(`history ${name}`, () => this.audit.history(name, options.limit ?? 20));
  }

  cordon(member: string, options: { note?: string; force?: boolean } = {}): Promise<string> {
    return this.bounded(`cordon ${member}`, async (signal) => {
      const identity = await this.resolveMember(member);
      if (!options.force) await this.requireAnotherLeader(identity, signal);
      await this.store.cordon(identity, { at: Date.now(), note: options.note ?? '' });
      return identity;
    });
  }

  uncordon(member: string): Promise<{ identity: string; changed: boolean }> {
    return this.bounded(`uncordon ${member}`, async () => {
      const identity = await this.resolveMember(member);
      return { identity, changed: await this.store.uncordon(identity) };
    });
  }

  async drain(member: string, options: DrainOptions = {}): Promise<{ identity: string; outcome: DrainOutcome | undefined }> {
    const identity = await this.cordon(member, { note: options.note ?? 'drain', force: options.force ?? false });
    options.onCordoned?.(identity);
    if (!options.wait) return { identity, outcome: undefined };
    const timeoutMs = options.timeoutMs ?? 5 * 60_000;
    // The wait has its own bound; each poll is a single bounded read.
    const outcome = await this.bounded(
      `drain ${identity}`,
      () => waitForDrain(this.store, identity, { timeoutMs, pollMs: 250, clock: systemClock, onProgress: options.onProgress }),
      timeoutMs + this.timeoutMs,
    );
    return { identity, outcome };
  }

  runs(name: string, options: { limit?: number } = {}): Promise<RecentRun[]> {
    return this.bounded(`runs ${name}`, async () => {
      const limit = Math.max(1, Math.min(options.limit ?? 20, 1000));
      const [ticks, ranges, manual] = await Promise.all([
        this.redis.zrevrange(this.keys.ledgerIndex(name), 0, limit - 1),
        this.ledger.skippedRanges(name),
        this.redis.hgetall(this.keys.manual(name)),
      ]);
      const fates = ticks.length ? await this.redis.hmget(this.keys.ledger(name), ...ticks) : [];
      // Each entry with its time (epoch ms) for the newest-first order; a range is as new as its last tick.
      const entries: Array<{ at: number; run: RecentRun; queueHint?: string }> = [];
      ticks.forEach((tick, i) => {
        const stored = fates[i];
        // No record: pruned between the two reads.
        const record = stored === null || stored === undefined ? undefined : parseLedgerRecord(stored);
        const fate = record?.kind ?? 'pruned';
        const jobId = (record && recordedRun(record)) ?? null;
        // An `unstaging` record is a staged run being taken back: it says why, and in which queue it waits.
        const reason = record?.kind === 'skipped' || record?.kind === 'unstaging' ? record.reason : null;
        const run: RecentRun = { kind: 'tick', tick: new Date(Number(tick)).toISOString(), to: null, count: 1, fate, jobId, reason, queue: null, state: null, ...NO_RUN_DETAILS };
        entries.push({ at: Number(tick), run, ...(record?.kind === 'unstaging' ? { queueHint: record.queue } : {}) });
      });
      for (const range of ranges) {
        const run: RecentRun = {
          kind: 'range', tick: new Date(range.from).toISOString(), to: new Date(range.to).toISOString(), count: range.count,
          fate: 'skipped', jobId: null, reason: range.reason, queue: null, state: null, ...NO_RUN_DETAILS,
        };
        entries.push({ at: range.to, run });
      }
      // Enqueued or claimed requests; a refused one never became a run.
      const manualRuns = Object.values(manual).flatMap((stored) => {
        const record = parseTriggerRecord(stored);
        const jobId = recordedRun(record);
        return jobId ? [{ fate: record.kind, jobId }] : [];
      });
      const located = await this.locateRuns([...entries.flatMap((e) => (e.run.jobId ? [{ jobId: e.run.jobId, hint: e.queueHint }] : [])), ...manualRuns]);
      for (const { fate, jobId } of manualRuns) {
        // A manual run is placed by when it was added: a claim whose add has not landed has no time yet.
        const found = located.get(jobId);
        if (!found) continue;
        entries.push({ at: found.addedAt, run: { kind: 'manual', tick: new Date(found.addedAt).toISOString(), to: null, count: 1, fate, jobId, reason: null, queue: null, state: null, ...NO_RUN_DETAILS } });
      }
      if (entries.length === 0) await this.requireKnownJob(name);
      const newest = entries.sort((a, b) => b.at - a.at).slice(0, limit).map((e) => e.run);
      await Promise.all(
        newest.map(async (run) => {
          if (!run.jobId) return;
          const found = located.get(run.jobId);
          run.queue = found?.queue ?? null;
          // Not in any queue of the deployment: BullMQ's retention removed it (or its add never landed).
          if (!found) return void (run.state = 'unknown');
          const queue = this.queues.get(found.queue);
          const [state, job, runner] = await Promise.all([queue.getJobState(run.jobId), queue.getJob(run.jobId), this.redis.hget(queue.toKey(run.jobId), RUNNER_FIELD)]);
          run.state = state;
          Object.assign(run, runDetails(job, runner));
        }),
      );
      return newest;
    });
  }

  /**
   * A job's last tick due by `now` and the ticks staged ahead of it. The ledger's watermark
   * (`lastScheduledTick`) includes staged ticks, so alone it shows a "last" tick in the future, equal to
   * the next one; only for a job with staged ticks are the index and the skipped ranges read.
   */
  private async lastAndStaged(name: string, state: JobState, now: number): Promise<Pick<AdminJobStatus, 'lastTick' | 'lastJobId' | 'staged'>> {
    const iso = (ms: number | undefined): string | null => (ms === undefined ? null : new Date(ms).toISOString());
    if (state.lastScheduledTick === undefined || state.lastScheduledTick <= now) {
      return { lastTick: iso(state.lastScheduledTick), lastJobId: state.lastJobId ?? null, staged: [] };
    }
    const [due, ahead, ranges] = await Promise.all([
      this.redis.zrevrangebyscore(this.keys.ledgerIndex(name), now, '-inf', 'LIMIT', 0, 1),
      this.redis.zrangebyscore(this.keys.ledgerIndex(name), `(${now}`, '+inf'),
      this.redis.zrevrangebyscore(this.keys.skips(name), now, '-inf', 'LIMIT', 0, 1),
    ]);
    const tick = due[0] === undefined ? undefined : Number(due[0]);
    // A range of skipped ticks may end after the newest single tick due (a catch-up just before the staging).
    const rangeEnd = ranges[0] === undefined ? undefined : (JSON.parse(ranges[0]) as SkippedRange).to;
    const last = rangeEnd !== undefined && rangeEnd <= now && (tick === undefined || rangeEnd > tick) ? rangeEnd : tick;
    const record = last === tick && tick !== undefined ? await this.ledger.tickRecord(name, tick) : undefined;
    return { lastTick: iso(last), lastJobId: (record && recordedRun(record)) ?? null, staged: ahead.map((t) => new Date(Number(t)).toISOString()) };
  }

  private async redisTime(): Promise<number> {
    const [seconds, micros] = await this.redis.time();
    return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
  }

  /**
   * Where each run's BullMQ job is, from Redis alone (a folder of definitions need not be at hand, and the
   * job's queue may have changed since): the queue its record names, else the default queue, else every
   * other queue of the deployment's BullMQ prefix. Found runs come with BullMQ's add time.
   */
  private async locateRuns(runs: Array<{ jobId: string; hint?: string | undefined }>): Promise<Map<string, { queue: string; addedAt: number }>> {
    const found = new Map<string, { queue: string; addedAt: number }>();
    const lookIn = async (candidates: Array<{ jobId: string; queue: string }>): Promise<void> => {
      const pipeline = this.redis.pipeline();
      for (const { jobId, queue } of candidates) pipeline.hget(this.queues.get(queue).toKey(jobId), 'timestamp');
      const replies = (await pipeline.exec()) ?? [];
      candidates.forEach(({ jobId, queue }, i) => {
        const addedAt = Number(replies[i]?.[1] ?? Number.NaN);
        if (!found.has(jobId) && Number.isFinite(addedAt)) found.set(jobId, { queue, addedAt });
      });
    };
    const wanted = [...new Map(runs.map((run) => [run.jobId, run])).values()];
    if (wanted.length === 0) return found;
    await lookIn(wanted.flatMap(({ jobId, hint }) => [...(hint ? [{ jobId, queue: hint }] : []), { jobId, queue: JOB_DEFAULTS.queue }]));
    const missing = wanted.filter(({ jobId }) => !found.has(jobId));
    if (missing.length === 0) return found;
    const others = (await this.queueNames()).filter((queue) => queue !== JOB_DEFAULTS.queue);
    if (others.length > 0) await lookIn(missing.flatMap(({ jobId }) => others.map((queue) => ({ jobId, queue }))));
    return found;
  }

  /** The queues under the deployment's BullMQ prefix: BullMQ writes `<prefix>:<queue>:meta` at a queue's first add. */
  private async queueNames(): Promise<string[]> {
    const head = this.queues.get(JOB_DEFAULTS.queue).toKey('').slice(0, -`${JOB_DEFAULTS.queue}:`.length);
    const names = new Set<string>();
    // On Redis Cluster the prefix's hash tag puts every queue on one node, which SCAN must be sent to.
    const client = this.redis as RedisClient;
    for (const node of isCluster(client) ? client.nodes('master') : [client]) {
      let cursor = '0';
      do {
        const [next, keys] = await node.scan(cursor, 'MATCH', `${head.replace(/[*?[\]\\]/g, (c) => `\\${c}`)}*:meta`, 'COUNT', 1000);
        cursor = next;
        for (const key of keys) {
          const queue = key.slice(head.length, -':meta'.length);
          // Queue names hold no ':'; a longer match is some other key.
          if (queue && !queue.includes(':')) names.add(queue);
        }
      } while (cursor !== '0');
    }
    return [...names].sort();
  }

  async close(): Promise<void> {
    await Promise.race([this.queues.close().catch(() => undefined), new Promise((r) => setTimeout(r, 1000).unref())]);
    this.closeDurability();
    if (this.ownsRedis) this.redis.disconnect();
  }

  /** Runs `work` with the admin's bound; past it, fails with a timeout error that says what did not answer. */
  private async bounded<T>(what: string, work: (signal: AbortSignal) => Promise<T>, timeoutMs = this.timeoutMs): Promise<T> {
    const controller = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const error = new AdminError(
          'timeout',
          `${what} did not finish within ${formatDuration(timeoutMs)}: Redis at ${this.where} (or the ${this.lock.describe()} lease) does not answer`,
        );
        controller.abort(error);
        reject(error);
      }, timeoutMs);
    });
    try {
      return await Promise.race([this.connected().then(() => work(controller.signal)), timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  private async connected(): Promise<void> {
    if (!this.ownsRedis) return;
    if (this.redis.status === 'wait') {
      try {
        await this.redis.connect();
      } catch (error) {
        throw new AdminError('unreachable', `no Redis answers at ${this.where}: ${(error as Error).message}`);
      }
    }
    // Once: a URL the server cannot honour (a database it does not have) must not be answered from another.
    this.serverChecked ??= this.connections!.checkServer(this.redis).catch((error: unknown) => {
      this.serverChecked = undefined;
      throw error instanceof RedisTopologyError ? new AdminError('config', error.message) : error;
    });
    await this.serverChecked;
  }

  private async readLease(
    signal: AbortSignal,
  ): Promise<{ record?: { holderIdentity: string; leaderTransitions: number; renewTime: number; leaseDurationSeconds: number }; missing?: true; error?: string }> {
    // Half the operation's bound: a hung lock API (the Kubernetes API server, say) costs the leader column,
    // not the whole answer, which Redis can still give.
    const boundMs = Math.max(1, Math.floor(this.timeoutMs / 2));
    const read = AbortSignal.any([signal, AbortSignal.timeout(boundMs)]);
    try {
      return { record: (await this.lock.get(read)).record };
    } catch (error) {
      if (error instanceof LockNotFoundError) return { missing: true };
      const why = read.aborted && !signal.aborted ? `no answer within ${formatDuration(boundMs)}` : (error as Error).message;
      return { error: `could not read the lease ${this.lock.describe()}: ${why}` };
    }
  }

  /** The members report; `leader` (the lease holder, `""` for none) decides who is shown as leader. */
  private async membersNow(leader: string | undefined): Promise<MembersReport> {
    const [records, cordons, health] = await Promise.all([this.store.list(), this.store.cordons(), this.store.health()]);
    return membersReport(records, cordons, health, leader);
  }

  private knownJobs(): Promise<Set<string>> {
    return this.ledger.knownJobs();
  }

  /** The loaded job folder; undefined when none is configured or it does not exist, unless `required`. */
  private async definitions(required: boolean): Promise<{ jobs: ReadonlyMap<string, ScheduledJob>; errors: LoadError[] } | undefined> {
    if (this.options.jobs) return { jobs: this.options.jobs(), errors: [] };
    const dir = this.options.jobsDir;
    // Loaded again only when the folder changed, and the folder looked at no more than once a second: each
    // import of a job file runs its top-level code and stays in memory, so an import of 300 schedulers must
    // not load the folder 300 times, and 100,000 upserts must not stat it 100,000 times.
    const known = this.loadedJobs;
    if (known?.settled && performance.now() - known.checkedAt < FOLDER_CHECK_MS) return known.result;
    if (dir === undefined || !existsSync(dir) || !statSync(dir).isDirectory()) {
      if (!required) return undefined;
      throw new AdminError(
        'no-definitions',
        dir === undefined
          ? 'no jobs folder is configured: trigger runs the job from its definition (LEASEBEAT_JOBS_DIR or --jobs-dir)'
          : `the jobs folder ${dir} does not exist: trigger runs the job from its definition; point LEASEBEAT_JOBS_DIR (or --jobs-dir) at the folder the instances load`,
      );
    }
    const stamp = folderStamp(dir);
    if (known?.stamp === stamp) known.checkedAt = performance.now();
    else {
      const loading = { stamp, checkedAt: performance.now(), settled: false, result: loadJobs(dir) };
      void loading.result.then(() => (loading.settled = true), () => undefined);
      this.loadedJobs = loading;
    }
    const loading = this.loadedJobs!;
    if (loading.settled) return loading.result;
    // A bound of their own, half the operation's (as the lease's read): a job file whose import never
    // settles costs the definitions, not the answer Redis gives, and is not reported as Redis not answering.
    const boundMs = Math.max(1, Math.floor(this.timeoutMs / 2));
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<{ jobs: ReadonlyMap<string, ScheduledJob>; errors: LoadError[] }>((resolve) => {
      timer = setTimeout(() => {
        const message = `${dir}: the job files did not finish loading within ${formatDuration(boundMs)} (a job file whose import never settles?), so their definitions are left out: \`leasebeat validate ${dir}\` names the file`;
        resolve({ jobs: new Map(), errors: [{ file: dir, message }] });
      }, boundMs);
    });
    try {
      return await Promise.race([loading.result, late]);
    } finally {
      clearTimeout(timer);
    }
  }


  private async requireKnownJob(name: string, fix = 'pass --force to use the name anyway (a job not deployed yet)'): Promise<void> {
    const known = await this.knownJobs();
    if (known.has(name)) return;
    const definitions = await this.definitions(false);
    if (definitions?.jobs.has(name)) return;
    const names = [...new Set([...known, ...(definitions?.jobs.keys() ?? [])])].sort();
    throw new AdminError(
      'unknown-job',
      `no job named "${name}" is known to the cluster${definitions ? ` or defined in ${this.options.jobsDir ?? 'the loaded jobs'}` : ''}` +
        (names.length > 0 ? ` (known: ${names.slice(0, 20).join(', ')}${names.length > 20 ? ', ...' : ''})` : '') +
        `; ${fix}`,
    );
  }

  /**
   * Refuses to take out of rotation the last member that could lead: the lease would then go unheld, and
   * every tick wait, until someone uncordons a member or starts one. Two cordons at once can still both
   * pass (this is read, then written): it guards against a mistake, it is no lock.
   */
  private async requireAnotherLeader(identity: string, signal: AbortSignal): Promise<void> {
    const { members } = await this.membersNow(holderOf(await this.readLease(signal)));
    const target = members.find((m) => m.identity === identity);
    // A member that could not lead anyway changes nothing by being cordoned.
    if (!target || cannotLead(target) !== undefined) return;
    const others = members.filter((m) => m !== target);
    if (others.some((m) => cannotLead(m) === undefined)) return;
    const why = others.map((m) => `${m.identity} ${cannotLead(m)}`).join(', ');
    throw new AdminError(
      'no-eligible-leader',
      `refused: ${identity} is the last member that can lead (${why || 'no other member'}); cordoned, it would leave the cluster ` +
        'without a leader and every tick waiting: uncordon or start another member first, or pass --force',
    );
  }

  /** The identity of a registered (or cordoned) member: the exact identity, or a prefix matching only one. */
  private async resolveMember(given: string): Promise<string> {
    const known = new Set([...(await this.store.list()).keys(), ...(await this.store.cordons()).keys()]);
    if (known.has(given)) return given;
    const matches = [...known].filter((identity) => identity.startsWith(given)).sort();
    if (matches.length === 1) return matches[0]!;
    if (matches.length > 1) {
      throw new AdminError('ambiguous-member', `"${given}" matches ${matches.length} members (${matches.join(', ')}): give more of the identity`);
    }
    throw new AdminError('unknown-member', `no member "${given}" is registered: \`leasebeat status\` lists the members`);
  }
}

/**
 * The lease holder as read (`""` when the lease names nobody), or undefined when it says nothing: it could
 * not be read, or no lease was ever created (then the members' own records are all there is).
 */
function holderOf(lease: { record?: { holderIdentity: string }; missing?: true; error?: string }): string | undefined {
  return lease.record?.holderIdentity;
}

/** One job of `leasebeat status` as a line of text: a pause with its note, the next and last ticks, the counts. */
export function formatJobLine(row: AdminJobStatus): string {
  const paused = row.paused ? ` [paused${row.pauseNote ? `: ${row.pauseNote}` : ''}]` : '';
  // A staged tick is not "last": it is due later, its run added ahead as a delayed job.
  const staged = row.staged.length ? `  staged ${row.staged[0]}${row.staged.length > 1 ? ` (+${row.staged.length - 1})` : ''}` : '';
  return (
    `${row.name}${paused}  next ${row.next ?? '-'}  last ${row.lastTick ?? '-'} ${row.lastJobId ?? ''}${staged}  ` +
    `enqueued ${row.enqueued} skipped ${JSON.stringify(row.skipped)} fenced ${row.fenced}`
  );
}

/** `leasebeat runs` as text, one line per entry, newest first (or one line saying there is none). */
export function formatRuns(job: string, runs: readonly RecentRun[]): string[] {
  if (runs.length === 0) return [`${job}: nothing recorded yet (no tick, skipped range or manual run)`];
  return runs.map((run) => {
    const when = run.kind === 'range' ? `${run.tick} … ${run.to}` : run.tick;
    const what = run.kind === 'range' ? `skipped ${run.count} tick${run.count === 1 ? '' : 's'}` : run.kind === 'manual' ? `manual run, ${run.fate}` : run.fate;
    const details = [
      run.durationMs !== null && `took ${formatDuration(run.durationMs)}`,
      run.lagMs !== null && `lag ${formatDuration(run.lagMs)}`,
      run.attempts !== null && run.attempts > 1 && `${run.attempts} attempts`,
      run.instance !== null && `on ${run.instance}`,
      run.term !== null && `term ${run.term}`,
      run.definition !== null && `definition ${run.definition}`,
      run.backfill !== null && `backfill ${run.backfill}`,
      // Last: a message may be long; on one line, so that a listing stays one line per run.
      run.error !== null && `error: ${run.error.replace(/\s*\n\s*/g, ' ')}`,
    ].filter((detail): detail is string => typeof detail === 'string');
    return [when, `${what}${run.reason ? ` (${run.reason})` : ''}`, run.jobId ?? '', run.state ?? '', ...details].join('  ').trimEnd();
  });
}

/** `leasebeat describe` as text: the job's line, its definition, next ticks and newest runs. */
export function formatDescription(description: JobDescription): string[] {
  const { nextTicks, runs } = description;
  return [
    formatJobLine(description),
    `  ${description.kind === 'schedule' ? 'runtime schedule' : 'job'}  ${description.schedule ?? '(definition not loaded here)'}  ${description.timezone ?? ''}  queue ${description.queue ?? '-'}  definition ${description.definition ?? '-'}`,
    ...(description.failedInARow > 0 ? [`  failed runs in a row: ${description.failedInARow}`] : []),
    `  next ${nextTicks.length} tick${nextTicks.length === 1 ? '' : 's'}:${nextTicks.length ? '' : ' none known here'}`,
    ...nextTicks.map((tick) => `    ${tick}`),
    `  newest runs:`,
    ...formatRuns(description.name, runs).map((line) => `    ${line}`),
    ...(description.backfills.length ? ['  backfills:', ...description.backfills.map((backfill) => `    ${formatBackfill(backfill)}`)] : []),
  ];
}

/** The names and modification times of a folder's files: what changes when a job file is edited, added or removed. */
function folderStamp(dir: string): string {
  return readdirSync(dir)
    .sort()
    .map((name) => `${name}:${statSync(join(dir, name), { throwIfNoEntry: false })?.mtimeMs ?? 0}`)
    .join('\n');
}
