import { createHash } from 'node:crypto';
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import { formatDuration } from '../scheduling/duration.js';
import { isCluster, type RedisClient } from '../util/redis-client.js';

/**
 * Where leasebeat's Redis is and how to reach it, from one URL. The schemes are those ioredis/BullMQ users
 * already write, plus the `+sentinel` / `+cluster` forms used by redis-py, Spring and node-redis-url:
 *
 * - `redis://[[user]:password@]host:port[/db]`, `rediss://…` (TLS): one server (or a managed endpoint).
 * - `redis+sentinel://[[user]:password@]host:port[,host:port…]/<masterName>[/db][?options]`,
 *   `rediss+sentinel://…` (TLS to the data nodes): a Sentinel group. Options: `sentinelPassword`,
 *   `sentinelUsername`, `sentinelTls=true` (TLS to the sentinels as well).
 * - `redis+cluster://[[user]:password@]host:port[,host:port…][?natMap=from:port=to:port,…]`,
 *   `rediss+cluster://…`: a Redis Cluster, through any of its seed nodes.
 *
 * Every scheme also takes `minReplicas=<n>` and `waitTimeout=<ms>` (see durability.ts).
 */
export type RedisTopology = { minReplicas?: number; waitTimeoutMs?: number } & (
  | { kind: 'standalone'; url: string; options: RedisOptions }
  | { kind: 'sentinel'; options: RedisOptions & { sentinels: Array<{ host: string; port: number }>; name: string } }
  | { kind: 'cluster'; nodes: Array<{ host: string; port: number }>; options: ClusterOptions & { redisOptions: RedisOptions } }
);

// A client of either kind, and how to tell a Cluster: defined below every layer that holds one.
export { isCluster, type RedisClient };

/**
 * What stands between a URL and a usable server: `config`, something to fix in the URL or on the server
 * (credentials, the kind of server, a database, the user's permissions); `unreachable`, nothing answers
 * there (connection refused, no such host); `unanswered`, a server accepts connections but does not answer
 * within the bound.
 */
export type RedisProblem = 'config' | 'unreachable' | 'unanswered';

/** A configuration leasebeat refuses, or a server it cannot use, with the reason and the fix in the message. */
export class RedisTopologyError extends Error {
  override readonly name = 'RedisTopologyError';

  constructor(
    message: string,
    readonly problem: RedisProblem = 'config',
  ) {
    super(message);
  }
}

/** The prefix of leasebeat's own keys when none is configured. */
export const DEFAULT_KEY_PREFIX = 'leasebeat';

/** The BullMQ prefix leasebeat uses on Redis Cluster when neither it nor the key prefix is configured. */
export const CLUSTER_BULL_PREFIX = '{leasebeat-bull}';

/**
 * The BullMQ prefix of a deployment that names none: with the default key prefix, BullMQ's own `bull`
 * (undefined: BullMQ's default), so existing queues and tools keep working; with any other, `<prefix>-bull`,
 * so that two deployments with different prefixes on one Redis never share a queue (nor run each other's
 * jobs, nor deduplicate each other's job ids). On Cluster hash-tagged: `{leasebeat-bull}`, `{<prefix>-bull}`.
 */
export function defaultBullPrefix(prefix: string | undefined, cluster: boolean): string | undefined {
  const own = prefix === undefined || prefix === DEFAULT_KEY_PREFIX;
  if (cluster) return own ? CLUSTER_BULL_PREFIX : `{${prefix}-bull}`;
  return own ? undefined : `${prefix}-bull`;
}

const SCHEMES = ['redis:', 'rediss:', 'redis+sentinel:', 'rediss+sentinel:', 'redis+cluster:', 'rediss+cluster:'];

