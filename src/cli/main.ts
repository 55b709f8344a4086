import { lookup } from 'node:dns/promises';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { createServer, isIP } from 'node:net';
import { delimiter, join, resolve } from 'node:path';
import { Command, CommanderError, Option } from 'commander';
import {
  AdminError,
  createAdmin,
  createMetrics,
  createScheduler,
  DeploymentConflictError,
  describeTrigger,
  formatJobLine,
  formatMembersTable,
  formatRuns,
  formatDescription,
  KubernetesLeaseLock,
  RedisTopologyError,
  ScheduleError,
  startHttpServer,
  type Admin,
  type ResourceLock,
  type TriggerResult,
} from '../index.js';
import {
  ConfigError,
  createLogger,
  formatDuration,
  inCluster,
  loadJobs,
  loadServiceConfig,
  nextTicks,
  parseDuration,
  redactUrl,
  RedisConnections,
  SETTING_NAMES,
  SETTINGS,
  type RawSettings,
  type ServiceConfig,
  type SettingName,
  type SettingSpec,
} from '../config/cli-support.js';
import { startEmbeddedRedis, type EmbeddedRedis } from './embedded-redis.js';
import { durationOf, wholeNumber } from './flags.js';
import { formatScheduleDescription, formatScheduleTable, tickFormatter } from './format.js';
import { registerImportCommand } from './import-command.js';
import { registerBackfillCommand } from './backfill-command.js';
import { specFromFlags, type SpecFlags } from './schedule-spec.js';

/**
 * The `leasebeat` command: a thin layer over the library's public API and `leasebeat/cli-support` (an
 * eslint rule keeps it there).
 * Exit codes: 0 success; 1 the command ran and reports a failure (bad job files, a drain that timed out);
 * 2 a bad setting or argument, a refused name, or Redis unreachable; 3 a command that hit its time bound.
 */

const VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

/** The Commander option of a setting; its help shows the variable, the default and the unit. */
function settingOption(name: SettingName): Option {
  const spec: SettingSpec = SETTINGS[name];
  const details = [spec.env, spec.default === undefined ? undefined : `default: ${spec.default}`, spec.unit === 'duration' ? 'a duration like 15s; a bare number is ms' : undefined];
  return new Option(spec.valueName ? `${spec.flag} ${spec.valueName}` : spec.flag, `${spec.description} (${details.filter(Boolean).join('; ')})`);
}

/** Adds the setting flags a command takes: every setting for `start`, connection settings for the others. */
function withSettings(command: Command, scope: 'start' | 'connection'): Command {
  for (const name of SETTING_NAMES) {
    const spec: SettingSpec = SETTINGS[name];
    if (scope === 'start' || spec.scope === 'connection') command.addOption(settingOption(name));
  }
  return command;
}

/** Flag values by setting name; a switch (`--insecure-board`) given counts as `true`. */
function settingsFrom(command: Command): RawSettings {
  const flags = command.opts<Record<string, unknown>>();
  const raw: RawSettings = {};
  for (const name of SETTING_NAMES) {
    const key = new Option(SETTINGS[name].flag).attributeName();
    const value = flags[key];
    if (typeof value === 'string') raw[name] = value;
    else if (value === true) raw[name] = 'true';
  }
  return raw;
}

/** Fails with a configuration error naming `setting` unless `dir` is a folder. */
function requireDirectory(dir: string, setting: string, fix: string): void {
  let isDirectory: boolean;
  try {
    isDirectory = statSync(dir).isDirectory();
  } catch {
    throw new ConfigError(`${setting}: the jobs folder ${dir} does not exist: ${fix}`);
  }
  if (!isDirectory) throw new ConfigError(`${setting}: ${dir} is not a folder: ${fix}`);
}

/** Fails with a configuration error when the HTTP address cannot be bound, before anything connects. */
async function checkListen(host: string, port: number): Promise<void> {
  if (isIP(host) === 0) {
    // The schema took the name's form; whether it names an address here is only known by asking.
    await lookup(host).catch((error: NodeJS.ErrnoException) => {
      throw new ConfigError(`LEASEBEAT_HTTP_HOST="${host}" (--http-host) does not resolve to an address here (${error.code ?? error.message}): use an IP address, or a name this host resolves`);
    });
  }
  if (port === 0) return;
  await new Promise<void>((done, fail) => {
    const probe = createServer();
    probe.once('error', (error: NodeJS.ErrnoException) => {
      const what =
        error.code === 'EADDRINUSE'
          ? `LEASEBEAT_HTTP_PORT="${port}" (--http-port): port ${port} on ${host} is already in use: stop what uses it, or pick another port`
          : error.code === 'EACCES'
            ? `LEASEBEAT_HTTP_PORT="${port}" (--http-port): not allowed to listen on port ${port}: use a port above 1023`
            : `LEASEBEAT_HTTP_HOST="${host}" (--http-host): cannot listen on ${host}:${port} (${error.code ?? error.message})`;
      fail(new ConfigError(what));
    });
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => done()));
  });
}

