import { randomUUID } from 'node:crypto';
import { resolve } from 'node:path';
import { Command, Option } from 'commander';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { RedisLeaseLock } from '../election/redis-lock.js';
import type { ResourceLock } from '../election/resource-lock.js';
import { waitForDrain } from '../members/drain.js';
import { formatMembersTable, membersReport } from '../members/status.js';
import { MemberStore } from '../members/store.js';
import { KeySpace } from '../queueing/keys.js';
import type { TickJobData } from '../queueing/job-data.js';
import { TickLedger } from '../queueing/tick-ledger.js';
import { createScheduler } from '../scheduler.js';
import { formatDuration, parseDuration } from '../scheduling/duration.js';
import { loadJobs } from '../scheduling/loader.js';
import { nextTicks } from '../scheduling/plan.js';
import { startHttpServer } from '../serving/http-server.js';
import { createMetrics } from '../serving/metrics.js';
import { systemClock } from '../util/clock.js';
import { createLogger } from '../util/logger.js';
import { ConfigError, loadConfig, redactUrl, type RawSettings, type ServiceConfig } from './config.js';
import { redisAnswers, startEmbeddedRedis, type EmbeddedRedis } from './embedded-redis.js';

/** Flags shared by every command that talks to Redis, mirroring `LEASEBEAT_*` variables. */
function withConnectionFlags(command: Command): Command {
  return command
    .option('--redis-url <url>', 'Redis URL (LEASEBEAT_REDIS_URL)')
    .option('--prefix <prefix>', 'Redis key prefix (LEASEBEAT_PREFIX)')
    .option('--lease-name <name>', 'lease and cluster name (LEASEBEAT_LEASE_NAME)')
    .option('--jobs-dir <dir>', 'folder of job files (LEASEBEAT_JOBS_DIR)');
}

interface CommonFlags {
  [flag: string]: unknown;
  redisUrl?: string;
  prefix?: string;
  leaseName?: string;
  jobsDir?: string;
}

function settingsFrom(flags: CommonFlags & { [flag: string]: unknown }): RawSettings {
  const pick = (value: unknown): string | undefined => (typeof value === 'string' ? value : typeof value === 'number' ? String(value) : undefined);
  return {
    REDIS_URL: pick(flags.redisUrl),
    PREFIX: pick(flags.prefix),
    LEASE_NAME: pick(flags.leaseName),
    JOBS_DIR: pick(flags.jobsDir),
    LOCK: pick(flags.lock),
    IDENTITY: pick(flags.identity),
    HTTP_HOST: pick(flags.httpHost),
    HTTP_PORT: pick(flags.httpPort),
  };
}

async function kubernetesLock(config: ServiceConfig, logger: Logger): Promise<ResourceLock> {
  const { KubernetesLeaseLock } = await import('../election/kubernetes-lock.js');
  return new KubernetesLeaseLock({ namespace: config.leaseNamespace, name: config.leaseName, identity: config.identity, logger });
}

/** Finds the Redis to use: the configured one, or for a default local run a private embedded server. */
async function connectRedis(config: ServiceConfig, logger: Logger): Promise<{ url: string; embedded?: EmbeddedRedis }> {
  if (await redisAnswers(config.redisUrl)) return { url: config.redisUrl };
  if (config.redisUrlExplicit) {
    throw new ConfigError(`no Redis answers at ${redactUrl(config.redisUrl)} (LEASEBEAT_REDIS_URL): start it, or fix the URL`);
  }
  const port = Number(new URL(config.redisUrl).port || 6379);
  const embedded = await startEmbeddedRedis(port);
  if (!embedded) {
    throw new ConfigError(
      `no Redis answers at ${config.redisUrl} and no redis-server is on PATH: install one (apt-get install redis-server, ` +
        'brew install redis) or point LEASEBEAT_REDIS_URL at a running Redis',
    );
  }
  logger.warn({ url: embedded.url, data: '.leasebeat/redis' }, 'no Redis configured or running: started an embedded redis-server for this instance');
  return { url: embedded.url, embedded };
}

