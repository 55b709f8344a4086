import { existsSync, readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { randomUUID } from 'node:crypto';
import { parseDuration } from '../scheduling/duration.js';
import { checkElectionTimings } from '../election/config.js';
import { resolveMemberSettings, type MemberSettings } from '../members/settings.js';
import type { WorkerTuning } from '../queueing/worker-pool.js';

/** The service configuration, from flags and `LEASEBEAT_*` environment variables (flags win). */
export interface ServiceConfig {
  redisUrl: string;
  /** Whether the Redis URL was given explicitly; only a default may be replaced by an embedded server. */
  redisUrlExplicit: boolean;
  prefix: string;
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
  board: { user?: string; password?: string; token?: string; readOnly: boolean; insecure: boolean };
  shutdownTimeoutMs: number;
  /** Heartbeat interval, grace period and removal timeout (rates and threshold at their defaults). */
  members: MemberSettings;
  /** BullMQ lock settings; unset fields keep leasebeat's defaults. */
  workerTuning: WorkerTuning;
  logLevel: string;
}

/** Raw settings by their contract name; flags are mapped onto these by the CLI. */
export type RawSettings = Partial<Record<(typeof SETTINGS)[number], string>>;

export const SETTINGS = [
  'REDIS_URL',
  'PREFIX',
  'LOCK',
  'LEASE_NAME',
  'LEASE_NAMESPACE',
  'IDENTITY',
  'LEASE_DURATION',
  'RENEW_DEADLINE',
  'RETRY_PERIOD',
  'JOBS_DIR',
  'HTTP_HOST',
  'HTTP_PORT',
  'BOARD_USER',
  'BOARD_PASSWORD',
  'BOARD_TOKEN',
  'BOARD_READONLY',
  'SHUTDOWN_TIMEOUT',
  'HEARTBEAT_INTERVAL',
  'MEMBER_GRACE',
  'MEMBER_REMOVAL',
  'LOCK_DURATION',
  'STALLED_INTERVAL',
  'LOG_LEVEL',
] as const;

/** A configuration problem; the message names the setting and the fix. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

const SERVICE_ACCOUNT = '/var/run/secrets/kubernetes.io/serviceaccount';

/** True inside a Kubernetes pod with a service account token. */
export function inCluster(env: NodeJS.ProcessEnv = process.env): boolean {
  return Boolean(env.KUBERNETES_SERVICE_HOST) && existsSync(`${SERVICE_ACCOUNT}/token`);
}

function duration(raw: string | undefined, name: string, fallback: number): number;
function duration(raw: string | undefined, name: string, fallback?: number): number | undefined;
function duration(raw: string | undefined, name: string, fallback?: number): number | undefined {
  if (raw === undefined || raw === '') return fallback;
  const ms = parseDuration(/^\d+$/.test(raw) ? Number(raw) : raw);
  if (ms === undefined || ms <= 0) {
    throw new ConfigError(`LEASEBEAT_${name}="${raw}" is not a duration: write it like 15s, 500ms or 2m`);
  }
  return ms;
}

/**
 * Resolves the configuration from `LEASEBEAT_*` variables and flag overrides, applying defaults and the
 * elector's rules, so a bad value stops the process at start with a message naming it.
 */
export function loadConfig(overrides: RawSettings & { insecureBoard?: boolean } = {}, env: NodeJS.ProcessEnv = process.env): ServiceConfig {
  const get = (name: (typeof SETTINGS)[number]): string | undefined => overrides[name] ?? env[`LEASEBEAT_${name}`];

  const lockSetting = get('LOCK') ?? 'auto';
  if (!['auto', 'redis', 'kubernetes'].includes(lockSetting)) {
    throw new ConfigError(`LEASEBEAT_LOCK="${lockSetting}" must be one of auto, redis, kubernetes`);
  }
  const lock = lockSetting === 'auto' ? (inCluster(env) ? 'kubernetes' : 'redis') : (lockSetting as 'redis' | 'kubernetes');

  const port = Number(get('HTTP_PORT') ?? 8080);
  if (!Number.isInteger(port) || port < 0 || port > 65_535) {
    throw new ConfigError(`LEASEBEAT_HTTP_PORT="${get('HTTP_PORT')}" must be a port number from 0 to 65535`);
  }

  const leaseDurationMs = duration(get('LEASE_DURATION'), 'LEASE_DURATION', 15_000);
  const renewDeadlineMs = duration(get('RENEW_DEADLINE'), 'RENEW_DEADLINE', 10_000);
  const retryPeriodMs = duration(get('RETRY_PERIOD'), 'RETRY_PERIOD', 2_000);
  try {
    checkElectionTimings({ leaseDurationMs, renewDeadlineMs, retryPeriodMs });
  } catch (error) {
    const message = (error as Error).message
      .replace('leaseDurationMs', 'LEASEBEAT_LEASE_DURATION')
      .replace('renewDeadlineMs', 'LEASEBEAT_RENEW_DEADLINE')
      .replace('renewDeadlineMs', 'LEASEBEAT_RENEW_DEADLINE')
      .replace('retryPeriodMs', 'LEASEBEAT_RETRY_PERIOD');
    throw new ConfigError(message);
  }

  let members: MemberSettings;
  try {
    members = resolveMemberSettings({
      heartbeatIntervalMs: duration(get('HEARTBEAT_INTERVAL'), 'HEARTBEAT_INTERVAL'),
      graceMs: duration(get('MEMBER_GRACE'), 'MEMBER_GRACE'),
      removalTimeoutMs: duration(get('MEMBER_REMOVAL'), 'MEMBER_REMOVAL'),
    });
  } catch (error) {
    const message = (error as Error).message
      .replace('heartbeatIntervalMs', 'LEASEBEAT_HEARTBEAT_INTERVAL')
      .replace('graceMs', 'LEASEBEAT_MEMBER_GRACE')
      .replace('heartbeatIntervalMs', 'LEASEBEAT_HEARTBEAT_INTERVAL');
    throw new ConfigError(message);
  }

  const namespaceFile = `${SERVICE_ACCOUNT}/namespace`;
  const leaseNamespace =
    get('LEASE_NAMESPACE') ?? env.POD_NAMESPACE ?? (existsSync(namespaceFile) ? readFileSync(namespaceFile, 'utf8').trim() : 'default');
  const user = get('BOARD_USER');
  const password = get('BOARD_PASSWORD');
  if (Boolean(user) !== Boolean(password)) {
    throw new ConfigError('set both LEASEBEAT_BOARD_USER and LEASEBEAT_BOARD_PASSWORD, or neither (or use LEASEBEAT_BOARD_TOKEN)');
  }
  const leaseName = get('LEASE_NAME') ?? 'leasebeat';
  if (!/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(leaseName)) {
    throw new ConfigError(`LEASEBEAT_LEASE_NAME="${leaseName}" must be a DNS subdomain name: lower-case letters, digits, '-' and '.'`);
  }

  return {
    redisUrl: get('REDIS_URL') ?? 'redis://127.0.0.1:6379',
    redisUrlExplicit: get('REDIS_URL') !== undefined,
    prefix: get('PREFIX') ?? 'leasebeat',
    lock,
    leaseName,
    leaseNamespace,
    // A pod name repeats when a container restarts in place; the uuid keeps every incarnation distinct.
    identity: get('IDENTITY') ?? `${env.POD_NAME ?? hostname()}_${randomUUID()}`,
    leaseDurationMs,
    renewDeadlineMs,
    retryPeriodMs,
    jobsDir: get('JOBS_DIR') ?? './jobs',
    httpHost: get('HTTP_HOST') ?? '127.0.0.1',
    httpPort: port,
    board: {
      user,
      password,
      token: get('BOARD_TOKEN'),
      readOnly: ['1', 'true', 'yes'].includes((get('BOARD_READONLY') ?? '').toLowerCase()),
      insecure: overrides.insecureBoard ?? false,
    },
    shutdownTimeoutMs: duration(get('SHUTDOWN_TIMEOUT'), 'SHUTDOWN_TIMEOUT', 25_000),
    members,
    workerTuning: {
      lockDurationMs: duration(get('LOCK_DURATION'), 'LOCK_DURATION'),
      stalledIntervalMs: duration(get('STALLED_INTERVAL'), 'STALLED_INTERVAL'),
    },
    logLevel: get('LOG_LEVEL') ?? 'info',
  };
}

/** A Redis URL with any password replaced, for logs. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return '<unparseable url>';
  }
}