/** Finds the Redis to use: the configured one, or for a default local run a private embedded server. */
async function connectRedis(config: ServiceConfig, log: ReturnType<typeof createLogger>): Promise<{ url: string; embedded?: EmbeddedRedis }> {
  try {
    await RedisConnections.fromUrl(config.redisUrl).reach(config.commandTimeoutMs);
    return { url: config.redisUrl };
  } catch (error) {
    // Only a default URL where nothing listens may be replaced; a server that is there but wrong is reported.
    if (config.redisUrlExplicit || !(error instanceof RedisTopologyError) || error.problem !== 'unreachable') throw error;
  }
  const port = Number(new URL(config.redisUrl).port || 6379);
  const embedded = await startEmbeddedRedis(port);
  if (!embedded) {
    throw new ConfigError(
      `LEASEBEAT_REDIS_URL: no Redis answers at ${config.redisUrl} and no redis-server is on PATH: install one (apt-get install redis-server, ` +
        'brew install redis) or point LEASEBEAT_REDIS_URL at a running Redis',
    );
  }
  log.warn({ url: embedded.url, data: '.leasebeat/redis' }, 'no Redis configured or running: started an embedded redis-server for this instance');
  return { url: embedded.url, embedded };
}

/**
 * The Kubernetes lock. client-node is imported here, not by the library's entry point, so that a process
 * on the Redis lock never loads it (about 70 MiB and a second). The kubeconfig is found and loaded here,
 * as client-node's `loadFromDefault` would (KUBECONFIG, ~/.kube/config, the pod's service account), rather
 * than on the lock's first call, so that a missing or broken one stops the command before it starts:
 * `loadFromDefault` throws a raw ENOENT for a KUBECONFIG that is not there, and with none at all it
 * falls back to http://localhost:8080, where an instance would retry for ever and never lead.
 */
async function kubernetesLock(config: ServiceConfig, identity: string, log?: ReturnType<typeof createLogger>): Promise<ResourceLock> {
  const fix = 'set KUBECONFIG, run in a pod with a service account, or use LEASEBEAT_LOCK=redis';
  const files = (process.env.KUBECONFIG ?? '').split(delimiter).filter(Boolean);
  // client-node looks in $HOME only.
  const home = process.env.HOME ? join(process.env.HOME, '.kube', 'config') : undefined;
  const missing = files.filter((file) => !existsSync(file));
  if (missing.length > 0) throw new ConfigError(`LEASEBEAT_LOCK=kubernetes: no kubeconfig: KUBECONFIG=${missing.join(delimiter)} does not exist; ${fix}`);
  const source =
    files.length > 0 ? `KUBECONFIG=${process.env.KUBECONFIG}` : home !== undefined && existsSync(home) ? home : inCluster() ? 'the service account' : undefined;
  if (source === undefined) {
    throw new ConfigError(`LEASEBEAT_LOCK=kubernetes: no kubeconfig: KUBECONFIG is unset, ${home ?? '~/.kube/config ($HOME unset)'} does not exist and this is not a pod with a service account; ${fix}`);
  }
  const { KubeConfig } = await import('@kubernetes/client-node');
  const kubeConfig = new KubeConfig();
  try {
    kubeConfig.loadFromDefault();
  } catch (error) {
    throw new ConfigError(`LEASEBEAT_LOCK=kubernetes: the kubeconfig ${source} cannot be read (${(error as Error).message.split('\n')[0]}): fix it; ${fix}`);
  }
  if (!kubeConfig.getCurrentCluster()) {
    const context = kubeConfig.getCurrentContext();
    throw new ConfigError(
      `LEASEBEAT_LOCK=kubernetes: the kubeconfig ${source} ${context ? `names no cluster for its current context "${context}"` : 'has no current-context'}: select one (kubectl config use-context), or ${fix}`,
    );
  }
  return new KubernetesLeaseLock({ namespace: config.leaseNamespace, name: config.leaseName, identity, kubeConfig, logger: log });
}

/** A second SIGTERM/SIGINT exits at once only if it comes this long after the first (see `start`). */
const REPEATED_SIGNAL_MS = 1_000;

/** Set by `start`, which keeps running; every other command exits once its work is done. */
let serving = false;