/** Parses a Redis URL in one of the forms above. Throws `RedisTopologyError` naming what is wrong. */
export function parseRedisUrl(input: string): RedisTopology {
  const scheme = /^([a-z+]+:)\/\//i.exec(input)?.[1]?.toLowerCase();
  if (!scheme || !SCHEMES.includes(scheme)) {
    throw new RedisTopologyError(`unsupported Redis URL ${redact(input)}: expected one of ${SCHEMES.map((s) => `${s}//`).join(', ')}`);
  }
  const tls = scheme.startsWith('rediss');
  // WHATWG URL accepts only one host, so the host list is cut out first and parsed by hand.
  const rest = input.slice(scheme.length + 2);
  const hostEnd = rest.search(/[/?]/);
  const at = (hostEnd < 0 ? rest : rest.slice(0, hostEnd)).lastIndexOf('@');
  const auth = at >= 0 ? rest.slice(0, at) : '';
  const afterAuth = at >= 0 ? rest.slice(at + 1) : rest;
  const hostsEnd = afterAuth.search(/[/?]|$/);
  const hostList = afterAuth.slice(0, hostsEnd);
  const tail = new URL(`x://h${afterAuth.slice(hostsEnd)}`);
  const [rawUser, ...rawPassword] = auth ? auth.split(':') : [];
  const username = rawUser ? decodeURIComponent(rawUser) : undefined;
  const password = rawPassword.length > 0 ? decodeURIComponent(rawPassword.join(':')) : undefined;
  const params = tail.searchParams;
  const minReplicas = optionalInt(params.get('minReplicas'), 'minReplicas', input);
  const waitTimeoutMs = optionalInt(params.get('waitTimeout'), 'waitTimeout', input);
  if (waitTimeoutMs === 0) throw new RedisTopologyError(`Redis URL ${redact(input)}: waitTimeout must be > 0 ms (Redis' WAIT 0 would block for ever)`);
  const durability = { ...(minReplicas !== undefined ? { minReplicas } : {}), ...(waitTimeoutMs !== undefined ? { waitTimeoutMs } : {}) };
  const known = new Set(['minReplicas', 'waitTimeout', 'sentinelPassword', 'sentinelUsername', 'sentinelTls', 'natMap']);
  for (const key of params.keys()) {
    if (!known.has(key)) throw new RedisTopologyError(`Redis URL ${redact(input)}: unknown option "${key}" (known: ${[...known].join(', ')})`);
  }
  const hosts = hostList.split(',').filter(Boolean).map((entry) => parseHost(entry, input));
  if (hosts.length === 0) throw new RedisTopologyError(`Redis URL ${redact(input)} names no host`);
  const base: RedisOptions = { ...(username ? { username } : {}), ...(password ? { password } : {}), ...(tls ? { tls: {} } : {}) };
  const path = tail.pathname.split('/').filter(Boolean).map(decodeURIComponent);

  if (scheme.includes('+sentinel')) {
    const [name, db] = path;
    if (!name) throw new RedisTopologyError(`Redis URL ${redact(input)}: a Sentinel URL needs the master name as its path (redis+sentinel://host:26379,host:26380/mymaster)`);
    const sentinelTls = params.get('sentinelTls') === 'true';
    return {
      kind: 'sentinel',
      ...durability,
      options: {
        ...base,
        sentinels: hosts,
        name,
        ...(db !== undefined ? { db: dbNumber(db, input) } : {}),
        ...(params.get('sentinelPassword') ? { sentinelPassword: params.get('sentinelPassword')! } : {}),
        ...(params.get('sentinelUsername') ? { sentinelUsername: params.get('sentinelUsername')! } : {}),
        ...(sentinelTls ? { enableTLSForSentinelMode: true, sentinelTLS: {} } : {}),
        // Follow a promotion as soon as the sentinels announce it, rather than at the next error.
        failoverDetector: true,
      },
    };
  }
  if (scheme.includes('+cluster')) {
    if (path.length > 0) throw new RedisTopologyError(`Redis URL ${redact(input)}: Redis Cluster has only database 0; remove "/${path.join('/')}"`);
    const natMap = params.get('natMap');
    return {
      kind: 'cluster',
      nodes: hosts,
      ...durability,
      options: { redisOptions: base, ...(natMap ? { natMap: parseNatMap(natMap, input) } : {}) },
    };
  }
  if (hosts.length > 1) throw new RedisTopologyError(`Redis URL ${redact(input)} names ${hosts.length} hosts: use redis+sentinel:// or redis+cluster:// for several`);
  for (const key of ['sentinelPassword', 'sentinelUsername', 'sentinelTls', 'natMap']) {
    if (params.has(key)) throw new RedisTopologyError(`Redis URL ${redact(input)}: "${key}" applies only to redis+sentinel:// or redis+cluster://`);
  }
  const { host, port } = hosts[0]!;
  const db = path[0];
  return {
    kind: 'standalone',
    ...durability,
    url: input,
    options: { ...base, host, port, ...(db !== undefined ? { db: dbNumber(db, input) } : {}) },
  };
}

/** How a connection is used; each gets the settings its user needs. */
export type ConnectionRole =
  /**
   * leasebeat's own commands (lock, fence, ledger, BullMQ adds): a command is never replayed across a
   * lost connection (maxRetriesPerRequest 0), since a claim or an add arriving late, after another leader
   * took over, is exactly what fencing is about.
   */
  | 'control'
  /** BullMQ workers and blocking commands: BullMQ requires maxRetriesPerRequest null. */
  | 'worker';

/**
 * Opens connections to a topology. Every connection leasebeat opens (control, workers, Bull Board, the
 * CLI) goes through here, so each topology has one place that knows how to reach it.
 */
export class RedisConnections {
  constructor(readonly topology: RedisTopology) {}

  static fromUrl(url: string): RedisConnections {
    return new RedisConnections(parseRedisUrl(url));
  }

  /** Opens a new connection for `role`; the caller closes it. */
  open(role: ConnectionRole, extra: RedisOptions = {}): RedisClient {
    const perRole: RedisOptions = {
      maxRetriesPerRequest: role === 'control' ? 0 : null,
      // A primary demoted under us answers READONLY: reconnect (Sentinel mode asks the sentinels again)
      // without resending the write, which the caller retries knowing it failed.
      reconnectOnError: (error) => error.message.startsWith('READONLY'),
      ...extra,
    };
    const t = this.topology;
    switch (t.kind) {
      case 'standalone':
        return new Redis({ ...t.options, ...perRole });
      case 'sentinel':
        return new Redis({ ...t.options, ...perRole });
      case 'cluster':
        return new Cluster(t.nodes, {
          ...t.options,
          // A lazy connection is the cluster's, not only its nodes': else it connects (and retries) at once.
          ...(extra.lazyConnect !== undefined ? { lazyConnect: extra.lazyConnect } : {}),
          redisOptions: { ...t.options.redisOptions, ...perRole },
        });
    }
  }

  /**
   * Checks what a URL asks of the server it reached that ioredis does not, and what leasebeat needs of the
   * URL's user, before anything is written:
   * - the database number: ioredis sends `SELECT` when it connects, and when the server refuses it (an index
   *   past its `databases`) it only emits an error and goes on in database 0, among another deployment's keys;
   * - the commands, keys and channel leasebeat and BullMQ use (an ACL user without them starts, then fails
   *   at its first tick), each probed in a way that changes nothing. Without `use`, only the commands that
   *   need no key of the deployment.
   * Throws `RedisTopologyError`.
   */
  async checkServer(client: RedisClient, use?: DeploymentUse): Promise<void> {
    const t = this.topology;
    const db = t.kind === 'cluster' ? undefined : t.options.db;
    if (db !== undefined && db !== 0) {
      try {
        await (client as Redis).select(db);
      } catch (error) {
        const reason = error instanceof Error ? error.message : String(error);
        throw new RedisTopologyError(`Redis URL ${this.describe()}: database ${db} cannot be used on this server (${reason}): use one below its \`databases\` setting (16 by default)`);
      }
    }
    await this.checkPermissions(client, use);
  }

  /**
   * Reaches the URL's servers within `timeoutMs` and checks that they are what the URL names and let its
   * user in: each seed address (the server, the sentinels, the cluster's seed nodes) is asked what it is
   * (`INFO server`'s redis_mode; a sentinel, whether it knows the master), then one connection through the
   * topology must answer PING and may run the commands every leasebeat process needs. Throws a
   * `RedisTopologyError` saying what stands in the way; a server in use is never written to.
   */
  async reach(timeoutMs: number): Promise<void> {
    const deadline = performance.now() + timeoutMs;
    const left = (): number => Math.max(1, Math.ceil(deadline - performance.now()));
    const late = (): RedisTopologyError => this.unanswered(timeoutMs);
    // Each step's own timeouts end its commands (and so close its connection); the race is the bound.
    // A probe past the bound is that seed's problem (unanswered), weighed with the others'.
    const probes = this.seeds().map((seed) => withinDeadline(this.probeSeed(seed, timeoutMs, left()), left(), late).catch((error: unknown) => error as RedisTopologyError));
    // One usable seed is enough (a sentinel or a seed node may be down), and the first one found ends the
    // wait: a seed that accepts connections and never answers (a frozen node) would hold it to the bound.
    const usable = await Promise.any(probes.map((probe) => probe.then((problem) => (problem === undefined ? true : Promise.reject(problem))))).catch(() => false);
    if (usable) {
      await withinDeadline(this.answersThrough(timeoutMs, left()), left(), late);
      return;
    }
    // None usable: the most telling problem.
    const problems = (await Promise.all(probes)).filter((p) => p !== undefined);
    const order: RedisProblem[] = ['config', 'unanswered', 'unreachable'];
    throw problems.sort((a, b) => order.indexOf(a.problem) - order.indexOf(b.problem))[0]!;
  }

  /** The addresses a client dials first, with the credentials and TLS it uses there. */
  private seeds(): Seed[] {
    const t = this.topology;
    const login = (options: { username?: string; password?: string; tls?: RedisOptions['tls'] }): Pick<Seed, 'username' | 'password' | 'tls'> => ({
      ...(options.username ? { username: options.username } : {}),
      ...(options.password ? { password: options.password } : {}),
      ...(options.tls ? { tls: options.tls } : {}),
    });
    switch (t.kind) {
      case 'standalone':
        return [{ host: t.options.host!, port: t.options.port!, ...login(t.options) }];
      case 'sentinel': {
        const auth = login({
          username: t.options.sentinelUsername,
          password: t.options.sentinelPassword,
          tls: t.options.enableTLSForSentinelMode ? (t.options.sentinelTLS ?? {}) : undefined,
        });
        return t.options.sentinels.map((s) => ({ host: String(s.host), port: Number(s.port), ...auth }));
      }
      case 'cluster':
        return t.nodes.map((n) => ({ host: n.host, port: n.port, ...login(t.options.redisOptions) }));
    }
  }

  /** What is wrong with one seed address, or undefined when it is what the URL names. */
  private async probeSeed(seed: Seed, boundMs: number, timeoutMs: number): Promise<RedisTopologyError | undefined> {
    const address = `${seed.host}:${seed.port}`;
    const sentinel = this.topology.kind === 'sentinel';
    // A plain connection, whatever the topology: it must tell what answers there, not follow it.
    const client = new Redis({
      host: seed.host, port: seed.port, ...(seed.tls ? { tls: seed.tls } : {}),
      lazyConnect: true, enableReadyCheck: false, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: timeoutMs, commandTimeout: timeoutMs,
    });
    const errors: Error[] = [];
    client.on('error', (error: Error) => errors.push(error));
    try {
      try {
        await client.connect();
      } catch (error) {
        const cause = errors[0] ?? (error as Error);
        const code = (cause as NodeJS.ErrnoException).code;
        const why = code === 'ECONNREFUSED' ? 'refused the connection' : code === 'ENOTFOUND' ? 'does not resolve (ENOTFOUND)' : `cannot be reached (${code ?? cause.message})`;
        return new RedisTopologyError(`no Redis answers at ${this.describe()}: ${address} ${why}: start it, or fix the URL`, 'unreachable');
      }
      if (seed.password !== undefined) {
        try {
          await client.call('AUTH', ...(seed.username ? [seed.username] : []), seed.password);
        } catch (error) {
          return this.failure(error, address, sentinel, boundMs);
        }
      }
      let mode: string | undefined;
      try {
        mode = /^redis_mode:(\w+)/m.exec(await client.info('server'))?.[1];
      } catch (error) {
        // Any other refusal (a user without INFO, a renamed command) leaves the kind of server unknown here;
        // the permission check names INFO.
        const reply = replyError(error);
        if (reply === undefined || /^(NOAUTH|WRONGPASS)/.test(reply)) return this.failure(error, address, sentinel, boundMs);
      }
      if (mode !== undefined && mode !== EXPECTED_MODE[this.topology.kind]) return await this.mismatch(address, mode, client);
      return sentinel ? await this.sentinelProblem(client, address) : undefined;
    } catch (error) {
      return this.failure(error, address, sentinel, boundMs);
    } finally {
      client.disconnect();
    }
  }

  /** A server that accepts connections and does not answer within `boundMs`. */
  private unanswered(boundMs: number): RedisTopologyError {
    return new RedisTopologyError(
      `no Redis answers at ${this.describe()} within ${formatDuration(boundMs)}: it accepts connections but does not answer (stopped, overloaded, or not Redis?)`,
      'unanswered',
    );
  }

  /** Why a command at `address` failed: refused credentials (WRONGPASS, NOAUTH) named with the fix, no answer, or as it came. */
  private failure(error: unknown, address: string | undefined, sentinel: boolean, boundMs: number): RedisTopologyError {
    const reason = error instanceof Error ? error.message : String(error);
    if (/^(WRONGPASS|NOAUTH|ERR invalid password|ERR AUTH)/.test(reason)) {
      const fix = sentinel
        ? 'set the sentinels\' credentials as ?sentinelUsername=…&sentinelPassword=… in the URL'
        : /^NOAUTH/.test(reason)
          ? 'put the password in the URL (redis://:password@host:port, or redis://user:password@host:port for an ACL user)'
          : 'fix the user and password in the URL (redis://user:password@host:port)';
      // The address only where the URL names several.
      const at = address === undefined || this.topology.kind === 'standalone' ? '' : ` at ${address}${sentinel ? ' (a sentinel)' : ''}`;
      return new RedisTopologyError(`Redis at ${this.describe()}: authentication failed${at} (${reason}): ${fix}`);
    }
    if (reason.includes('timed out')) return this.unanswered(boundMs);
    return new RedisTopologyError(`no Redis answers at ${this.describe()}${address === undefined ? '' : ` (${address})`}: ${reason}: start it, or fix the URL`, 'unreachable');
  }

  /** A server of another kind than the URL names, and the URL that reaches it. */
  private async mismatch(address: string, mode: string, client: Redis): Promise<RedisTopologyError> {
    const scheme = this.topology.kind === 'standalone' ? 'redis://' : `redis+${this.topology.kind}://`;
    const fix =
      mode === 'cluster'
        ? `use redis+cluster://${address}`
        : mode === 'sentinel'
          ? `use redis+sentinel://${address}/<master name>${await monitoredNames(client)}`
          : `use redis://${address}${this.topology.kind === 'sentinel' ? ", or the sentinels' addresses (port 26379 by default)" : ''}`;
    return new RedisTopologyError(`Redis at ${this.describe()}: ${address} is ${MODE_NAMES[mode] ?? `a ${mode} server`}, not ${MODE_NAMES[EXPECTED_MODE[this.topology.kind]]} as ${scheme} expects: ${fix}`);
  }

  /** Whether the sentinel at `address` knows the URL's master. */
  private async sentinelProblem(client: Redis, address: string): Promise<RedisTopologyError | undefined> {
    const name = (this.topology as Extract<RedisTopology, { kind: 'sentinel' }>).options.name;
    const master = (await client.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', name)) as string[] | null;
    if (master) return undefined;
    return new RedisTopologyError(`Redis at ${this.describe()}: the sentinel at ${address} monitors no master named "${name}"${await monitoredNames(client)}: fix the name in the URL's path`);
  }

  /** PING through the topology (the sentinels' master, the cluster), then the commands every process needs. */
  private async answersThrough(boundMs: number, timeoutMs: number): Promise<void> {
    const client = this.open('control', {
      lazyConnect: true, enableReadyCheck: false, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: timeoutMs, commandTimeout: timeoutMs,
    });
    const errors: Error[] = [];
    client.on('error', (error: Error) => errors.push(error));
    try {
      try {
        if (client.status === 'wait') await client.connect();
        await client.ping();
      } catch (error) {
        const cause = errors.find((e) => /^(WRONGPASS|NOAUTH)/.test(e.message)) ?? errors[0] ?? error;
        // Through the sentinels the data node's credentials are the URL's own.
        throw this.failure(cause, undefined, false, boundMs);
      }
      await this.checkPermissions(client).catch((error: unknown) => {
        throw error instanceof RedisTopologyError ? error : this.failure(error, undefined, false, boundMs);
      });
    } finally {
      client.disconnect();
    }
  }

  /** Probes what leasebeat needs of its user (see `checkServer`); throws one error naming all that is missing and the grant. */
  private async checkPermissions(client: RedisClient, use?: DeploymentUse): Promise<void> {
    const missing = new Map<string, string>();
    for (const probe of permissionProbes(use, use?.replicated ?? this.defaultMinReplicas() > 0)) {
      try {
        await probe.run(client);
      } catch (error) {
        const reply = replyError(error);
        if (reply === undefined) throw error;
        // Only a refusal by the ACL counts: an older server's syntax error or NOSCRIPT is no missing permission.
        const refused = /^NOPERM .*(command|keys|channels)/.exec(reply)?.[1];
        if (refused === 'command') missing.set(`+${probe.command}`, `${probe.command.toUpperCase()} (${probe.why})`);
        else if (refused === 'keys') missing.set(`~${probe.keys}`, `the keys ${probe.keys} (${probe.keysWhy})`);
        else if (refused === 'channels') missing.set(`&${probe.channel}`, `the channel ${probe.channel} (${probe.why})`);
      }
    }
    if (missing.size === 0) return;
    const user = this.username();
    throw new RedisTopologyError(
      `Redis at ${this.describe()}: the user "${user}" may not use ${[...missing.values()].join(', ')}: ` +
        `grant them (ACL SETUSER ${user} ${[...missing.keys()].join(' ')}), or give the user +@all -@dangerous +info on the deployment's keys and channel`,
    );
  }

  /** The ACL user the URL logs in as. */
  private username(): string {
    const t = this.topology;
    return (t.kind === 'cluster' ? t.options.redisOptions.username : t.options.username) ?? 'default';
  }

  /** The number of replicas a durable write waits for when none is configured: see durability.ts. */
  defaultMinReplicas(): number {
    return this.topology.minReplicas ?? (this.topology.kind === 'standalone' ? 0 : 1);
  }

  /**
   * The BullMQ prefix to use, checked against the topology. On Cluster, BullMQ's scripts touch many keys
   * of one queue (and a flow touches its parent's and its children's queues), so every queue must hash
   * to one slot: the prefix must carry a hash tag. leasebeat's default there is `{leasebeat-bull}` (see
   * `defaultBullPrefix` for another key prefix), which
   * puts all its queues in one slot: flows across queues keep working, at the price of one shard doing
   * all BullMQ work. A prefix without a hash tag is refused.
   */
  bullPrefix(requested: string | undefined, keyPrefix?: string): string | undefined {
    const cluster = this.topology.kind === 'cluster';
    return cluster ? clusterBullPrefix(requested, keyPrefix) : (requested ?? defaultBullPrefix(keyPrefix, false));
  }

  /**
   * Checks leasebeat's own key names: the lease, the fence and the ledger share the hash tag `{<leaseName>}`
   * so that each Lua script touches one slot. A lease name with braces would move the tag.
   */
  checkLeaseName(leaseName: string, prefix = 'leasebeat'): void {
    if (/[{}]/.test(leaseName)) {
      throw new RedisTopologyError(`lease name "${leaseName}" may not contain "{" or "}": it is the hash tag of leasebeat's keys`);
    }
    if (this.topology.kind === 'cluster' && /[{}]/.test(prefix)) {
      // `<prefix>:{<lease>}:…` hashes by the first braces: a braced prefix would still be one slot, but
      // the same slot for every lease sharing the prefix, and `{}` would break the tag: refuse both.
      throw new RedisTopologyError(`key prefix "${prefix}" may not contain "{" or "}" on Redis Cluster: leasebeat adds the hash tag itself`);
    }
  }

  /**
   * On Sentinel, a check that a connection talks to the primary a majority of the sentinels agree on
   * (see durability.ts); undefined on other topologies. The caller closes it.
   */
  sentinelPrimaryCheck(): SentinelPrimaryCheck | undefined {
    return this.topology.kind === 'sentinel' ? new SentinelPrimaryCheck(this.topology.options) : undefined;
  }

  /** The address without credentials, for logs and errors. */
  describe(): string {
    const t = this.topology;
    switch (t.kind) {
      case 'standalone':
        return redact(t.url);
      case 'sentinel':
        return `sentinel ${t.options.sentinels.map((s) => `${s.host}:${s.port}`).join(',')} master ${t.options.name}`;
      case 'cluster':
        return `cluster ${t.nodes.map((n) => `${n.host}:${n.port}`).join(',')}`;
    }
  }
}

/**
 * What a deployment uses on its Redis, for `RedisConnections.checkServer` to probe: its keys, BullMQ's,
 * the Redis lock's channel, and whether its deciding writes wait for replicas.
 */
export interface DeploymentUse {
  /** The base of leasebeat's own keys, `<prefix>:{<lease name>}`. */
  keyBase: string;
  /** BullMQ's prefix. */
  bullPrefix: string;
  /** The Redis lock's change channel (PUBLISH in its scripts, SUBSCRIBE in its feed); none under another lock. */
  leaseChannel?: string;
  /** The channel leaders publish run stop requests on (overlap `cancelOther`, `terminateOther`), which every instance's workers hear. */
  runStopChannel?: string;
  /** Whether deciding writes wait for replicas (WAIT). Default: the topology's default. */
  replicated?: boolean;
}

/** A seed address of a topology, with the credentials and TLS used there. */
interface Seed {
  host: string;
  port: number;
  username?: string;
  password?: string;
  tls?: RedisOptions['tls'];
}

/** `INFO server`'s redis_mode each kind of URL expects of its seed addresses. */
const EXPECTED_MODE: Record<RedisTopology['kind'], string> = { standalone: 'standalone', sentinel: 'sentinel', cluster: 'cluster' };
const MODE_NAMES: Record<string, string> = { standalone: 'a standalone Redis', sentinel: 'a Sentinel', cluster: 'a Redis Cluster node' };

/** The message of a server's error reply; undefined for any other failure (a closed connection, a timeout). */
function replyError(error: unknown): string | undefined {
  return error instanceof Error && error.name === 'ReplyError' ? error.message : undefined;
}

/** `(it monitors: a, b)` when `client` is a sentinel that monitors masters; empty otherwise. */
async function monitoredNames(client: Redis): Promise<string> {
  try {
    const masters = (await client.call('SENTINEL', 'MASTERS')) as string[][];
    const names = masters.map((fields) => fields[fields.indexOf('name') + 1]).filter(Boolean);
    return names.length > 0 ? ` (it monitors: ${names.join(', ')})` : ' (it monitors no master)';
  } catch {
    return '';
  }
}

/** `work`, or `late()` thrown once `ms` have passed (its connections are the work's to close). */
async function withinDeadline<T>(work: Promise<T>, ms: number, late: () => Error): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([work, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(late()), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

/** One thing leasebeat needs of its Redis user, probed in a way that changes nothing. */
interface PermissionProbe {
  /** The command, lower-case as ACL rules write it. */
  command: string;
  why: string;
  /** The key pattern the probe's key stands for, and what lives there. */
  keys?: string;
  keysWhy?: string;
  channel?: string;
  run(client: RedisClient): Promise<unknown>;
}

const PROBE_SCRIPT = 'return 1';
const PROBE_SCRIPT_SHA = createHash('sha1').update(PROBE_SCRIPT).digest('hex');

/**
 * The probes: the commands every process runs (scripts, and INFO and TIME, which leasebeat's scripts and
 * BullMQ also call; WAIT on replicated topologies), and with `use` the deployment's keys, BullMQ's keys and
 * the channels (the Redis lock's, the run stop requests'). The probe keys are names nobody uses; XADD with
 * NOMKSTREAM creates nothing, and subscribers of either channel ignore an empty message.
 */
function permissionProbes(use: DeploymentUse | undefined, replicated: boolean): PermissionProbe[] {
  const own = use && `${use.keyBase}:permission-probe`;
  const ownKeys = use && { keys: `${use.keyBase}:*`, keysWhy: "leasebeat's keys" };
  const scriptKeys = own ? [own] : [];
  const probes: PermissionProbe[] = [
    { command: 'eval', why: "leasebeat's and BullMQ's scripts", ...ownKeys, run: (c) => c.eval(PROBE_SCRIPT, scriptKeys.length, ...scriptKeys) },
    { command: 'evalsha', why: "leasebeat's and BullMQ's scripts", ...ownKeys, run: (c) => c.evalsha(PROBE_SCRIPT_SHA, scriptKeys.length, ...scriptKeys) },
    { command: 'info', why: "called inside leasebeat's scripts, and by BullMQ", run: (c) => c.info('server') },
    { command: 'time', why: "called inside leasebeat's scripts, and for Redis time", run: (c) => c.time() },
  ];
  if (replicated) probes.push({ command: 'wait', why: 'replicas acknowledge each deciding write', run: (c) => c.call('WAIT', 0, 1) });
  if (!use || !own) return probes;
  const bull = `${use.bullPrefix}:permission-probe`;
  const bullKeys = { keys: `${use.bullPrefix}:*`, keysWhy: "BullMQ's queues" };
  probes.push(
    { command: 'xadd', why: "the leader's request stream", ...ownKeys, run: (c) => c.xadd(own, 'NOMKSTREAM', 'MAXLEN', 0, '*', 'probe', '1') },
    { command: 'xread', why: "the leader's request stream", ...ownKeys, run: (c) => c.xread('COUNT', 1, 'STREAMS', own, '0-0') },
    { command: 'eval', why: "BullMQ's scripts", ...bullKeys, run: (c) => c.eval(PROBE_SCRIPT, 1, bull) },
    { command: 'bzpopmin', why: "BullMQ's workers wait on it", ...bullKeys, run: (c) => c.bzpopmin(bull, 0.01) },
  );
  const channels = [
    { channel: use.leaseChannel, why: "the Redis lock's change feed" },
    { channel: use.runStopChannel, why: 'stop requests of runs (overlap cancelOther, terminateOther)' },
  ];
  for (const { channel, why } of channels) {
    if (channel === undefined) continue;
    probes.push(
      { command: 'publish', why, channel, run: (c) => c.publish(channel, '') },
      { command: 'subscribe', why, channel, run: (c) => subscribeOnce(c, channel) },
    );
  }
  return probes;
}

/** Subscribes to `channel` on a connection of its own, and leaves. */
async function subscribeOnce(client: RedisClient, channel: string): Promise<void> {
  const subscriber = isCluster(client) ? client.duplicate([], { lazyConnect: true }) : client.duplicate({ lazyConnect: true, enableReadyCheck: false });
  subscriber.on('error', () => undefined);
  try {
    await subscriber.subscribe(channel);
  } finally {
    subscriber.disconnect();
  }
}

/**
 * The BullMQ prefix for a client given by the application: on a Cluster client it must carry a hash tag,
 * as with a `redis+cluster://` URL (see `RedisConnections.bullPrefix`).
 */
export function bullPrefixFor(client: RedisClient, requested: string | undefined, keyPrefix?: string): string | undefined {
  return isCluster(client) ? clusterBullPrefix(requested, keyPrefix) : (requested ?? defaultBullPrefix(keyPrefix, false));
}

/** The BullMQ prefix on Redis Cluster: `requested` if it carries a hash tag, the deployment's default if unset. */
function clusterBullPrefix(requested: string | undefined, keyPrefix: string | undefined): string {
  if (requested === undefined) return defaultBullPrefix(keyPrefix, true)!;
  if (!hashTag(requested)) {
    throw new RedisTopologyError(
      `BullMQ prefix "${requested}" has no hash tag: on Redis Cluster each queue's keys must share a slot. ` +
        `Use a braced prefix such as "{${requested}}" (or leave it unset for "${CLUSTER_BULL_PREFIX}")`,
    );
  }
  return requested;
}


/** The hash tag Redis Cluster hashes `key` by, or undefined when the whole key is hashed. */
export function hashTag(key: string): string | undefined {
  const open = key.indexOf('{');
  if (open < 0) return undefined;
  const close = key.indexOf('}', open + 1);
  if (close <= open + 1) return undefined;
  return key.slice(open + 1, close);
}

/** Redis Cluster's slot of a key (CRC16/XMODEM of its hash tag, mod 16384). */
export function keySlot(key: string): number {
  const data = Buffer.from(hashTag(key) ?? key);
  let crc = 0;
  for (const byte of data) {
    crc ^= byte << 8;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc % 16384;
}

function parseHost(entry: string, input: string): { host: string; port: number } {
  const match = /^(\[[^\]]+\]|[^:]+)(?::(\d+))?$/.exec(entry);
  if (!match) throw new RedisTopologyError(`Redis URL ${redact(input)}: cannot read host "${entry}"`);
  const port = match[2] === undefined ? defaultPort(input) : Number(match[2]);
  if (!(port > 0 && port < 65536)) throw new RedisTopologyError(`Redis URL ${redact(input)}: bad port in "${entry}"`);
  return { host: match[1]!.replace(/^\[|\]$/g, ''), port };
}

function defaultPort(input: string): number {
  return input.includes('+sentinel://') ? 26379 : 6379;
}

function dbNumber(value: string, input: string): number {
  if (!/^\d+$/.test(value)) throw new RedisTopologyError(`Redis URL ${redact(input)}: database "${value}" is not a number`);
  return Number(value);
}

function optionalInt(value: string | null, name: string, input: string): number | undefined {
  if (value === null) return undefined;
  if (!/^\d+$/.test(value)) throw new RedisTopologyError(`Redis URL ${redact(input)}: ${name} must be a whole number, got "${value}"`);
  return Number(value);
}

/** `natMap=10.0.0.5:6379=127.0.0.1:7000,…`: the addresses the cluster announces → the ones to dial. */
function parseNatMap(value: string, input: string): Record<string, { host: string; port: number }> {
  const map: Record<string, { host: string; port: number }> = {};
  for (const pair of value.split(',').filter(Boolean)) {
    const [from, to] = pair.split('=');
    if (!from || !to || !/:\d+$/.test(from)) throw new RedisTopologyError(`Redis URL ${redact(input)}: natMap entry "${pair}" is not announced:port=reachable:port`);
    map[from] = parseHost(to, input);
  }
  return map;
}

/** The URL with its password replaced, for messages. */
export function redact(url: string): string {
  return url.replace(/\/\/([^@/]*):([^@/]*)@/, '//$1:***@').replace(/(sentinelPassword=)[^&]*/g, '$1***');
}

/**
 * Whether a data connection talks to the primary that the sentinels name now. A primary frozen and
 * resumed, or cut off from the sentinels, still believes it is the primary and keeps its replicas for a
 * moment, so a WAIT there can succeed; the sentinels know better. A majority must name this node, and no
 * sentinel that answers may dissent: name another, see it down, or be failing it over (a failover chooses
 * its replica when it starts, so a write a replica acknowledged meanwhile may not be on the one promoted).
 * A sentinel names a node by run id; for a few seconds after a promotion it knows only the new primary's
 * address (its run id comes with the next INFO refresh), which is then compared with the address this
 * connection reached.
 */
export class SentinelPrimaryCheck {
  private readonly sentinels: Redis[];

  constructor(private readonly options: RedisOptions & { sentinels: Array<{ host: string; port: number }>; name: string }) {
    this.sentinels = options.sentinels.map((address) => {
      const client = new Redis({
        host: address.host,
        port: address.port,
        username: options.sentinelUsername,
        password: options.sentinelPassword,
        ...(options.enableTLSForSentinelMode ? { tls: options.sentinelTLS ?? {} } : {}),
        // A sentinel that does not answer quickly does not count; it must not delay the write path.
        commandTimeout: 1_000,
        maxRetriesPerRequest: 0,
        lazyConnect: true,
      });
      client.on('error', () => undefined);
      return client;
    });
  }

  /** Whether the server `connection` reached, whose run id is `runId`, is the primary the sentinels agree on. */
  async isPrimary(connection: Redis, runId: string): Promise<boolean> {
    const reached = `${connection.stream.remoteAddress ?? ''}:${connection.stream.remotePort ?? ''}`;
    const views = await Promise.allSettled(this.sentinels.map(async (sentinel) => (await sentinel.call('SENTINEL', 'MASTER', this.options.name)) as string[]));
    let agreeing = 0;
    for (const view of views) {
      if (view.status !== 'fulfilled') continue;
      const field = (name: string): string => view.value[view.value.indexOf(name) + 1] ?? '';
      const named = field('runid') ? field('runid') === runId : `${field('ip')}:${field('port')}` === reached;
      if (!named || /o_down|s_down|failover_in_progress/.test(field('flags'))) return false;
      agreeing++;
    }
    return agreeing > this.sentinels.length / 2;
  }

  close(): void {
    for (const sentinel of this.sentinels) sentinel.disconnect();
  }
}
