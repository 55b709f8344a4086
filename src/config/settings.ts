import { existsSync, readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { hostname } from 'node:os';
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { checkElectionTimings } from '../election/config.js';
import { resolveMemberSettings, type MemberSettings } from '../members/settings.js';
import type { WorkerTuning } from '../workers/worker-pool.js';
import { formatDuration, parseDuration } from '../scheduling/duration.js';
import { hashTag, parseRedisUrl, redact } from '../redis/redis-topology.js';
import { isLoopbackHost } from '../serving/auth.js';

/**
 * The service configuration as one schema: every setting once, with its environment variable, flag,
 * default, unit and description. The CLI builds its flags and `--help` from it, docs/configuration.md's
 * configuration table is checked against it, and `loadServiceConfig` validates every value before
 * anything connects.
 */

/** A configuration problem: one line that names the setting and says how to fix it. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

/** Which commands take a setting as a flag: `start` every one; the admin commands the `connection` ones. */
export type SettingScope = 'connection' | 'start';

export interface SettingSpec {
  /** The environment variable, `LEASEBEAT_<NAME>`. */
  env: string;
  /** The flag, `--<name>`. */
  flag: string;
  /** What the flag's value looks like in help (`<duration>`), or undefined for a switch. */
  valueName?: string;
  /** The default as users would write it, or a description of how it is derived. */
  default?: string;
  unit?: string;
  description: string;
  scope: SettingScope;
  /** Never echoed in messages. */
  secret?: boolean;
  /** The default is derived at run time (`default` describes how), not parsed from text. */
  derived?: boolean;
  /** Parses the raw text; a failed parse's message is appended to the setting's name. */
  schema: z.ZodType;
}

const DURATION_HINT = 'write it like 15s, 500ms or 2m (a bare number is milliseconds)';

/** A duration: `15s`, `1m30s`, or a bare number of milliseconds. */
function durationSchema({ zero = false, maxMs = Infinity }: { zero?: boolean; maxMs?: number } = {}): z.ZodType<number> {
  return z.string().transform((raw, ctx) => {
    const ms = parseDuration(/^\d+$/.test(raw.trim()) ? Number(raw.trim()) : raw);
    if (ms === undefined || ms < 0 || (ms === 0 && !zero)) {
      ctx.addIssue({ code: 'custom', message: `is not a ${zero ? 'duration' : 'positive duration'}: ${DURATION_HINT}` });
      return z.NEVER;
    }
    if (ms > maxMs) {
      ctx.addIssue({ code: 'custom', message: `is longer than the most allowed, ${formatDuration(maxMs)}` });
      return z.NEVER;
    }
    return ms;
  });
}

function booleanSchema(): z.ZodType<boolean> {
  return z.string().transform((raw, ctx) => {
    const value = raw.trim().toLowerCase();
    if (['1', 'true', 'yes', 'on'].includes(value)) return true;
    if (['', '0', 'false', 'no', 'off'].includes(value)) return false;
    ctx.addIssue({ code: 'custom', message: 'must be true or false' });
    return z.NEVER;
  });
}

function oneOf<const T extends readonly [string, ...string[]]>(values: T): z.ZodType<T[number]> {
  return z.string().transform((raw, ctx) => {
    if ((values as readonly string[]).includes(raw)) return raw;
    ctx.addIssue({ code: 'custom', message: `must be one of ${values.join(', ')}` });
    return z.NEVER;
  });
}

const nonEmpty = z.string().min(1, { message: 'must not be empty' });

/** A Redis URL in any form the topology parser takes (one server, Sentinel, Cluster); kept as text. */
function redisUrlSchema(): z.ZodType<string> {
  return z.string().transform((raw, ctx) => {
    try {
      parseRedisUrl(raw);
      return raw;
    } catch (error) {
      // The parser's message repeats the URL; the setting's name and value already lead the line.
      const why = (error as Error).message.split(redact(raw)).join('').replace(/^(?:unsupported )?Redis URL\s*:?\s*/, '');
      const port = /bad port in "[^"]*:(\d+)"/.exec(why)?.[1];
      ctx.addIssue({ code: 'custom', message: `is not a usable Redis URL: ${why}${port !== undefined && Number(port) > 65_535 ? ' (ports go up to 65535)' : ''}` });
      return z.NEVER;
    }
  });
}