async function start(_options: unknown, command: Command): Promise<void> {
  serving = true;
  // Everything is checked before anything connects or listens: a bad value never leaves a half-started instance.
  const config = loadServiceConfig(settingsFrom(command), process.env);
  requireDirectory(resolve(config.jobsDir), 'LEASEBEAT_JOBS_DIR (--jobs-dir)', 'create it, or point LEASEBEAT_JOBS_DIR at the folder of job files');
  await checkListen(config.httpHost, config.httpPort);
  const logger = createLogger({ level: config.logLevel });
  const lock = config.lock === 'kubernetes' ? await kubernetesLock(config, config.identity, logger) : undefined;
  const { url, embedded } = await connectRedis(config, logger);
  const metrics = createMetrics();
  const scheduler = createScheduler({
    connection: url,
    jobsDir: resolve(config.jobsDir),
    lock,
    identity: config.identity,
    leaseName: config.leaseName,
    prefix: config.prefix,
    bullPrefix: config.bullPrefix,
    election: { leaseDurationMs: config.leaseDurationMs, renewDeadlineMs: config.renewDeadlineMs, retryPeriodMs: config.retryPeriodMs },
    shutdownTimeoutMs: config.shutdownTimeoutMs,
    members: config.members,
    workerTuning: config.workerTuning,
    stageAheadMs: config.stageAheadMs,
    logger,
    metrics: { election: metrics.electionMetrics, producer: metrics.producerMetrics, members: metrics.memberMetrics, workers: metrics.workerMetrics, schedules: metrics.scheduleMetrics },
  });
  logger.info({ redis: redactUrl(url), lock: config.lock, identity: scheduler.identity, jobsDir: config.jobsDir }, 'starting leasebeat');
  const http = await startHttpServer({
    host: config.httpHost,
    port: config.httpPort,
    source: scheduler,
    metrics,
    board: config.board,
    logger,
    requestTimeoutMs: config.httpRequestTimeoutMs,
    allowedHosts: config.httpAllowedHosts,
  });
  await scheduler.start();
  logger.info({ url: http.url, board: `${http.url}/admin/queues` }, 'serving status, probes, metrics and Bull Board');

  let stoppingSince: number | undefined;
  const shutdown = (signal: string): void => {
    if (stoppingSince !== undefined) {
      // One Ctrl-C reaches node twice: from the terminal (its process group) and again as npm forwards it,
      // milliseconds apart. Only a signal sent after that, by a person or a supervisor, abandons the drain.
      const sinceMs = performance.now() - stoppingSince;
      if (sinceMs < REPEATED_SIGNAL_MS) {
        logger.info({ signal, sinceMs: Math.round(sinceMs) }, `another signal within ${formatDuration(REPEATED_SIGNAL_MS)} of the first: taken as the same request, still draining`);
        return;
      }
      logger.warn({ signal }, 'second signal: exiting now');
      process.exit(1);
    }
    stoppingSince = performance.now();
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
  const count = wholeNumber('--count', options.count);
  const folder = resolve(dir);
  requireDirectory(folder, 'validate', 'pass the folder of job files (default LEASEBEAT_JOBS_DIR, else ./jobs)');
  const { jobs, errors, warnings } = await loadJobs(folder);
  const now = Date.now();
  for (const job of [...jobs.values()].sort((a, b) => a.name.localeCompare(b.name))) {
    if (job.trigger.kind === 'none') {
      console.log(`${job.name}  (job type, queue ${job.queue}: runs when a schedule or a trigger names it)`);
      continue;
    }
    console.log(`${job.name}  (${describeTrigger(job)}, ${job.timezone}, queue ${job.queue})`);
    const inZone = tickFormatter(job.timezone);
    const ticks = nextTicks(job, now, count);
    for (const tick of ticks) console.log(`  ${inZone(tick)}`);
    if (ticks.length === 0 && count > 0) console.log('  (no further runs)');
  }
  for (const warning of warnings) console.error(`warning: ${warning.message}`);
  for (const error of errors) console.error(`error: ${error.message}`);
  console.log(`${jobs.size} job(s) valid, ${errors.length} error(s)${warnings.length > 0 ? `, ${warnings.length} warning(s)` : ''}`);
  if (errors.length > 0) process.exitCode = 1;
}

/** Runs an admin command against the configured cluster, within the configured bound. */
async function withAdmin(command: Command, run: (admin: Admin, config: ServiceConfig) => Promise<void>): Promise<void> {
  // Every setting is checked, as at start: the environment is the deployment's, shared by all commands.
  const config = loadServiceConfig(settingsFrom(command), process.env);
  const lock = config.lock === 'kubernetes' ? await kubernetesLock(config, 'leasebeat-cli') : undefined;
  // First what stands in the way of every command (credentials, the kind of server, the user's commands),
  // before the admin's connection exists: its ready check alone would print a warning for a user without INFO.
  await RedisConnections.fromUrl(config.redisUrl)
    .reach(config.commandTimeoutMs)
    .catch((error: unknown) => {
      if (!(error instanceof RedisTopologyError) || error.problem !== 'unanswered') throw error;
      throw new AdminError('timeout', `${command.name()} did not finish within ${formatDuration(config.commandTimeoutMs)}: Redis at ${redactUrl(config.redisUrl)} does not answer`);
    });
  const admin = createAdmin({
    connection: config.redisUrl,
    prefix: config.prefix,
    bullPrefix: config.bullPrefix,
    leaseName: config.leaseName,
    lock,
    jobsDir: resolve(config.jobsDir),
    timeoutMs: config.commandTimeoutMs,
  });
  try {
    await run(admin, config);
  } finally {
    await admin.close();
  }
}

async function status(options: { json?: boolean }, command: Command): Promise<void> {
  await withAdmin(command, async (admin) => {
    const report = await admin.status();
    if (options.json) {
      console.log(JSON.stringify(report, null, 2));
      return;
    }
    const { fence } = report;
    console.log(
      `leader: ${report.leader ?? '(none)'}  lock: ${report.lock}  transitions: ${report.leaderTransitions ?? '-'}  ` +
        `fence: ${fence.generation || '-'}#${fence.leaderTransitions} (rejected ${fence.fenced})`,
    );
    if (report.leaseError) console.log(`lease: ${report.leaseError}`);
    for (const line of formatMembersTable({ members: report.members, disruption: report.disruption, judgedBy: report.judgedBy })) console.log(line);
    for (const row of report.jobs) console.log(formatJobLine(row));
    if (report.schedules > 0) console.log(`runtime schedules: ${report.schedules} (\`leasebeat schedules ls\` lists them)`);
    if (report.jobsDir === null) console.log('(no jobs folder here: next run times need LEASEBEAT_JOBS_DIR)');
    for (const error of report.jobsDir?.errors ?? []) console.log(`error: ${error}`);
  });
}

/** What `trigger` and `schedules trigger` print: the run the leader added. */
function triggeredLine(name: string, result: TriggerResult): string {
  return `triggered ${name}: job ${result.jobId} on queue ${result.queue}${result.flow ? ' (a flow: its children were added with it)' : ''}`;
}

/** What `pause` and `schedules pause` print, with the command that ends the pause. */
function pausedLine(name: string, resume: string): string {
  return `paused ${name}: the leader records its ticks as skipped (paused) until \`${resume}\``;
}

async function trigger(name: string, _options: unknown, command: Command): Promise<void> {
  await withAdmin(command, async (admin) => {
    console.log(triggeredLine(name, await admin.trigger(name)));
  });
}

async function pause(name: string, options: { note?: string; force?: boolean }, command: Command): Promise<void> {
  await withAdmin(command, async (admin) => {
    await admin.pause(name, options);
    console.log(pausedLine(name, `leasebeat resume ${name}`));
  });
}

async function resume(name: string, options: { force?: boolean }, command: Command): Promise<void> {
  await withAdmin(command, async (admin) => {
    console.log((await admin.resume(name, options)) ? `resumed ${name}` : `${name} was not paused`);
  });
}

/** A job's newest `--limit` entries of some kind, as JSON (`--json`) or one line each. */
async function newestOf<T>(
  options: { limit: string; json?: boolean },
  command: Command,
  read: (admin: Admin, limit: number) => Promise<T[]>,
  lines: (entries: T[]) => string[],
): Promise<void> {
  const limit = wholeNumber('--limit', options.limit, 1);
  await withAdmin(command, async (admin) => {
    const entries = await read(admin, limit);
    for (const line of options.json ? [JSON.stringify(entries, null, 2)] : lines(entries)) console.log(line);
  });
}

function runs(name: string, options: { limit: string; json?: boolean }, command: Command): Promise<void> {
  return newestOf(options, command, (admin, limit) => admin.runs(name, { limit }), (list) => formatRuns(name, list));
}

async function describeJob(name: string, options: { ticks: string; runs: string; json?: boolean }, command: Command): Promise<void> {
  const ticks = wholeNumber('--ticks', options.ticks, 0);
  const runs = wholeNumber('--runs', options.runs, 1);
  await withAdmin(command, async (admin) => {
    const description = await admin.describe(name, { ticks, runs });
    for (const line of options.json ? [JSON.stringify(description, null, 2)] : formatDescription(description)) console.log(line);
  });
}

function history(name: string, options: { limit: string; json?: boolean }, command: Command): Promise<void> {
  return newestOf(options, command, (admin, limit) => admin.history(name, { limit }), (entries) =>
    entries.length === 0
      ? [`${name}: nothing was done to it by hand (pause, resume, trigger, schedule writes) that is still kept`]
      : entries.map((entry) => `${entry.at}  ${entry.action.padEnd(7)}  ${entry.by}${Object.keys(entry.detail).length > 0 ? `  ${JSON.stringify(entry.detail)}` : ''}`),
  );
}

async function cordon(member: string, options: { note?: string; force?: boolean }, command: Command): Promise<void> {
  await withAdmin(command, async (admin) => {
    const identity = await admin.cordon(member, options);
    console.log(`cordoned ${identity}: within one heartbeat it leaves the election (releasing the lease if it leads) and takes no new jobs`);
  });
}

async function uncordon(member: string, _options: unknown, command: Command): Promise<void> {
  await withAdmin(command, async (admin) => {
    const { identity, changed } = await admin.uncordon(member);
    console.log(changed ? `uncordoned ${identity}` : `${identity} was not cordoned`);
  });
}

async function drain(member: string, options: { note?: string; force?: boolean; wait?: boolean; timeout: string }, command: Command): Promise<void> {
  const timeoutMs = parseDuration(durationOf(options.timeout));
  if (timeoutMs === undefined) throw new ConfigError(`--timeout "${options.timeout}" is not a duration: write it like 90s or 10m (a bare number is ms)`);
  await withAdmin(command, async (admin) => {
    let shown = '';
    const { identity, outcome } = await admin.drain(member, {
      note: options.note,
      force: options.force,
      wait: options.wait,
      timeoutMs,
      onCordoned: (cordoned) => {
        if (options.wait) console.log(`cordoned ${cordoned}; waiting up to ${formatDuration(timeoutMs)} for its active jobs to finish`);
      },
      onProgress: (record) => {
        const line = `  ${record.cordoned ? 'cordoned' : 'cordon not yet obeyed'}, ${record.activeJobs} active job(s)`;
        if (line !== shown) console.log((shown = line));
      },
    });
    if (!outcome) console.log(`cordoned ${identity}; it finishes its active jobs and takes no new ones (--wait waits for that)`);
    else if (outcome.kind === 'drained') console.log(`drained ${identity}: cordoned, no active jobs`);
    else if (outcome.kind === 'left') console.log(`${identity} left the member registry (it shut down or was removed)`);
    else {
      const active = outcome.record ? `${outcome.record.activeJobs} active job(s)` : 'no record';
      console.error(`leasebeat: ${identity} did not drain within ${formatDuration(timeoutMs)} (${active}); it stays cordoned`);
      process.exitCode = 1;
    }
  });
}

/** `--expected-version`, for a compare-and-set: 0 means the schedule must not exist yet. */
function expectedVersion(text: string | undefined): { expectedVersion?: number } {
  return text === undefined ? {} : { expectedVersion: wholeNumber('--expected-version', text) };
}

async function scheduleUpsert(id: string, options: SpecFlags & { expectedVersion?: string }, command: Command): Promise<void> {
  // The flags' form (numbers, JSON, the file) is checked before anything connects.
  const spec = specFromFlags(options);
  const cas = expectedVersion(options.expectedVersion);
  await withAdmin(command, async (admin) => {
    const { version, changed } = await admin.schedules.upsert(id, spec, cas);
    console.log(`${changed ? 'upserted' : 'unchanged'} ${id} version ${version}`);
  });
}

async function scheduleRemove(id: string, options: { expectedVersion?: string }, command: Command): Promise<void> {
  const cas = expectedVersion(options.expectedVersion);
  await withAdmin(command, async (admin) => {
    // `remove` answers false for an unknown id; here it is refused as every other command refuses one.
    if (!(await admin.schedules.remove(id, cas))) throw new ScheduleError('not-found', `no schedule has id "${id}": \`leasebeat schedules ls\` lists them`);
    console.log(`removed ${id}`);
  });
}

async function scheduleList(options: { job?: string; search?: string; limit?: string; cursor?: string; json?: boolean }, command: Command): Promise<void> {
  const limit = options.limit === undefined ? undefined : wholeNumber('--limit', options.limit, 1);
  await withAdmin(command, async (admin) => {
    const page = await admin.schedules.list({
      ...(options.job !== undefined ? { job: options.job } : {}),
      ...(options.search !== undefined ? { search: options.search } : {}),
      ...(options.cursor !== undefined ? { cursor: options.cursor } : {}),
      ...(limit !== undefined ? { limit } : {}),
    });
    if (options.json) {
      console.log(JSON.stringify(page, null, 2));
      return;
    }
    // A filtered page ends early after a stretch of ids (MAX_SCANNED): "none here" is not "none at all".
    const where = page.cursor !== undefined ? ' in this stretch of ids' : options.cursor !== undefined ? ' after the cursor' : '';
    if (page.schedules.length === 0) console.log(`no schedules${options.job !== undefined || options.search !== undefined ? ' match' : ''}${where} (${page.total} stored)`);
    else for (const line of formatScheduleTable(page.schedules)) console.log(line);
    if (page.cursor !== undefined) console.log(`next page: --cursor ${page.cursor}`);
  });
}

async function scheduleDescribe(id: string, options: { ticks: string; runs: string; json?: boolean }, command: Command): Promise<void> {
  const ticks = wholeNumber('--ticks', options.ticks);
  const runs = wholeNumber('--runs', options.runs, 1);
  await withAdmin(command, async (admin) => {
    const description = await admin.schedules.describe(id, { ticks, runs });
    if (options.json) console.log(JSON.stringify(description, null, 2));
    else for (const line of formatScheduleDescription(description)) console.log(line);
  });
}

async function schedulePause(id: string, options: { note?: string }, command: Command): Promise<void> {
  await withAdmin(command, async (admin) => {
    await admin.schedules.pause(id, options.note);
    console.log(pausedLine(id, `leasebeat schedules resume ${id}`));
  });
}

async function scheduleResume(id: string, _options: unknown, command: Command): Promise<void> {
  await withAdmin(command, async (admin) => {
    console.log((await admin.schedules.resume(id)) ? `resumed ${id}` : `${id} was not paused`);
  });
}

async function scheduleTrigger(id: string, _options: unknown, command: Command): Promise<void> {
  await withAdmin(command, async (admin) => {
    // A schedule's trigger is its admin's `trigger` of the id.
    console.log(triggeredLine(id, (await admin.schedules.trigger(id))));
  });
}

// A bad command line is one line naming the problem and exit code 2 (see `usageError`), not commander's
// message and help; the commands below inherit these settings, so they come first.
const program = new Command('leasebeat')
  .description('Leader-gated cron scheduler for BullMQ: one leader enqueues every tick exactly once, every instance works')
  .version(VERSION, '-V, --version', 'print the version')
  .exitOverride()
  .configureOutput({ outputError: () => undefined })
  .showHelpAfterError(false);

withSettings(program.command('start').description('run one instance: elector, producer (while leading), workers and HTTP'), 'start').action(start);

program
  .command('validate')
  .description('lint the job files and print the next run times of each, in its timezone')
  .argument('[dir]', 'folder of job files (LEASEBEAT_JOBS_DIR; default: ./jobs)', process.env.LEASEBEAT_JOBS_DIR || './jobs')
  .option('-n, --count <n>', 'run times to print per job', '5')
  .action(validate);

withSettings(program.command('status').description('leader (from the configured lock), fence, members and per-job state, from Redis'), 'connection')
  .option('--json', 'print JSON')
  .action(status);

withSettings(program.command('trigger').description('ask the leader to run a job now, outside its schedule, through the fenced path of a tick (flows included; recorded as manual; at most once, even across failovers)'), 'connection')
  .argument('<job>', 'job name')
  .action(trigger);

withSettings(program.command('pause').description('pause a job at run time; the leader skips its ticks as paused'), 'connection')
  .argument('<job>', 'job name')
  .option('--note <text>', 'why it is paused')
  .option('--force', 'pause a name no leader has scheduled and no job file here defines (a job not deployed yet)')
  .action(pause);

withSettings(program.command('resume').description('resume a paused job'), 'connection')
  .argument('<job>', 'job name')
  .option('--force', 'accept a name the cluster does not know')
  .action(resume);

withSettings(program.command('runs').description("a job's recent ticks, skipped ranges and manual runs from the fenced ledger: each run with its BullMQ state, each skip with why"), 'connection')
  .argument('<job>', 'job name')
  .option('-n, --limit <n>', 'how many, newest first', '20')
  .option('--json', 'print JSON')
  .action(runs);

withSettings(program.command('describe').description('a job or schedule in full: its status, next ticks, and newest runs with duration, lag, term, instance and definition hash'), 'connection')
  .argument('<job>', 'job name or schedule id')
  .option('--ticks <n>', 'how many next ticks', '10')
  .option('--runs <n>', 'how many runs, newest first', '10')
  .option('--json', 'print JSON')
  .action(describeJob);

withSettings(program.command('history').description('who paused, resumed, triggered, backfilled, edited or removed a job or schedule, and when (newest first)'), 'connection')
  .argument('<job>', 'job name or schedule id')
  .option('-n, --limit <n>', 'how many, newest first (at most 100)', '20')
  .option('--json', 'print JSON')
  .action(history);

withSettings(program.command('cordon').description('take a member out of rotation: it leaves the election and takes no new jobs'), 'connection')
  .argument('<member>', 'member identity, or a prefix of it that matches one member')
  .option('--note <text>', 'why it is cordoned')
  .option('--force', 'cordon it even when no other member could lead then (the cluster is left without a leader)')
  .action(cordon);

withSettings(program.command('uncordon').description('put a cordoned member back: it takes jobs and campaigns again'), 'connection')
  .argument('<member>', 'member identity, or a prefix of it that matches one member')
  .action(uncordon);

withSettings(program.command('drain').description('cordon a member; with --wait, return once it has no active jobs'), 'connection')
  .argument('<member>', 'member identity, or a prefix of it that matches one member')
  .option('--wait', 'wait until the member reports no active jobs')
  .option('--timeout <duration>', 'give up waiting after this long (exit code 1)', '5m')
  .option('--note <text>', 'why it is drained')
  .option('--force', 'drain it even when no other member could lead then (the cluster is left without a leader)')
  .action(drain);

const schedules = program.command('schedules').description('runtime schedules: a job type run on ticks of its own, stored in Redis and picked up by every instance');

withSettings(schedules.command('upsert').description('create or replace a schedule from flags or a --file (the flags override its fields); prints its version'), 'connection')
  .argument('<id>', 'schedule id (letters, digits, ".", "_", "-")')
  .option('-f, --file <spec>', 'a JSON (.json) or YAML file holding one spec')
  .option('--job <type>', 'the job type (a definition in jobs/ without schedule or every) that runs each tick')
  .option('--schedule <cron>', 'cron: 5 fields, or 6 with seconds first')
  .option('--every <duration>', 'an interval like 5m (a bare number is ms)')
  .option('--at <instant>', 'one run at an ISO 8601 instant with Z or an offset, or epoch ms')
  .option('--timezone <zone>', 'IANA time zone the cron is read in (default UTC)')
  .option('--data <json>', 'JSON passed to every run instead of the job type\'s data')
  .option('--overlap <policy>', 'while the previous run is active: allow, skip, bufferOne, bufferAll, cancelOther or terminateOther')
  .option('--buffer-max <n>', 'with --overlap bufferAll: the most ticks that wait at once (default 10)')
  .option('--catchup-window <duration>', 'how far back missed ticks are still run')
  .option('--catchup-mode <mode>', 'which missed ticks run: latest, all or none')
  .option('--catchup-max <n>', 'the most missed ticks run at once')
  .option('--jitter <duration>', 'a random delay of up to this much per tick')
  .option('--start-at <instant>', 'no tick before this instant')
  .option('--end-at <instant>', 'no tick after this instant')
  .option('--limit <n>', 'how many ticks it has left from now (skipped ones count)')
  .option('--paused', 'store it paused')
  .option('--no-paused', 'store it running (overrides the file\'s paused)')
  .option('--note <text>', 'free text shown with it (why it exists, who owns it)')
  .option('--expected-version <n>', 'write only if the stored version is this one (0: only if it does not exist)')
  .action(scheduleUpsert);

withSettings(schedules.command('rm').description('remove a schedule; its runs staged ahead of their ticks are taken back'), 'connection')
  .argument('<id>', 'schedule id')
  .option('--expected-version <n>', 'remove only if the stored version is this one')
  .action(scheduleRemove);

withSettings(schedules.command('ls').description('list schedules in id order, a page at a time'), 'connection')
  .option('--job <type>', 'only those of this job type')
  .option('--search <text>', 'only those whose id contains this')
  .option('-n, --limit <n>', 'at most this many (default 100, at most 1000)')
  .option('--cursor <id>', 'start after this id: the next page\'s cursor the previous page printed')
  .option('--json', 'print JSON')
  .action(scheduleList);

withSettings(schedules.command('describe').description('a schedule with its next ticks in its time zone, its newest runs and its skip counts'), 'connection')
  .argument('<id>', 'schedule id')
  .option('--ticks <n>', 'next ticks to show', '5')
  .option('--runs <n>', 'newest runs to show', '10')
  .option('--json', 'print JSON')
  .action(scheduleDescribe);

withSettings(schedules.command('pause').description('pause a schedule at run time; the leader skips its ticks as paused'), 'connection')
  .argument('<id>', 'schedule id')
  .option('--note <text>', 'why it is paused')
  .action(schedulePause);

withSettings(schedules.command('resume').description('end a run-time pause of a schedule'), 'connection')
  .argument('<id>', 'schedule id')
  .action(scheduleResume);

withSettings(schedules.command('trigger').description('ask the leader to run a schedule now, outside its ticks, as `leasebeat trigger` does'), 'connection')
  .argument('<id>', 'schedule id')
  .action(scheduleTrigger);

registerImportCommand(program, { withSettings: (command) => withSettings(command, 'connection'), withAdmin });
registerBackfillCommand(program, { withSettings: (command) => withSettings(command, 'connection'), withAdmin });

/** Exit codes by failure: see the top of this file. */
function exitCodeOf(error: unknown): number | undefined {
  // A deployment the server cannot honour (a database it does not have) or that collides with another is
  // a configuration to fix, as a bad setting is.
  if (error instanceof ConfigError || error instanceof RedisTopologyError || error instanceof DeploymentConflictError) return 2;
  if (error instanceof AdminError) return error.code === 'timeout' ? 3 : 2;
  // A refused schedule (a bad spec, an unknown id, a version conflict) is a refusal, as an unknown job is;
  // a write the replicas did not acknowledge in time hit a time bound, and may be repeated as it is.
  if (error instanceof ScheduleError) return error.code === 'unconfirmed' ? 3 : 2;
  // The server's own refusal (the URL's user may not write, a replica, maxmemory) is the deployment's to fix.
  if (redisRefusal(error) !== undefined) return 2;
  return undefined;
}


/** The refusal, when `error` is such a reply (ioredis' ReplyError), else undefined. */
function redisRefusal(error: unknown): { kind: string; reply: string } | undefined {
  if (!(error instanceof Error) || error.name !== 'ReplyError') return undefined;
  // A transaction the server discarded (EXECABORT) names why among the errors of the commands it queued.
  const causes = [error, ...((error as { previousErrors?: unknown[] }).previousErrors ?? [])];
  for (const cause of causes) {
    const kind = cause instanceof Error ? REDIS_REFUSALS.exec(cause.message)?.[1] : undefined;
    if (kind !== undefined) return { kind, reply: (cause as Error).message.split('\n')[0]! };
  }
  return undefined;
}

/**
 * Replies by which Redis refuses a command for what the server or its user is, not for what was asked,
 * each with its fix.
 */
const REFUSAL_FIX: Record<string, string> = {
  NOPERM: "give the URL's user what the reply names (ACL SETUSER), or +@all -@dangerous +info on the deployment's keys and channel",
  NOAUTH: 'put the password in the URL',
  WRONGPASS: "fix the URL's user or password",
  READONLY: 'point the URL at the primary (or at the sentinels, with ?sentinelMaster=)',
  OOM: "free memory on the server or raise its maxmemory; a read-only command still works",
  MISCONF: 'fix the server\'s persistence (its log says why it cannot save)',
};
const REDIS_REFUSALS = new RegExp(`^(${Object.keys(REFUSAL_FIX).join('|')})\\b`);

/**
 * The lines for a failure: a server or user the URL cannot use is the URL's setting to fix; a refused
 * spec has one line per problem.
 */
function describeFailure(error: Error): readonly string[] {
  if (error instanceof ScheduleError) return error.errors;
  const refusal = redisRefusal(error);
  if (refusal !== undefined) return [`LEASEBEAT_REDIS_URL: Redis refused the command: ${refusal.reply}; ${REFUSAL_FIX[refusal.kind]}`];
  const aboutUrl = error instanceof RedisTopologyError || (error instanceof AdminError && error.code === 'config');
  return [aboutUrl ? `LEASEBEAT_REDIS_URL: ${error.message}` : error.message];
}

/**
 * Commander's complaint about the command line in one line, with where to read more: `error: unknown
 * option '--jsn'\n(Did you mean --json?)` becomes `status: unknown option '--jsn' (did you mean --json?);
 * see leasebeat status --help`. A subcommand is named with its parent: `schedules upsert: …`.
 */
function usageError(error: CommanderError): string {
  const path: string[] = [];
  let command: Command = program;
  for (const arg of process.argv.slice(2).filter((a) => !a.startsWith('-'))) {
    const sub = command.commands.find((c) => c.name() === arg);
    if (!sub) break;
    path.push(arg);
    command = sub;
  }
  const named = path.join(' ');
  const problem = error.message.replace(/^error: /, '').replace(/\.$/, '').replace(/\n\(Did you mean/g, ' (did you mean').replace(/\s*\n\s*/g, ' ');
  return `${named ? `${named}: ` : ''}${problem}; see leasebeat${named ? ` ${named}` : ''} --help`;
}

/**
 * Exits once stdout and stderr have handed all that was written to the OS. A pipe takes 64 KiB before its
 * reader reads, and Node queues the rest: process.exit() alone dropped it (`schedules ls --json | jq`).
 */
async function exitWhenWritten(code?: number): Promise<never> {
  // A write's callback runs after every earlier write is out (or failed: a reader gone, as `| head` does).
  await Promise.all([process.stdout, process.stderr].map((stream) => new Promise<void>((resolve) => stream.write('', () => resolve()))));
  // Not process.exit(undefined): Node 20 takes that for 0, not for the exitCode a command set.
  process.exit(code ?? process.exitCode);
}

try {
  await program.parseAsync(process.argv);
  // Admin commands hold no handle past their work; exit now so a socket to a hung Redis cannot keep us.
  if (!serving) await exitWhenWritten();
} catch (error) {
  if (error instanceof CommanderError) {
    // --help, --version, and bare `leasebeat` (help on stderr) exit as commander means them to.
    if (error.code === 'commander.helpDisplayed' || error.code === 'commander.version' || error.code === 'commander.help') await exitWhenWritten(error.exitCode);
    console.error(`leasebeat: ${usageError(error)}`);
    await exitWhenWritten(2);
  }
  const code = exitCodeOf(error);
  if (code === undefined) throw error;
  for (const line of describeFailure(error as Error)) console.error(`leasebeat: ${line}`);
  await exitWhenWritten(code);
}