async function start(flags: CommonFlags & { insecureBoard?: boolean } & Record<string, unknown>): Promise<void> {
  const config = loadConfig({ ...settingsFrom(flags), insecureBoard: flags.insecureBoard });
  const logger = createLogger({ level: config.logLevel });
  const { url, embedded } = await connectRedis(config, logger);
  const metrics = createMetrics();
  const lock = config.lock === 'kubernetes' ? await kubernetesLock(config, logger) : undefined;
  const scheduler = createScheduler({
    connection: url,
    jobsDir: resolve(config.jobsDir),
    lock,
    identity: config.identity,
    leaseName: config.leaseName,
    prefix: config.prefix,
    election: { leaseDurationMs: config.leaseDurationMs, renewDeadlineMs: config.renewDeadlineMs, retryPeriodMs: config.retryPeriodMs },
    shutdownTimeoutMs: config.shutdownTimeoutMs,
    members: config.members,
    workerTuning: config.workerTuning,
    logger,
    metrics: { election: metrics.electionMetrics, producer: metrics.producerMetrics, members: metrics.memberMetrics },
  });
  logger.info({ redis: redactUrl(url), lock: config.lock, identity: scheduler.identity, jobsDir: config.jobsDir }, 'starting leasebeat');
  const http = await startHttpServer({ host: config.httpHost, port: config.httpPort, source: scheduler, metrics, board: config.board, logger });
  await scheduler.start();
  logger.info({ url: http.url, board: `${http.url}/admin/queues` }, 'serving status, probes, metrics and Bull Board');

  let stopping = false;
  const shutdown = (signal: string): void => {
    if (stopping) {
      logger.warn({ signal }, 'second signal: exiting now');
      process.exit(1);
    }
    stopping = true;
    logger.info({ signal }, 'stopping');
    // Past its budget (drain + release + margin) a shutdown that cannot finish, e.g. with Redis gone, exits
    // anyway: BullMQ's stalled-job check recovers the runs, and the lease expires.
    const budgetMs = config.shutdownTimeoutMs + config.renewDeadlineMs + 5_000;
    setTimeout(() => {
      logger.error({ budgetMs }, 'shutdown did not finish in time; exiting');
      process.exit(1);
    }, budgetMs).unref();
    void (async () => {
      await scheduler.stop();
      await http.close();
      await embedded?.stop();
      process.exit(0);
    })();
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

async function validate(dir: string, options: { count: string }): Promise<void> {
  const { jobs, errors } = await loadJobs(resolve(dir));
  const count = Number(options.count);
  const now = Date.now();
  for (const job of [...jobs.values()].sort((a, b) => a.name.localeCompare(b.name))) {
    const schedule = job.trigger.kind === 'cron' ? job.trigger.expression : `every ${job.trigger.everyMs} ms`;
    console.log(`${job.name}  (${schedule}, ${job.timezone}, queue ${job.queue})`);
    const format = new Intl.DateTimeFormat('sv-SE', { timeZone: job.timezone, dateStyle: 'short', timeStyle: 'medium' });
    for (const tick of nextTicks(job, now, count)) console.log(`  ${format.format(new Date(tick))} ${job.timezone}`);
  }
  for (const error of errors) console.error(`error: ${error.message}`);
  console.log(`${jobs.size} job(s) valid, ${errors.length} error(s)`);
  if (errors.length > 0) process.exitCode = 1;
}

interface RedisContext {
  config: ServiceConfig;
  redis: Redis;
  ledger: TickLedger;
  members: MemberStore;
}

async function withRedis<T>(flags: CommonFlags, run: (context: RedisContext) => Promise<T>): Promise<T> {
  const config = loadConfig(settingsFrom(flags));
  const redis = new Redis(config.redisUrl, { maxRetriesPerRequest: 1, lazyConnect: true });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
  } catch {
    throw new ConfigError(`no Redis answers at ${redactUrl(config.redisUrl)} (LEASEBEAT_REDIS_URL or --redis-url)`);
  }
  try {
    const keys = new KeySpace(config.prefix, config.leaseName);
    return await run({ config, redis, ledger: new TickLedger(redis, keys), members: new MemberStore(redis, keys) });
  } finally {
    redis.disconnect();
  }
}

async function status(flags: CommonFlags & { json?: boolean }): Promise<void> {
  await withRedis(flags, async ({ config, redis, ledger, members }) => {
    const lease = await new RedisLeaseLock({ connection: redis, name: config.leaseName, prefix: config.prefix, identity: 'cli' })
      .get(AbortSignal.timeout(5000))
      .catch(() => undefined);
    const fence = await ledger.fence();
    const paused = await ledger.pausedJobs();
    const { jobs, errors } = await loadJobs(resolve(config.jobsDir));
    const [records, cordons, health] = await Promise.all([members.list(), members.cordons(), members.health()]);
    const membership = membersReport(records, cordons, health);
    const rows = await Promise.all(
      [...jobs.values()].map(async (job) => ({ job, state: await ledger.jobState(job.name), next: nextTicks(job, Date.now(), 1)[0] })),
    );
    const report = {
      leader: lease?.record.holderIdentity ?? null,
      leaderTransitions: lease?.record.leaderTransitions ?? null,
      fence,
      disruption: membership.disruption,
      members: membership.members,
      jobs: rows.map(({ job, state, next }) => ({
        name: job.name,
        paused: job.paused || paused.has(job.name),
        pauseNote: paused.get(job.name)?.note ?? null,
        next: next === undefined ? null : new Date(next).toISOString(),
        lastTick: state.lastScheduledTick === undefined ? null : new Date(state.lastScheduledTick).toISOString(),
        lastJobId: state.lastJobId ?? null,
        enqueued: state.enqueued,
        skipped: state.skipped,
        fenced: state.fenced,
      })),
      loadErrors: errors.map((e) => e.message),
    };
    if (flags.json) {
      console.log(JSON.stringify(report, null, 2));
      return;
    }
    console.log(`leader: ${report.leader || '(none)'}  transitions: ${report.leaderTransitions ?? '-'}  fence: ${fence.generation || '-'}#${fence.leaderTransitions} (rejected ${fence.fenced})`);
    console.log('(with the Kubernetes lock, the leader is in the Lease: kubectl get lease)');
    for (const line of formatMembersTable(membership)) console.log(line);
    for (const row of report.jobs) {
      console.log(
        `${row.name}${row.paused ? ' [paused]' : ''}  next ${row.next ?? '-'}  last ${row.lastTick ?? '-'} ${row.lastJobId ?? ''}  ` +
          `enqueued ${row.enqueued} skipped ${JSON.stringify(row.skipped)} fenced ${row.fenced}`,
      );
    }
    for (const error of report.loadErrors) console.log(`error: ${error}`);
  });
}

async function trigger(name: string, flags: CommonFlags): Promise<void> {
  await withRedis(flags, async ({ config, redis }) => {
    const { jobs } = await loadJobs(resolve(config.jobsDir));
    const job = jobs.get(name);
    if (!job) throw new ConfigError(`no job named "${name}" in ${config.jobsDir}: run \`leasebeat validate\` to list the jobs`);
    const queue = new Queue(job.queue, { connection: redis });
    const now = Date.now();
    const data: TickJobData = { tick: now, token: { generation: '', leaderTransitions: -1 }, data: job.data, manual: true };
    const added = await queue.add(job.name, data, { ...job.jobOptions, jobId: `${job.name}@manual-${now}-${randomUUID().slice(0, 8)}` });
    await queue.close();
    console.log(`triggered ${name}: job ${added.id} on queue ${job.queue}`);
  });
}

async function pause(name: string, flags: CommonFlags & { note?: string }): Promise<void> {
  await withRedis(flags, async ({ ledger }) => {
    await ledger.pause(name, flags.note ?? '');
    console.log(`paused ${name}: the leader records its ticks as skipped (paused) until \`leasebeat resume ${name}\``);
  });
}

async function resume(name: string, flags: CommonFlags): Promise<void> {
  await withRedis(flags, async ({ ledger }) => {
    console.log((await ledger.resume(name)) ? `resumed ${name}` : `${name} was not paused`);
  });
}

/** The identity of a registered (or cordoned) member: the exact identity, or a prefix matching only one. */
async function resolveMember(members: MemberStore, given: string): Promise<string> {
  const known = new Set([...(await members.list()).keys(), ...(await members.cordons()).keys()]);
  if (known.has(given)) return given;
  const matches = [...known].filter((identity) => identity.startsWith(given)).sort();
  if (matches.length === 1) return matches[0]!;
  if (matches.length > 1) throw new ConfigError(`"${given}" matches ${matches.length} members (${matches.join(', ')}): give more of the identity`);
  throw new ConfigError(`no member "${given}" is registered: \`leasebeat status\` lists the members`);
}

async function cordon(member: string, flags: CommonFlags & { note?: string }): Promise<void> {
  await withRedis(flags, async ({ members }) => {
    const identity = await resolveMember(members, member);
    await members.cordon(identity, { at: Date.now(), note: flags.note ?? '' });
    console.log(`cordoned ${identity}: within one heartbeat it leaves the election (releasing the lease if it leads) and takes no new jobs`);
  });
}

async function uncordon(member: string, flags: CommonFlags): Promise<void> {
  await withRedis(flags, async ({ members }) => {
    const identity = await resolveMember(members, member);
    console.log((await members.uncordon(identity)) ? `uncordoned ${identity}` : `${identity} was not cordoned`);
  });
}

async function drain(member: string, flags: CommonFlags & { note?: string; wait?: boolean; timeout: string }): Promise<void> {
  const timeoutMs = parseDuration(flags.timeout);
  if (timeoutMs === undefined) throw new ConfigError(`--timeout "${flags.timeout}" is not a duration: write it like 90s or 10m`);
  await withRedis(flags, async ({ members }) => {
    const identity = await resolveMember(members, member);
    await members.cordon(identity, { at: Date.now(), note: flags.note ?? 'drain' });
    if (!flags.wait) {
      console.log(`cordoned ${identity}; it finishes its active jobs and takes no new ones (--wait waits for that)`);
      return;
    }
    console.log(`cordoned ${identity}; waiting up to ${formatDuration(timeoutMs)} for its active jobs to finish`);
    let shown = '';
    const outcome = await waitForDrain(members, identity, {
      timeoutMs,
      pollMs: 250,
      clock: systemClock,
      onProgress: (record) => {
        const line = `  ${record.cordoned ? 'cordoned' : 'cordon not yet obeyed'}, ${record.activeJobs} active job(s)`;
        if (line !== shown) console.log((shown = line));
      },
    });
    if (outcome.kind === 'drained') console.log(`drained ${identity}: cordoned, no active jobs`);
    else if (outcome.kind === 'left') console.log(`${identity} left the member registry (it shut down or was removed)`);
    else {
      const active = outcome.record ? `${outcome.record.activeJobs} active job(s)` : 'no record';
      console.error(`leasebeat: ${identity} did not drain within ${formatDuration(timeoutMs)} (${active}); it stays cordoned`);
      process.exitCode = 1;
    }
  });
}

const program = new Command('leasebeat')
  .description('Leader-gated cron scheduler for BullMQ: one leader enqueues every tick exactly once, every instance works')
  .showHelpAfterError();

withConnectionFlags(program.command('start').description('run one instance: elector, producer (while leading), workers and HTTP'))
  .addOption(new Option('--lock <kind>', 'lock to campaign on (LEASEBEAT_LOCK)').choices(['auto', 'redis', 'kubernetes']))
  .option('--identity <id>', 'candidate identity (LEASEBEAT_IDENTITY)')
  .option('--http-host <host>', 'HTTP listen address (LEASEBEAT_HTTP_HOST)')
  .option('--http-port <port>', 'HTTP port (LEASEBEAT_HTTP_PORT)')
  .option('--insecure-board', 'allow an unauthenticated Bull Board on a non-loopback address')
  .action(start);

program
  .command('validate')
  .description('lint the job files and print the next run times of each, in its timezone')
  .argument('[dir]', 'folder of job files', process.env.LEASEBEAT_JOBS_DIR ?? './jobs')
  .option('-n, --count <n>', 'run times to print per job', '5')
  .action(validate);

withConnectionFlags(program.command('status').description('leader, fence and per-job schedule state from Redis'))
  .option('--json', 'print JSON')
  .action(status);

withConnectionFlags(program.command('trigger').description('run a job now, outside its schedule (recorded as manual)'))
  .argument('<job>', 'job name')
  .action(trigger);

withConnectionFlags(program.command('pause').description('pause a job at run time; the leader skips its ticks as paused'))
  .argument('<job>', 'job name')
  .option('--note <text>', 'why it is paused')
  .action(pause);

withConnectionFlags(program.command('resume').description('resume a paused job'))
  .argument('<job>', 'job name')
  .action(resume);

withConnectionFlags(program.command('cordon').description('take a member out of rotation: it leaves the election and takes no new jobs'))
  .argument('<member>', 'member identity, or a prefix of it that matches one member')
  .option('--note <text>', 'why it is cordoned')
  .action(cordon);

withConnectionFlags(program.command('uncordon').description('put a cordoned member back: it takes jobs and campaigns again'))
  .argument('<member>', 'member identity, or a prefix of it that matches one member')
  .action(uncordon);

withConnectionFlags(program.command('drain').description('cordon a member; with --wait, return once it has no active jobs'))
  .argument('<member>', 'member identity, or a prefix of it that matches one member')
  .option('--wait', 'wait until the member reports no active jobs')
  .option('--timeout <duration>', 'give up waiting after this long (exit code 1)', '5m')
  .option('--note <text>', 'why it is drained')
  .action(drain);

try {
  await program.parseAsync(process.argv);
} catch (error) {
  if (error instanceof ConfigError) {
    console.error(`leasebeat: ${error.message}`);
    process.exit(2);
  }
  throw error;
}