/**
 * A listen address: an IP literal, or a host name by its form (labels of letters, digits and '-'; the last
 * not all digits, so `999.1.1.1` is no name). Whether a name resolves is asked before listening.
 */
function hostSchema(): z.ZodType<string> {
  return z.string().transform((raw, ctx) => {
    if (isIP(raw) !== 0) return raw;
    const labels = raw.split('.');
    if (raw.length <= 253 && labels.every((label) => /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/i.test(label)) && !/^\d+$/.test(labels.at(-1)!)) return raw;
    ctx.addIssue({
      code: 'custom',
      message: /^[\d.]+$/.test(raw)
        ? 'is not an IPv4 address (four numbers from 0 to 255): use e.g. 0.0.0.0 (every interface) or 127.0.0.1 (loopback)'
        : 'is not an IP address (IPv6 without brackets) or a host name: use e.g. 0.0.0.0 (every interface), 127.0.0.1 or ::1 (loopback)',
    });
    return z.NEVER;
  });
}

function portSchema(): z.ZodType<number> {
  return z.string().transform((raw, ctx) => {
    const port = Number(raw);
    if (!/^\d+$/.test(raw.trim()) || !Number.isInteger(port) || port > 65_535) {
      ctx.addIssue({ code: 'custom', message: 'must be a port number from 0 to 65535 (0 picks a free port)' });
      return z.NEVER;
    }
    return port;
  });
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/** Every setting, in the order `--help` and docs/configuration.md list them. */
export const SETTINGS = {
  REDIS_URL: {
    env: 'LEASEBEAT_REDIS_URL', flag: '--redis-url', valueName: '<url>', default: 'redis://127.0.0.1:6379', scope: 'connection', 
    description: 'Redis for BullMQ, the ledger, the fence and the Redis lock; run it with maxmemory-policy noeviction and AOF. ' +
      'Unset, `start` runs an embedded redis-server when none answers on the default',
    schema: redisUrlSchema(),
  },
  PREFIX: {
    env: 'LEASEBEAT_PREFIX', flag: '--prefix', valueName: '<prefix>', default: 'leasebeat', scope: 'connection',
    description: "Prefix of leasebeat's own Redis keys, and the deployment's name on a shared Redis: any other than the default also moves BullMQ's queues (see LEASEBEAT_BULL_PREFIX)",
    schema: nonEmpty,
  },
  BULL_PREFIX: {
    env: 'LEASEBEAT_BULL_PREFIX', flag: '--bull-prefix', valueName: '<prefix>', default: '`bull` with the default LEASEBEAT_PREFIX, else `<prefix>-bull`; hash-tagged (`{…}`) on Redis Cluster',
    derived: true, scope: 'connection', description: "BullMQ's key prefix: the deployment's queues", schema: nonEmpty.optional(),
  },
  LOCK: {
    env: 'LEASEBEAT_LOCK', flag: '--lock', valueName: '<kind>', default: 'auto', scope: 'connection',
    description: '`redis`, `kubernetes`, or `auto` (Kubernetes when running in a pod with a service account)',
    schema: oneOf(['auto', 'redis', 'kubernetes'] as const),
  },
  LEASE_NAME: {
    env: 'LEASEBEAT_LEASE_NAME', flag: '--lease-name', valueName: '<name>', default: 'leasebeat', scope: 'connection',
    description: "Name of the Lease / Redis lease record, and of the cluster's Redis keys",
    schema: z.string().regex(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/, { message: "must be a DNS subdomain name: lower-case letters, digits, '-' and '.'" }),
  },
  LEASE_NAMESPACE: {
    env: 'LEASEBEAT_LEASE_NAMESPACE', flag: '--lease-namespace', valueName: '<namespace>', default: "POD_NAMESPACE, the service account's namespace, or default", derived: true,
    scope: 'connection', description: 'Namespace of the Lease (Kubernetes lock)', schema: nonEmpty.optional(),
  },
  IDENTITY: {
    env: 'LEASEBEAT_IDENTITY', flag: '--identity', valueName: '<id>', default: '<POD_NAME or hostname>_<uuid>', derived: true, scope: 'start',
    description: 'Candidate identity; unique per process incarnation', schema: nonEmpty.optional(),
  },
  LEASE_DURATION: {
    env: 'LEASEBEAT_LEASE_DURATION', flag: '--lease-duration', valueName: '<duration>', default: '15s', unit: 'duration', scope: 'start',
    description: 'How long followers wait after the lease last changed before taking over', schema: durationSchema(),
  },
  RENEW_DEADLINE: {
    env: 'LEASEBEAT_RENEW_DEADLINE', flag: '--renew-deadline', valueName: '<duration>', default: '10s', unit: 'duration', scope: 'start',
    description: 'How long the leader retries a failed renewal before it steps down (and stops enqueuing)', schema: durationSchema(),
  },
  RETRY_PERIOD: {
    env: 'LEASEBEAT_RETRY_PERIOD', flag: '--retry-period', valueName: '<duration>', default: '2s', unit: 'duration', scope: 'start',
    description: 'Wait between attempts to acquire or renew', schema: durationSchema(),
  },
  JOBS_DIR: {
    env: 'LEASEBEAT_JOBS_DIR', flag: '--jobs-dir', valueName: '<dir>', default: './jobs', scope: 'connection',
    description: 'Folder of job files (`status`, `pause` and the member commands do not need it)', schema: nonEmpty,
  },
  HTTP_HOST: {
    env: 'LEASEBEAT_HTTP_HOST', flag: '--http-host', valueName: '<host>', default: '127.0.0.1', scope: 'start',
    description: 'Listen address of the HTTP port (`0.0.0.0` in the image); a non-loopback address needs board credentials or --insecure-board',
    schema: hostSchema(),
  },
  HTTP_PORT: {
    env: 'LEASEBEAT_HTTP_PORT', flag: '--http-port', valueName: '<port>', default: '8080', scope: 'start',
    description: 'Port for the status page, API, Bull Board, probes and metrics', schema: portSchema(),
  },
  HTTP_REQUEST_TIMEOUT: {
    env: 'LEASEBEAT_HTTP_REQUEST_TIMEOUT', flag: '--http-request-timeout', valueName: '<duration>', default: '5s', unit: 'duration', scope: 'start',
    description: 'Bound of the reads behind /readyz, /, /api/status and /api/history; past it they answer 503 saying what did not answer',
    schema: durationSchema(),
  },
  HTTP_ALLOWED_HOSTS: {
    env: 'LEASEBEAT_HTTP_ALLOWED_HOSTS', flag: '--http-allowed-hosts', valueName: '<names>', scope: 'start',
    description: 'Comma-separated extra Host names accepted on a loopback bind (a local proxy that rewrites Host); loopback names always are',
    schema: z.string().transform((raw) => raw.split(',').map((name) => name.trim()).filter(Boolean)).optional(),
  },
  BOARD_USER: {
    env: 'LEASEBEAT_BOARD_USER', flag: '--board-user', valueName: '<user>', scope: 'start',
    description: 'Basic auth user for everything but the probes and /metrics: Bull Board, the status page and all of /api (with LEASEBEAT_BOARD_PASSWORD)',
    schema: z.string().refine((user) => !user.includes(':'), { message: 'must not contain ":" (basic auth cannot carry it)' }).optional(),
  },
  BOARD_PASSWORD: {
    env: 'LEASEBEAT_BOARD_PASSWORD', flag: '--board-password', valueName: '<password>', scope: 'start', secret: true,
    description: 'Basic auth password (with LEASEBEAT_BOARD_USER)', schema: z.string().optional(),
  },
  BOARD_TOKEN: {
    env: 'LEASEBEAT_BOARD_TOKEN', flag: '--board-token', valueName: '<token>', scope: 'start', secret: true,
    description: 'Bearer token for the same (API clients and proxies)', schema: z.string().optional(),
  },
  BOARD_READONLY: {
    env: 'LEASEBEAT_BOARD_READONLY', flag: '--board-readonly', valueName: '<bool>', default: 'false', scope: 'start',
    description: 'Bull Board refuses writes (405)', schema: booleanSchema(),
  },
  INSECURE_BOARD: {
    env: 'LEASEBEAT_INSECURE_BOARD', flag: '--insecure-board', default: 'false', scope: 'start',
    description: 'Allow an unauthenticated board on a non-loopback address; without it, start refuses to run that way',
    schema: booleanSchema(),
  },
  SHUTDOWN_TIMEOUT: {
    env: 'LEASEBEAT_SHUTDOWN_TIMEOUT', flag: '--shutdown-timeout', valueName: '<duration>', default: '25s', unit: 'duration', scope: 'start',
    description: 'Bound on draining active runs at SIGTERM', schema: durationSchema(),
  },
  HEARTBEAT_INTERVAL: {
    env: 'LEASEBEAT_HEARTBEAT_INTERVAL', flag: '--heartbeat-interval', valueName: '<duration>', default: '5s', unit: 'duration', scope: 'start',
    description: 'How often each instance renews its member record', schema: durationSchema(),
  },
  MEMBER_GRACE: {
    env: 'LEASEBEAT_MEMBER_GRACE', flag: '--member-grace', valueName: '<duration>', default: '20s', unit: 'duration', scope: 'start',
    description: 'A member whose record the leader has not seen change for this long is Unknown (more than twice the heartbeat)',
    schema: durationSchema(),
  },
  MEMBER_REMOVAL: {
    env: 'LEASEBEAT_MEMBER_REMOVAL', flag: '--member-removal', valueName: '<duration>', default: '60s', unit: 'duration', scope: 'start',
    description: 'An Unknown member is removed from the registry after this long (rate-limited)', schema: durationSchema(),
  },
  LOCK_DURATION: {
    env: 'LEASEBEAT_LOCK_DURATION', flag: '--lock-duration', valueName: '<duration>', default: '30s', unit: 'duration', scope: 'start',
    description: "BullMQ lockDuration: how long a run's lock lasts without renewal", schema: durationSchema(),
  },
  STALLED_INTERVAL: {
    env: 'LEASEBEAT_STALLED_INTERVAL', flag: '--stalled-interval', valueName: '<duration>', default: '10s', unit: 'duration', scope: 'start',
    description: 'BullMQ stalledInterval: how often workers look for runs whose worker died', schema: durationSchema(),
  },
  WORKER_CONCURRENCY: {
    env: 'LEASEBEAT_WORKER_CONCURRENCY', flag: '--worker-concurrency', valueName: '<n>', default: '64', scope: 'start',
    description: "Most runs at once per queue on each instance (a queue's worker takes the sum of its jobs' concurrency up to this); " +
      "each job's own concurrency still holds",
    schema: z.string().regex(/^\s*[1-9]\d*\s*$/, { message: 'must be a positive whole number, e.g. 64' }).transform(Number),
  },
  STAGE_AHEAD: {
    env: 'LEASEBEAT_STAGE_AHEAD', flag: '--stage-ahead', valueName: '<duration>', default: '2s', unit: 'duration', scope: 'start',
    description: "Pre-staging: ticks of jobs with overlap 'allow' and no flow are claimed and added to BullMQ as delayed jobs this long " +
      "before they are due, so that at the tick only BullMQ's promotion remains; 0 adds every tick when due",
    schema: durationSchema({ zero: true, maxMs: 60_000 }),
  },
  COMMAND_TIMEOUT: {
    env: 'LEASEBEAT_COMMAND_TIMEOUT', flag: '--command-timeout', valueName: '<duration>', default: '10s', unit: 'duration', scope: 'connection',
    description: 'Bound on each admin command (status, trigger, pause, cordon, ...) and on reaching Redis at start', schema: durationSchema(),
  },
  LOG_LEVEL: {
    env: 'LEASEBEAT_LOG_LEVEL', flag: '--log-level', valueName: '<level>', default: 'info', scope: 'start',
    description: `pino level: ${LOG_LEVELS.join(', ')}`, schema: oneOf(LOG_LEVELS),
  },
} satisfies Record<string, SettingSpec>;

export type SettingName = keyof typeof SETTINGS;
export const SETTING_NAMES = Object.keys(SETTINGS) as SettingName[];

/** Raw values by setting name (flags, already mapped by the CLI); they win over the environment. */
export type RawSettings = Partial<Record<SettingName, string>>;

/** The service configuration, resolved and checked. Durations are milliseconds. */
export interface ServiceConfig {
  redisUrl: string;
  /** Whether the Redis URL was given explicitly; only a default may be replaced by an embedded server. */
  redisUrlExplicit: boolean;
  prefix: string;
  /** BullMQ's prefix when set; else derived from `prefix` (see `defaultBullPrefix`). */
  bullPrefix?: string;
  lock: 'redis' | 'kubernetes';
  leaseName: string;
  leaseNamespace: string;
  identity: string;
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
  jobsDir: string;
  httpHost: string;
  httpPort: number;
  httpRequestTimeoutMs: number;
  httpAllowedHosts: string[];
  board: { user?: string; password?: string; token?: string; readOnly: boolean; insecure: boolean };
  shutdownTimeoutMs: number;
  members: MemberSettings;
  workerTuning: WorkerTuning;
  /** Pre-staging horizon (ms); 0 when off. */
  stageAheadMs: number;
  commandTimeoutMs: number;
  logLevel: (typeof LOG_LEVELS)[number];
}

const SERVICE_ACCOUNT = '/var/run/secrets/kubernetes.io/serviceaccount';

/** True inside a Kubernetes pod with a service account token. */
export function inCluster(env: NodeJS.ProcessEnv = process.env): boolean {
  return Boolean(env.KUBERNETES_SERVICE_HOST) && existsSync(`${SERVICE_ACCOUNT}/token`);
}

function describeSetting(name: SettingName, raw: string | undefined): string {
  const spec: SettingSpec = SETTINGS[name];
  if (raw === undefined) return spec.env;
  if (spec.secret) return `${spec.env} (${spec.flag})`;
  // A Redis URL may carry a password.
  return `${spec.env}="${name === 'REDIS_URL' ? redact(raw) : raw}" (${spec.flag})`;
}

/** A duration as messages show it, with its unit, e.g. `15ms` for a bare `15`. */
function shown(ms: number): string {
  return formatDuration(ms);
}

/**
 * Resolves the configuration from flag values and `LEASEBEAT_*` variables (flags win), checking every
 * value and the rules between them, for every command alike (the environment is the deployment's).
 * Throws a {@link ConfigError} whose one-line message names the first bad setting.
 */
export function loadServiceConfig(flags: RawSettings = {}, env: NodeJS.ProcessEnv = process.env): ServiceConfig {
  const raw = (name: SettingName): string | undefined => {
    const value = flags[name] ?? env[SETTINGS[name].env];
    // Empty variables count as unset, as in a manifest that blanks a value.
    return value === undefined || value === '' ? undefined : value;
  };
  const values = {} as Record<SettingName, unknown>;
  for (const name of SETTING_NAMES) {
    const spec: SettingSpec = SETTINGS[name];
    const given = raw(name);
    const text = given ?? (spec.derived ? undefined : spec.default);
    if (text === undefined) {
      values[name] = undefined;
      continue;
    }
    const parsed = spec.schema.safeParse(text);
    if (!parsed.success) throw new ConfigError(`${describeSetting(name, given ?? text)} ${parsed.error.issues[0]?.message ?? 'is not valid'}`);
    values[name] = parsed.data;
  }
  const v = values as {
    REDIS_URL: string; PREFIX: string; BULL_PREFIX?: string; LOCK: 'auto' | 'redis' | 'kubernetes'; LEASE_NAME: string; LEASE_NAMESPACE?: string; IDENTITY?: string;
    LEASE_DURATION: number; RENEW_DEADLINE: number; RETRY_PERIOD: number; JOBS_DIR: string; HTTP_HOST: string; HTTP_PORT: number; HTTP_REQUEST_TIMEOUT: number; HTTP_ALLOWED_HOSTS?: string[];
    BOARD_USER?: string; BOARD_PASSWORD?: string; BOARD_TOKEN?: string; BOARD_READONLY: boolean; INSECURE_BOARD: boolean;
    SHUTDOWN_TIMEOUT: number; HEARTBEAT_INTERVAL: number; MEMBER_GRACE: number; MEMBER_REMOVAL: number;
    LOCK_DURATION: number; STALLED_INTERVAL: number; WORKER_CONCURRENCY: number; STAGE_AHEAD: number; COMMAND_TIMEOUT: number; LOG_LEVEL: (typeof LOG_LEVELS)[number];
  };

  checkRules(v, raw);

  const namespaceFile = `${SERVICE_ACCOUNT}/namespace`;
  const leaseNamespace =
    v.LEASE_NAMESPACE ?? env.POD_NAMESPACE ?? (existsSync(namespaceFile) ? readFileSync(namespaceFile, 'utf8').trim() : 'default');
  return {
    redisUrl: v.REDIS_URL,
    redisUrlExplicit: raw('REDIS_URL') !== undefined,
    prefix: v.PREFIX,
    ...(v.BULL_PREFIX !== undefined ? { bullPrefix: v.BULL_PREFIX } : {}),
    lock: v.LOCK === 'auto' ? (inCluster(env) ? 'kubernetes' : 'redis') : v.LOCK,
    leaseName: v.LEASE_NAME,
    leaseNamespace,
    // A pod name repeats when a container restarts in place; the uuid keeps every incarnation distinct.
    identity: v.IDENTITY ?? `${env.POD_NAME ?? hostname()}_${randomUUID()}`,
    leaseDurationMs: v.LEASE_DURATION,
    renewDeadlineMs: v.RENEW_DEADLINE,
    retryPeriodMs: v.RETRY_PERIOD,
    jobsDir: v.JOBS_DIR,
    httpHost: v.HTTP_HOST,
    httpPort: v.HTTP_PORT,
    httpRequestTimeoutMs: v.HTTP_REQUEST_TIMEOUT,
    httpAllowedHosts: v.HTTP_ALLOWED_HOSTS ?? [],
    board: { user: v.BOARD_USER, password: v.BOARD_PASSWORD, token: v.BOARD_TOKEN, readOnly: v.BOARD_READONLY, insecure: v.INSECURE_BOARD },
    shutdownTimeoutMs: v.SHUTDOWN_TIMEOUT,
    members: resolveMemberSettings({ heartbeatIntervalMs: v.HEARTBEAT_INTERVAL, graceMs: v.MEMBER_GRACE, removalTimeoutMs: v.MEMBER_REMOVAL }),
    workerTuning: { lockDurationMs: v.LOCK_DURATION, stalledIntervalMs: v.STALLED_INTERVAL, concurrency: v.WORKER_CONCURRENCY },
    stageAheadMs: v.STAGE_AHEAD,
    commandTimeoutMs: v.COMMAND_TIMEOUT,
    logLevel: v.LOG_LEVEL,
  };
}

/** The rules between settings, each message naming both and showing durations with their unit. */
function checkRules(
  v: { LEASE_DURATION: number; RENEW_DEADLINE: number; RETRY_PERIOD: number; HEARTBEAT_INTERVAL: number; MEMBER_GRACE: number; HTTP_HOST: string;
    BOARD_USER?: string; BOARD_PASSWORD?: string; BOARD_TOKEN?: string; INSECURE_BOARD: boolean; REDIS_URL: string; PREFIX: string; BULL_PREFIX?: string },
  raw: (name: SettingName) => string | undefined,
): void {
  const given = (name: SettingName, ms: number): string => {
    const text = raw(name);
    return text !== undefined && /^\d+$/.test(text.trim()) ? `${SETTINGS[name].env} (${text}, a bare number: ${shown(ms)})` : `${SETTINGS[name].env} (${shown(ms)})`;
  };
  if (v.LEASE_DURATION <= v.RENEW_DEADLINE) {
    throw new ConfigError(
      `${given('LEASE_DURATION', v.LEASE_DURATION)} must be greater than ${given('RENEW_DEADLINE', v.RENEW_DEADLINE)}: ` +
        'otherwise a follower may take over while the leader still believes it leads',
    );
  }
  try {
    checkElectionTimings({ leaseDurationMs: v.LEASE_DURATION, renewDeadlineMs: v.RENEW_DEADLINE, retryPeriodMs: v.RETRY_PERIOD });
  } catch {
    throw new ConfigError(
      `${given('RENEW_DEADLINE', v.RENEW_DEADLINE)} must be greater than 1.2 × ${given('RETRY_PERIOD', v.RETRY_PERIOD)}: ` +
        'the leader needs room for at least one jittered retry',
    );
  }
  if (v.MEMBER_GRACE <= 2 * v.HEARTBEAT_INTERVAL) {
    throw new ConfigError(
      `${given('MEMBER_GRACE', v.MEMBER_GRACE)} must be more than twice ${given('HEARTBEAT_INTERVAL', v.HEARTBEAT_INTERVAL)}: ` +
        'otherwise a healthy member can be judged Unknown between two heartbeats',
    );
  }
  const cluster = parseRedisUrl(v.REDIS_URL).kind === 'cluster';
  if (cluster && /[{}]/.test(v.PREFIX)) {
    throw new ConfigError(
      `${describeSetting('PREFIX', raw('PREFIX'))} may not contain "{" or "}" on Redis Cluster: leasebeat adds the hash tag ({<lease name>}) itself`,
    );
  }
  if (cluster && v.BULL_PREFIX !== undefined && !hashTag(v.BULL_PREFIX)) {
    throw new ConfigError(
      `${describeSetting('BULL_PREFIX', raw('BULL_PREFIX'))} needs a hash tag on Redis Cluster (each queue's keys must share a slot): write it like {${v.BULL_PREFIX}}, or leave it unset`,
    );
  }
  if (Boolean(v.BOARD_USER) !== Boolean(v.BOARD_PASSWORD)) {
    throw new ConfigError('LEASEBEAT_BOARD_USER and LEASEBEAT_BOARD_PASSWORD must be set together (basic auth), or use LEASEBEAT_BOARD_TOKEN');
  }
  if (!isLoopbackHost(v.HTTP_HOST) && !v.BOARD_USER && !v.BOARD_TOKEN && !v.INSECURE_BOARD) {
    throw new ConfigError(
      `${describeSetting('HTTP_HOST', raw('HTTP_HOST'))} is reachable from other hosts and nothing protects Bull Board there: set ` +
        'LEASEBEAT_BOARD_USER and LEASEBEAT_BOARD_PASSWORD or LEASEBEAT_BOARD_TOKEN, bind a loopback address, or pass --insecure-board',
    );
  }
}

/** A Redis URL with any password replaced, for logs and messages. */
export function redactUrl(url: string): string {
  return redact(url);
}
