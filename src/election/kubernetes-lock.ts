import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
// Types only: the package itself (about 70 MiB and a second of start-up) is imported on a lock's first
// call, so a process on the Redis lock never loads it. See `loadClientNode`.
import type {
  ConfigurationOptions,
  CoordinationV1Api,
  CoreV1Api,
  CoreV1Event,
  KubeConfig,
  ObservableMiddleware,
  RequestContext,
  ResponseContext,
  V1Lease,
  V1LeaseSpec,
} from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { raceAbort } from '../util/abort.js';
import { abortReason } from '../util/clock.js';
import { silentLogger } from '../util/logger.js';
import { serializeRecord, type LeaderElectionRecord, type LockObservation, type LockVersion } from './record.js';
import { LockConflictError, LockNotFoundError, type LockFeedListener, type ResourceLock } from './resource-lock.js';

/** Options of a `KubernetesLeaseLock`. */
export interface KubernetesLeaseLockOptions {
  namespace: string;
  /** The Lease name. */
  name: string;
  /** This candidate's identity, unique per process incarnation. */
  identity: string;
  /**
   * Defaults to `loadFromDefault()`: `$KUBECONFIG`, `~/.kube/config`, or the in-cluster service account,
   * loaded on the lock's first call (a broken one makes that call fail, not the constructor).
   */
  kubeConfig?: KubeConfig;
  logger?: Logger;
  /** `source.component` of the leader election Events; defaults to `leasebeat`. */
  eventComponent?: string;
  /** How long one Event may take before it is given up; defaults to 5000 ms. */
  eventTimeoutMs?: number;
  /** How long the change feed waits before it lists and watches again after a failure; defaults to 1000 ms. */
  watchRetryMs?: number;
}

/** A Kubernetes API answer other than 404/409, with the HTTP status and the `Status` reason. */
export class KubernetesApiError extends Error {
  override readonly name = 'KubernetesApiError';

  constructor(
    message: string,
    readonly statusCode: number,
    readonly reason: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

type ClientNode = typeof import('@kubernetes/client-node');

let clientNode: Promise<ClientNode> | undefined;

/**
 * `@kubernetes/client-node`, imported once, on first use: importing it costs about 70 MiB of RSS and a
 * second of start-up, which every process paid when this module imported it statically, even on the
 * Redis lock. A failed import is not kept, so the next call tries again.
 */
function loadClientNode(): Promise<ClientNode> {
  clientNode ??= import('@kubernetes/client-node').catch((error: unknown) => {
    clientNode = undefined;
    throw error;
  });
  return clientNode;
}

/** What a lock's calls go through, made on its first call. */
interface Clients {
  k8s: ClientNode;
  kubeConfig: KubeConfig;
  leases: CoordinationV1Api;
  coreApi: CoreV1Api;
}

/**
 * Per-call client options that attach `signal` to the HTTP request (async only because it loads
 * client-node on first use).
 *
 * How client-node 1.4 aborts a request: every generated API method takes a per-call
 * `ConfigurationOptions`; its middleware `pre` hook receives the `RequestContext` once auth is applied,
 * and `RequestContext.setSignal` is handed by the default `IsomorphicFetchHttpLibrary` to node-fetch,
 * which destroys the socket and rejects when the signal aborts. Merged with `append` so the client's
 * own middleware still runs.
 */
export async function abortableRequest(signal: AbortSignal): Promise<ConfigurationOptions<ObservableMiddleware>> {
  const { Observable } = await loadClientNode();
  const attachSignal: ObservableMiddleware = {
    pre: (context: RequestContext) => {
      context.setSignal(signal);
      return new Observable(Promise.resolve(context));
    },
    post: (response: ResponseContext) => new Observable(Promise.resolve(response)),
  };
  return { middleware: [attachSignal], middlewareMergeStrategy: 'append' };
}

const DEFAULT_EVENT_TIMEOUT_MS = 5000;
const DEFAULT_WATCH_RETRY_MS = 1000;
/** The apiserver ends a watch after a while anyway; asking for a bound keeps a half-dead connection from lingering. */
const WATCH_TIMEOUT_SECONDS = 300;

/** A version of the Lease: the whole object as read or written, whose `resourceVersion` and `uid` guard the next replace. */
class LeaseVersion implements LockVersion {
  readonly generation: string;

  constructor(readonly lease: V1Lease) {
    this.generation = lease.metadata?.uid ?? '';
  }
}

/**
 * A `ResourceLock` on a `coordination.k8s.io/v1` Lease: a port of client-go's `LeaseLock`.
 *
 * `update` replaces the Lease it is based on (the object a get, create or update returned), with that
 * object's `resourceVersion` and `uid`, so the apiserver's optimistic concurrency makes every update a
 * compare-and-swap against exactly the version the caller decided on. client-go instead caches the last
 * Lease it saw and replaces that one, which lets an unrelated read refresh the base of a stale write.
 * Each call takes an `AbortSignal` that aborts the HTTP request itself; the call also rejects at once
 * when the signal aborts, even while client-node is still authenticating.
 */
export class KubernetesLeaseLock implements ResourceLock {
  private readonly namespace: string;
  private readonly leaseName: string;
  private readonly holder: string;
  private readonly log: Logger;
  private readonly eventComponent: string;
  private readonly eventTimeoutMs: number;
  private readonly pendingEvents = new Set<Promise<void>>();
  private readonly givenKubeConfig: KubeConfig | undefined;
  /** Made on the first call; dropped again if making them failed, so the next call tries again. */
  private clientsMade: Promise<Clients> | undefined;
  private readonly watchRetryMs: number;
  /** The newest Lease metadata seen, only to point Events at the Lease; never the base of a write. */
  private lastSeen: V1Lease | undefined;

  constructor(options: KubernetesLeaseLockOptions) {
    for (const field of ['namespace', 'name', 'identity'] as const) {
      if (!options[field]) throw new Error(`KubernetesLeaseLock: ${field} must not be empty`);
    }
    this.namespace = options.namespace;
    this.leaseName = options.name;
    this.holder = options.identity;
    this.givenKubeConfig = options.kubeConfig;
    this.watchRetryMs = options.watchRetryMs ?? DEFAULT_WATCH_RETRY_MS;
    this.log = options.logger ?? silentLogger;
    this.eventComponent = options.eventComponent ?? 'leasebeat';
    this.eventTimeoutMs = options.eventTimeoutMs ?? DEFAULT_EVENT_TIMEOUT_MS;
  }

  async get(signal: AbortSignal): Promise<LockObservation> {
    const lease = await this.call('get', signal, ({ leases }, options) =>
      leases.readNamespacedLease({ name: this.leaseName, namespace: this.namespace }, options));
    return this.observation(lease);
  }

  async create(record: LeaderElectionRecord, signal: AbortSignal): Promise<LockVersion> {
    const created = await this.call('create', signal, ({ k8s, leases }, options) => {
      const body: V1Lease = {
        apiVersion: 'coordination.k8s.io/v1',
        kind: 'Lease',
        metadata: { name: this.leaseName, namespace: this.namespace },
        spec: specFromRecord(record, k8s),
      };
      return leases.createNamespacedLease({ namespace: this.namespace, body }, options);
    });
    this.lastSeen = created;
    return new LeaseVersion(created);
  }

  async update(record: LeaderElectionRecord, base: LockVersion, signal: AbortSignal): Promise<LockVersion> {
    if (!(base instanceof LeaseVersion)) throw new TypeError(`lease ${this.describe()}: update based on a version this lock did not return`);
    const updated = await this.call('update', signal, ({ k8s, leases }, options) => {
      const body: V1Lease = { ...base.lease, spec: specFromRecord(record, k8s) };
      return leases.replaceNamespacedLease({ name: this.leaseName, namespace: this.namespace, body }, options);
    });
    this.lastSeen = updated;
    return new LeaseVersion(updated);
  }

  /**
   * The change feed: list the Lease (by field selector), then watch from the list's resourceVersion with
   * bookmarks, resuming from the newest resourceVersion seen whenever the stream ends, and listing again
   * when the apiserver answers 410 (the version was compacted away). The feed is reported down from the
   * moment a stream ends until the next one is open, since changes in between reach us only on resume.
   */
  watch(signal: AbortSignal, listener: LockFeedListener): void {
    void this.follow(signal, listener).catch((error: unknown) => this.log.warn({ err: error, lock: this.describe() }, 'lease watch stopped'));
  }

  private async follow(signal: AbortSignal, listener: LockFeedListener): Promise<void> {
    let resourceVersion: string | undefined;
    while (!signal.aborted) {
      try {
        resourceVersion ??= await this.list(signal, listener);
        resourceVersion = await this.watchFrom(resourceVersion, signal, listener);
      } catch (error) {
        if (signal.aborted) return;
        if (error instanceof WatchExpiredError) {
          resourceVersion = undefined;
          continue;
        }
        this.log.debug({ err: error, lock: this.describe() }, 'lease watch failed; retrying');
      }
      listener.live(false);
      await sleepUnlessAborted(this.watchRetryMs, signal);
    }
  }

  /** Lists the Lease and reports it; returns the list's resourceVersion to watch from. */
  private async list(signal: AbortSignal, listener: LockFeedListener): Promise<string> {
    const list = await this.call('list', signal, ({ leases }, options) =>
      leases.listNamespacedLease({ namespace: this.namespace, fieldSelector: `metadata.name=${this.leaseName}` }, options));
    const lease = list.items[0];
    if (lease) listener.change(this.observation(lease));
    return list.metadata?.resourceVersion ?? '';
  }

  /** Follows one watch stream; returns the newest resourceVersion seen when it ends normally. */
  private async watchFrom(from: string, signal: AbortSignal, listener: LockFeedListener): Promise<string> {
    // Made by the list before it; the race only keeps an abort from waiting for a slow first load.
    const { k8s, kubeConfig } = await raceAbort(this.clients(), signal);
    let resourceVersion = from;
    return new Promise((resolve, reject) => {
      let expired = false;
      let ended = false;
      let stop = (): void => undefined;
      const onEvent = (type: string, object: V1Lease & { code?: number }): void => {
        if (type === 'ERROR') {
          expired = object.code === 410;
          return;
        }
        resourceVersion = object.metadata?.resourceVersion ?? resourceVersion;
        if (type === 'ADDED' || type === 'MODIFIED') listener.change(this.observation(object));
        // A deleted Lease cannot be reported as a record: the feed goes down and the candidates read.
        if (type === 'DELETED') listener.live(false);
      };
      const path = `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(this.namespace)}/leases`;
      const query = { fieldSelector: `metadata.name=${this.leaseName}`, resourceVersion, allowWatchBookmarks: true, timeoutSeconds: WATCH_TIMEOUT_SECONDS };
      new k8s.Watch(kubeConfig)
        .watch(path, query, onEvent, (error: unknown) => {
          ended = true;
          signal.removeEventListener('abort', stop);
          if (expired) reject(new WatchExpiredError(`lease ${this.describe()}: watch from ${resourceVersion} expired (410)`));
          else if (error) reject(error instanceof Error ? error : new Error(`lease ${this.describe()}: watch failed: ${JSON.stringify(error)}`));
          else resolve(resourceVersion);
        })
        .then((controller) => {
          if (ended) return;
          stop = () => controller.abort();
          if (signal.aborted) stop();
          else signal.addEventListener('abort', stop, { once: true });
          // The stream is open: from here on every change reaches us, in order.
          listener.live(true);
        }, reject);
    });
  }

  private observation(lease: V1Lease): LockObservation {
    const record = recordFromSpec(lease.spec);
    this.lastSeen = lease;
    return { record, raw: serializeRecord(record), version: new LeaseVersion(lease) };
  }

  /**
   * Records a core/v1 Event on the Lease, e.g. `"<identity> became leader"` (the message is used as
   * given). Fire-and-forget, bounded by the event timeout; a failure is logged at warn.
   */
  recordEvent(message: string): void {
    const pending = this.sendEvent(message).catch((error: unknown) => {
      this.log.warn({ err: error, lock: this.describe() }, 'could not record leader election event');
    });
    this.pendingEvents.add(pending);
    void pending.finally(() => this.pendingEvents.delete(pending));
  }

  /** Resolves once every event recorded so far has been sent or given up; call before exiting. */
  async flushEvents(): Promise<void> {
    await Promise.all([...this.pendingEvents]);
  }

  identity(): string {
    return this.holder;
  }

  describe(): string {
    return `${this.namespace}/${this.leaseName}`;
  }

  private async sendEvent(message: string): Promise<void> {
    const now = new Date();
    const lease = this.lastSeen?.metadata;
    const body: CoreV1Event = {
      apiVersion: 'v1',
      kind: 'Event',
      // client-go names events `<object>.<unique hex>`; the random part keeps two in one ms apart.
      metadata: { name: `${this.leaseName}.${now.getTime().toString(16)}${randomBytes(4).toString('hex')}`, namespace: this.namespace },
      involvedObject: {
        apiVersion: 'coordination.k8s.io/v1',
        kind: 'Lease',
        name: this.leaseName,
        namespace: this.namespace,
        ...(lease?.uid ? { uid: lease.uid } : {}),
        ...(lease?.resourceVersion ? { resourceVersion: lease.resourceVersion } : {}),
      },
      reason: 'LeaderElection',
      message,
      type: 'Normal',
      source: { component: this.eventComponent, host: hostname() },
      reportingComponent: this.eventComponent,
      reportingInstance: this.holder,
      firstTimestamp: now,
      lastTimestamp: now,
      count: 1,
    };
    await this.call('record event on', AbortSignal.timeout(this.eventTimeoutMs), ({ coreApi }, options) =>
      coreApi.createNamespacedEvent({ namespace: this.namespace, body }, options));
  }

  /** The API clients, made on the first call: client-node is imported, and the default kubeconfig loaded, only then. */
  private clients(): Promise<Clients> {
    this.clientsMade ??= loadClientNode()
      .then((k8s) => {
        const kubeConfig = this.givenKubeConfig ?? defaultKubeConfig(k8s);
        return { k8s, kubeConfig, leases: kubeConfig.makeApiClient(k8s.CoordinationV1Api), coreApi: kubeConfig.makeApiClient(k8s.CoreV1Api) };
      })
      .catch((error: unknown) => {
        this.clientsMade = undefined;
        throw error;
      });
    return this.clientsMade;
  }

  /**
   * Runs one API call bound to `signal` and translates its errors. The first call also waits for the
   * clients (see `clients`), within the same signal; a failure to make them is translated like a
   * failed request.
   */
  private async call<T>(
    action: string,
    signal: AbortSignal,
    request: (clients: Clients, options: ConfigurationOptions<ObservableMiddleware>) => Promise<T>,
  ): Promise<T> {
    if (signal.aborted) throw abortReason(signal);
    let clients: Clients | undefined;
    try {
      clients = await raceAbort(this.clients(), signal);
      return await raceAbort(request(clients, await abortableRequest(signal)), signal);
    } catch (error) {
      // Only a loaded client-node throws its ApiException; before that there is no class to test against.
      const ApiException = clients?.k8s.ApiException;
      // An abort surfaces as the signal's reason (or node-fetch's AbortError), untranslated.
      if (signal.aborted && !(ApiException && error instanceof ApiException)) throw error;
      throw this.translate(action, error, ApiException);
    }
  }

  private translate(action: string, error: unknown, ApiException: ClientNode['ApiException'] | undefined): Error {
    const what = `${action} lease ${this.describe()}`;
    if (!ApiException || !(error instanceof ApiException)) {
      const detail = error instanceof Error ? error.message : String(error);
      return new Error(`${what}: ${detail}`, { cause: error });
    }
    const status = parseStatus(error.body);
    const message = `${what}: HTTP ${error.code}${status.reason ? ` ${status.reason}` : ''}: ${status.message}`;
    if (error.code === 409) return new LockConflictError(message, { cause: error });
    if (error.code === 404) return new LockNotFoundError(message, { cause: error });
    return new KubernetesApiError(message, error.code, status.reason, { cause: error });
  }
}

/** The apiserver no longer has the resourceVersion a watch asked to resume from. */
class WatchExpiredError extends Error {
  override readonly name = 'WatchExpiredError';
}

function sleepUnlessAborted(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}

function defaultKubeConfig({ KubeConfig }: ClientNode): KubeConfig {
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromDefault();
  return kubeConfig;
}

/** client-go's `LeaderElectionRecordToLeaseSpec`; MicroTime keeps the six digits the apiserver demands. */
function specFromRecord(record: LeaderElectionRecord, { V1MicroTime }: ClientNode): V1LeaseSpec {
  return {
    holderIdentity: record.holderIdentity,
    leaseDurationSeconds: record.leaseDurationSeconds,
    acquireTime: new V1MicroTime(record.acquireTime),
    renewTime: new V1MicroTime(record.renewTime),
    leaseTransitions: record.leaderTransitions,
  };
}

/** client-go's `LeaseSpecToLeaderElectionRecord`: absent fields read as their zero values. */
function recordFromSpec(spec: V1LeaseSpec | undefined): LeaderElectionRecord {
  return {
    holderIdentity: spec?.holderIdentity ?? '',
    leaseDurationSeconds: spec?.leaseDurationSeconds ?? 0,
    acquireTime: epochMillis(spec?.acquireTime),
    renewTime: epochMillis(spec?.renewTime),
    leaderTransitions: spec?.leaseTransitions ?? 0,
  };
}

/** The typings say `V1MicroTime`, but client-node leaves the wire string in place on reads. */
function epochMillis(time: Date | string | undefined): number {
  if (time === undefined || time === null) return 0;
  const millis = time instanceof Date ? time.getTime() : Date.parse(time);
  if (Number.isNaN(millis)) throw new Error(`unparseable lease time ${JSON.stringify(time)}`);
  return millis;
}

/** The `reason` and `message` of a `Status` body; client-node hands the body over as a string. */
function parseStatus(body: unknown): { reason: string; message: string } {
  let status: unknown = body;
  if (typeof body === 'string') {
    try {
      status = JSON.parse(body);
    } catch {
      return { reason: '', message: body };
    }
  }
  if (typeof status !== 'object' || status === null) return { reason: '', message: String(body) };
  const { reason, message } = status as { reason?: unknown; message?: unknown };
  return {
    reason: typeof reason === 'string' ? reason : '',
    message: typeof message === 'string' ? message : JSON.stringify(status),
  };
}
