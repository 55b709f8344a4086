import { randomUUID } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { LeaseWatchHub, type WatchedLease } from './fake-lease-watch.js';

/** The Lease operations the fake serves; `list` is the collection GET, `watch` the same with `watch=true`. */
export type LeaseVerb = 'get' | 'list' | 'watch' | 'create' | 'update' | 'delete';
/** What a fault can target: a Lease verb, event creation, or every request. */
export type FaultTarget = LeaseVerb | 'event' | 'all';

/** One answered Lease request, in arrival order of its answer. */
export interface LeaseRequestRecord {
  verb: LeaseVerb;
  /** The Lease name; empty for `list`. */
  name: string;
  status: number;
  /** `Date.now()` when the request arrived. */
  at: number;
}

/** The wire form of a stored Lease. Times are MicroTime strings, exactly as the apiserver returns them. */
export interface StoredLease {
  apiVersion: 'coordination.k8s.io/v1';
  kind: 'Lease';
  metadata: {
    name: string;
    namespace: string;
    uid: string;
    resourceVersion: string;
    creationTimestamp: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  spec: LeaseSpecWire;
}

/** The Lease spec fields the fake keeps; unknown ones are dropped. */
export interface LeaseSpecWire {
  holderIdentity?: string;
  leaseDurationSeconds?: number;
  acquireTime?: string;
  renewTime?: string;
  leaseTransitions?: number;
  strategy?: string;
  preferredHolder?: string;
}

/** A stored Event, as the client sent it plus the server-set metadata. */
export interface StoredEvent {
  /** `core/v1` or `events.k8s.io/v1`. */
  api: 'core/v1' | 'events.k8s.io/v1';
  namespace: string;
  body: Record<string, unknown> & { metadata: Record<string, unknown> };
}

/** A request the fake holds open. `clientClosed` turns true once the caller has given up on it. */
export interface HungRequest {
  verb: LeaseVerb | 'event';
  name: string;
  clientClosed: boolean;
}

/**
 * One successful write of a Lease, in the order the server applied them: the server's own history, the
 * ground truth a chaos audit judges the election by. `spec` is the Lease after the write (before it, for
 * a delete). A write that changed nothing (same spec, labels and annotations) is no write.
 */
export interface LeaseWrite {
  /** 1, 2, 3... in the order applied. */
  seq: number;
  /** `Date.now()` when the write was applied. */
  at: number;
  op: 'create' | 'update' | 'delete';
  namespace: string;
  name: string;
  uid: string;
  /** The resourceVersion the write produced (for a delete, the one it removed). */
  resourceVersion: string;
  spec: LeaseSpecWire;
  /** The spec it replaced, for an update or a delete. */
  previous?: LeaseSpecWire;
  /** True when the write came through the HTTP API (a client), false for `putLease` / `deleteLease`. */
  viaApi: boolean;
}

/**
 * Runs after a matching write has been applied and before its reply is sent; the reply waits for it.
 * This is where a test acts at the worst instant for the writer: its write took effect, it has not
 * heard so yet (e.g. freeze the writer with its renewal's reply on the wire).
 */
export type WriteHook = (write: LeaseWrite) => void | Promise<void>;

/** A canned failure for `failNext`. */
export interface InjectedFailure {
  status: 429 | 500 | 503;
  /** Sent as `Retry-After` (and `details.retryAfterSeconds`); defaults to 1 for 429. */
  retryAfterSeconds?: number;
}

interface CountedFault<T> {
  target: FaultTarget;
  remaining: number;
  value: T;
}

interface HeldRequest {
  info: HungRequest;
  release: (proceed: boolean) => void;
  /** Settles once the request has been handled (or dropped). */
  processed: Promise<void>;
}

interface ApiRequest {
  method: string;
  namespace: string;
  /** The Lease name for item routes; undefined for collections. */
  name: string | undefined;
  kind: 'lease' | 'event';
  eventApi: StoredEvent['api'];
}

interface Reply {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
}

const LEASE_GROUP = 'coordination.k8s.io';
const LEASE_RESOURCE = 'leases';
const MICRO_TIME_LAYOUT = '2006-01-02T15:04:05.000000Z07:00';
/** RFC 3339 with exactly six fractional digits: the only form a `MicroTime` unmarshals from. */
const MICRO_TIME = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})\.(\d{6})(Z|[+-]\d{2}:\d{2})$/;
const LEASE_ROUTE = /^\/apis\/coordination\.k8s\.io\/v1\/namespaces\/([^/]+)\/leases(?:\/([^/]+))?$/;
const CORE_EVENT_ROUTE = /^\/api\/v1\/namespaces\/([^/]+)\/events$/;
const EVENTS_API_ROUTE = /^\/apis\/events\.k8s\.io\/v1\/namespaces\/([^/]+)\/events$/;

/** Raised inside a handler to answer with a Status. */
class StatusError extends Error {
  constructor(readonly reply: Reply, message: string) {
    super(`HTTP ${reply.status}: ${message}`);
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A `Status` body as the apiserver writes it. */
function failure(
  code: number,
  reason: string,
  message: string,
  details: Record<string, unknown> = {},
  headers?: Record<string, string>,
): StatusError {
  const body = { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, details, code };
  return new StatusError({ status: code, body, ...(headers ? { headers } : {}) }, message);
}

function leaseDetails(name: string): Record<string, unknown> {
  return { name, group: LEASE_GROUP, kind: LEASE_RESOURCE };
}

function notFound(name: string): StatusError {
  return failure(404, 'NotFound', `${LEASE_RESOURCE}.${LEASE_GROUP} "${name}" not found`, leaseDetails(name));
}

function conflict(name: string, cause: string): StatusError {
  return failure(409, 'Conflict', `Operation cannot be fulfilled on ${LEASE_RESOURCE}.${LEASE_GROUP} "${name}": ${cause}`,
    leaseDetails(name));
}

const STALE_VERSION =
  'the object has been modified; please apply your changes to the latest version and try again';

/** A 422 with one field cause per problem, in the apiserver's `field.ErrorList` wording. */
function invalid(name: string, causes: Array<{ field: string; message: string }>): StatusError {
  const summary = causes.map((c) => `${c.field}: ${c.message}`).join(', ');
  return failure(422, 'Invalid', `Lease.${LEASE_GROUP} "${name}" is invalid: ${summary}`, {
    ...leaseDetails(name),
    kind: 'Lease',
    causes: causes.map((c) => ({ reason: 'FieldValueInvalid', message: c.message, field: c.field })),
  });
}

function badRequest(message: string): StatusError {
  return failure(400, 'BadRequest', message);
}

/** Normalises a MicroTime to UTC with its six digits kept, as the apiserver stores it; 400 otherwise. */
function parseMicroTime(field: string, value: unknown): string {
  const match = typeof value === 'string' ? MICRO_TIME.exec(value) : null;
  const seconds = match ? Date.parse(`${match[1]}${match[3]}`) : NaN;
  if (!match || Number.isNaN(seconds)) {
    throw badRequest(`Lease in version "v1" cannot be handled as a Lease: ${field}: parsing time ${JSON.stringify(value)} ` +
      `as "${MICRO_TIME_LAYOUT}": fractional seconds must have exactly six digits`);
  }
  return `${new Date(seconds).toISOString().slice(0, 19)}.${match[2]}Z`;
}

function integerField(field: string, value: unknown): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isInteger(value)) {
    throw badRequest(`Lease in version "v1" cannot be handled as a Lease: ${field}: expected an integer, got ${JSON.stringify(value)}`);
  }
  return value;
}

function stringField(field: string, value: unknown): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') {
    throw badRequest(`Lease in version "v1" cannot be handled as a Lease: ${field}: expected a string`);
  }
  return value;
}

/** Decodes and validates a Lease spec the way the apiserver's decoder and validation do. */
function decodeSpec(name: string, raw: unknown): LeaseSpecWire {
  const spec = isObject(raw) ? raw : {};
  const decoded: LeaseSpecWire = {};
  const holderIdentity = stringField('spec.holderIdentity', spec.holderIdentity);
  const leaseDurationSeconds = integerField('spec.leaseDurationSeconds', spec.leaseDurationSeconds);
  const leaseTransitions = integerField('spec.leaseTransitions', spec.leaseTransitions);
  const strategy = stringField('spec.strategy', spec.strategy);
  const preferredHolder = stringField('spec.preferredHolder', spec.preferredHolder);
  if (holderIdentity !== undefined) decoded.holderIdentity = holderIdentity;
  if (leaseDurationSeconds !== undefined) decoded.leaseDurationSeconds = leaseDurationSeconds;
  for (const field of ['acquireTime', 'renewTime'] as const) {
    if (spec[field] !== undefined && spec[field] !== null) decoded[field] = parseMicroTime(`spec.${field}`, spec[field]);
  }
  if (leaseTransitions !== undefined) decoded.leaseTransitions = leaseTransitions;
  if (strategy !== undefined) decoded.strategy = strategy;
  if (preferredHolder !== undefined) decoded.preferredHolder = preferredHolder;

  const causes: Array<{ field: string; message: string }> = [];
  if (leaseDurationSeconds !== undefined && leaseDurationSeconds <= 0) {
    causes.push({ field: 'spec.leaseDurationSeconds', message: `Invalid value: ${leaseDurationSeconds}: must be greater than 0` });
  }
  if (leaseTransitions !== undefined && leaseTransitions < 0) {
    causes.push({ field: 'spec.leaseTransitions', message: `Invalid value: ${leaseTransitions}: must be greater than or equal to 0` });
  }
  if (causes.length > 0) throw invalid(name, causes);
  return decoded;
}

function stringMap(value: unknown): Record<string, string> | undefined {
  if (!isObject(value)) return undefined;
  return Object.fromEntries(Object.entries(value).filter((e): e is [string, string] => typeof e[1] === 'string'));
}

function nowSeconds(): string {
  return `${new Date().toISOString().slice(0, 19)}Z`;
}

function sameContent(a: StoredLease, b: StoredLease): boolean {
  return JSON.stringify([a.spec, a.metadata.labels, a.metadata.annotations]) ===
    JSON.stringify([b.spec, b.metadata.labels, b.metadata.annotations]);
}

/**
 * An in-process Kubernetes API server for `coordination.k8s.io/v1` Leases (and Event creation), on
 * plain HTTP at 127.0.0.1. It reproduces the apiserver's status codes, `Status` bodies, server-set
 * metadata and optimistic concurrency closely enough for the real `@kubernetes/client-node` client, and
 * lets a test inject latency, failures and hung requests.
 *
 * Like the real apiserver, an update whose body carries a `metadata.uid` is conditional on that uid: a
 * PUT with a uid for a Lease that no longer exists answers 409 (precondition failed) instead of
 * recreating it. A PUT without a uid for a missing Lease creates it (201).
 */
export class FakeLeaseServer {
  private readonly leases = new Map<string, StoredLease>();
  private readonly storedEvents: StoredEvent[] = [];
  private log: LeaseRequestRecord[] = [];
  private revision = 0;
  private readonly history: LeaseWrite[] = [];
  private hooks: Array<{ filter: (write: LeaseWrite) => boolean; handler: WriteHook; once: boolean }> = [];
  /** Set while a request's handler runs, so that `store` knows the write came through the API. */
  private viaApi = false;

  private readonly latency = new Map<FaultTarget, number>();
  private failures: Array<CountedFault<InjectedFailure>> = [];
  private hangs: Array<CountedFault<true>> = [];
  private held: HeldRequest[] = [];
  private waiters: Array<() => void> = [];
  private readonly closing = new AbortController();
  private readonly watches = new LeaseWatchHub();

  private constructor(private readonly server: Server, readonly url: string) {}

  /** Starts a server on a free loopback port. */
  static async start(): Promise<FakeLeaseServer> {
    const server = createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    const { port } = server.address() as AddressInfo;
    const fake = new FakeLeaseServer(server, `http://127.0.0.1:${port}`);
    server.on('request', (req: IncomingMessage, res: ServerResponse) => {
      void fake.handle(req, res);
    });
    return fake;
  }

  /** A `KubeConfig` for this server: plain HTTP, which client-node allows only with `skipTLSVerify`. */
  kubeConfig(): KubeConfig {
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromOptions({
      clusters: [{ name: 'fake', server: this.url, skipTLSVerify: true }],
      users: [{ name: 'fake', token: 'fake-token' }],
      contexts: [{ name: 'fake', cluster: 'fake', user: 'fake', namespace: 'default' }],
      currentContext: 'fake',
    });
    return kubeConfig;
  }

  /** Writes a kubeconfig file for this server into `dir`, for code that loads the default one (`$KUBECONFIG`); returns its path. */
  async writeKubeconfig(dir: string): Promise<string> {
    const file = join(dir, 'config');
    await writeFile(
      file,
      [
        'apiVersion: v1',
        'kind: Config',
        `clusters:\n- name: fake\n  cluster:\n    server: ${this.url}\n    insecure-skip-tls-verify: true`,
        'users:\n- name: fake\n  user:\n    token: fake-token',
        'contexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake',
        'current-context: fake',
      ].join('\n'),
    );
    return file;
  }

  // --- assertions -----------------------------------------------------------------------------------

  /** The answered Lease requests so far (a copy). */
  requests(): LeaseRequestRecord[] {
    return this.log.map((entry) => ({ ...entry }));
  }

  /** Just the verbs of `requests()`, for client-go style `[get, create, update]` assertions. */
  verbs(): LeaseVerb[] {
    return this.log.map((entry) => entry.verb);
  }

  resetRequests(): void {
    this.log = [];
  }

  /** The stored Lease (a copy), or undefined. */
  lease(namespace: string, name: string): StoredLease | undefined {
    const stored = this.leases.get(key(namespace, name));
    return stored ? structuredClone(stored) : undefined;
  }

  /**
   * Every write applied so far (copies), oldest first; writes are kept for the server's lifetime. The
   * `since` form returns those with `seq > since`, for a reader that follows the history.
   */
  writeHistory(since = 0): LeaseWrite[] {
    return structuredClone(this.history.filter((write) => write.seq > since));
  }

  /**
   * Calls `handler` for every API write that `filter` accepts, after the write is applied and before its
   * reply is sent (the reply waits for the handler; if it throws, the connection is destroyed instead).
   * With `once`, only the first matching write. Returns a function that removes the hook.
   */
  onWrite(filter: (write: LeaseWrite) => boolean, handler: WriteHook, options: { once?: boolean } = {}): () => void {
    const hook = { filter, handler, once: options.once ?? false };
    this.hooks.push(hook);
    return () => {
      this.hooks = this.hooks.filter((h) => h !== hook);
    };
  }

  /** Events created so far (copies). */
  events(): StoredEvent[] {
    return structuredClone(this.storedEvents);
  }

  // --- third-party writes ---------------------------------------------------------------------------

  /**
   * Writes a Lease as another client would: creates it (new uid) when missing, otherwise replaces its
   * spec, bumping its resourceVersion when that changes anything. Times are MicroTime strings, validated
   * as on the wire (an invalid spec throws).
   */
  putLease(namespace: string, name: string, spec: LeaseSpecWire): StoredLease {
    const existing = this.leases.get(key(namespace, name));
    const next = this.store(namespace, name, decodeSpec(name, spec), existing, undefined);
    return structuredClone(next);
  }

  /** Deletes a Lease directly; true when there was one. */
  deleteLease(namespace: string, name: string): boolean {
    const existing = this.leases.get(key(namespace, name));
    if (!existing) return false;
    this.leases.delete(key(namespace, name));
    this.revision++;
    this.record('delete', existing, existing.spec);
    return true;
  }

  // --- fault injection ------------------------------------------------------------------------------

  /** Delays every matching request by `ms` before it is handled (0 removes the delay). */
  setLatency(ms: number, target: FaultTarget = 'all'): void {
    if (ms > 0) this.latency.set(target, ms);
    else this.latency.delete(target);
  }

  /** Answers the next `count` matching requests with `failure` instead of handling them. */
  failNext(count: number, failure: InjectedFailure, target: FaultTarget = 'all'): void {
    this.failures.push({ target, remaining: count, value: failure });
  }

  /** Holds the next `count` matching requests open until `releaseHung()` or `close()`. */
  hangNext(count: number, target: FaultTarget = 'all'): void {
    this.hangs.push({ target, remaining: count, value: true });
  }

  /** The requests held open right now. */
  hung(): HungRequest[] {
    return this.held.map((h) => ({ ...h.info }));
  }

  /** Resolves once at least `count` requests are held open. */
  whenHung(count = 1): Promise<void> {
    return this.waitUntil(() => this.held.length >= count);
  }

  /** Resolves once at least `count` held requests have been abandoned by their client. */
  whenAbandoned(count = 1): Promise<void> {
    return this.waitUntil(() => this.held.filter((h) => h.info.clientClosed).length >= count);
  }

  /**
   * Lets every held request proceed. Like a real apiserver that already accepted a request, a write
   * whose client has gone away is still applied; only its answer is lost.
   */
  async releaseHung(): Promise<void> {
    const released = this.held;
    this.held = [];
    for (const h of released) h.release(true);
    await Promise.all(released.map((h) => h.processed));
  }

  /** Removes all latency, pending failures and pending hangs (requests already held stay held). */
  clearFaults(): void {
    this.latency.clear();
    this.failures = [];
    this.hangs = [];
  }

  /** Open watch streams right now. */
  openWatches(): number {
    return this.watches.open;
  }

  /** Ends every open watch stream (clients see the stream close and must resume). */
  dropWatches(): void {
    this.watches.dropAll();
  }

  /** Compacts the watch cache: a watch resuming from any resourceVersion seen so far gets 410 Expired. */
  compactWatchCache(): void {
    this.watches.compact(this.revision + 1);
  }

  /** How often watchers that allow bookmarks get one (applies to watches opened afterwards). */
  setBookmarkInterval(ms: number): void {
    this.watches.bookmarkIntervalMs = ms;
  }

  /** Stops the server and ends every connection, held ones included. */
  async close(): Promise<void> {
    this.closing.abort();
    this.watches.dropAll();
    for (const h of this.held) h.release(false);
    this.held = [];
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeAllConnections();
    await closed;
  }

  // --- request handling -----------------------------------------------------------------------------

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const at = Date.now();
    let finished = (): void => undefined;
    const processed = new Promise<void>((resolve) => (finished = resolve));
    try {
      const reply = await this.answer(req, res, at, processed);
      if (reply && !res.destroyed) {
        res.writeHead(reply.status, { 'content-type': 'application/json', ...reply.headers });
        res.end(JSON.stringify(reply.body));
      }
    } catch (error) {
      // A client that vanished mid-body, or a bug in the fake: never an unhandled rejection.
      if (!res.destroyed) res.destroy(error instanceof Error ? error : undefined);
    } finally {
      finished();
      this.notify();
    }
  }

  /** Routes, applies faults and handles one request; undefined when it must go unanswered. */
  private async answer(req: IncomingMessage, res: ServerResponse, at: number, processed: Promise<void>): Promise<Reply | undefined> {
    const bodyText = await readBody(req);
    const route = parseRoute(req.method ?? 'GET', req.url ?? '/');
    const query = new URL(req.url ?? '/', 'http://fake').searchParams;
    const watching = route?.kind === 'lease' && route.name === undefined && route.method === 'GET' && query.get('watch') === 'true';
    const verb = watching ? 'watch' : route ? verbOf(route) : undefined;
    const name = route?.name ?? (verb === 'create' ? nameInBody(bodyText) : '');
    let reply: Reply;
    try {
      if (!route || !verb) throw failure(404, 'NotFound', 'the server could not find the requested resource');
      if (!(await this.applyFaults(verb, name, res, processed))) return undefined;
      if (watching) {
        this.log.push({ verb: 'watch', name, status: 200, at });
        const current = [...this.leases.values()].map((lease) => watched(lease, lease.metadata.resourceVersion));
        this.watches.serve(res, route.namespace, query, current, this.revision);
        return undefined;
      }
      const written = this.history.length;
      this.viaApi = true;
      try {
        reply = this.dispatch(route, bodyText, query);
      } finally {
        this.viaApi = false;
      }
      // dispatch is synchronous: exactly this request's writes were appended meanwhile.
      for (const write of this.history.slice(written)) await this.runHooks(write);
    } catch (error) {
      if (!(error instanceof StatusError)) throw error;
      reply = error.reply;
    }
    if (verb && verb !== 'event') this.log.push({ verb, name, status: reply.status, at });
    return reply;
  }

  /** Applies latency, hangs and canned failures. Returns false when the request must not be answered. */
  private async applyFaults(
    verb: LeaseVerb | 'event',
    name: string,
    res: ServerResponse,
    processed: Promise<void>,
  ): Promise<boolean> {
    const delay = this.latency.get(verb) ?? this.latency.get('all') ?? 0;
    if (delay > 0 && !(await this.sleep(delay))) return false;

    if (takeFault(this.hangs, verb)) {
      const info: HungRequest = { verb, name, clientClosed: false };
      const proceed = new Promise<boolean>((resolve) => this.held.push({ info, release: resolve, processed }));
      res.once('close', () => {
        info.clientClosed = true;
        this.notify();
      });
      this.notify();
      if (!(await proceed)) return false;
    }

    const injected = takeFault(this.failures, verb);
    if (injected) throw injectedFailure(injected, name);
    return !this.closing.signal.aborted;
  }

  private dispatch(route: ApiRequest, bodyText: string, query: URLSearchParams): Reply {
    if (route.kind === 'event') return this.createEvent(route, parseJson(bodyText));
    const { method, namespace, name } = route;
    if (name === undefined) {
      return method === 'GET' ? this.list(namespace, query.get('fieldSelector') ?? '') : this.create(namespace, parseJson(bodyText));
    }
    switch (method) {
      case 'GET':
        return { status: 200, body: this.require(namespace, name) };
      case 'PUT':
        return this.replace(namespace, name, parseJson(bodyText));
      default:
        return this.remove(namespace, name, bodyText);
    }
  }

  /** The namespace's Leases; of field selectors only `metadata.name=<name>` is understood (as by the lock). */
  private list(namespace: string, fieldSelector: string): Reply {
    const name = /^metadata\.name=(.+)$/.exec(fieldSelector)?.[1];
    const items = [...this.leases.values()].filter((l) => l.metadata.namespace === namespace && (name === undefined || l.metadata.name === name));
    return {
      status: 200,
      body: { kind: 'LeaseList', apiVersion: `${LEASE_GROUP}/v1`, metadata: { resourceVersion: String(this.revision) }, items },
    };
  }

  private create(namespace: string, body: Record<string, unknown>): Reply {
    const metadata = isObject(body.metadata) ? body.metadata : {};
    const name = typeof metadata.name === 'string' ? metadata.name : '';
    if (name === '') {
      throw invalid('', [{ field: 'metadata.name', message: 'Required value: name or generateName is required' }]);
    }
    checkNamespace(metadata, namespace);
    const spec = decodeSpec(name, body.spec);
    if (this.leases.has(key(namespace, name))) {
      throw failure(409, 'AlreadyExists', `${LEASE_RESOURCE}.${LEASE_GROUP} "${name}" already exists`, leaseDetails(name));
    }
    return { status: 201, body: this.store(namespace, name, spec, undefined, metadata) };
  }

  private replace(namespace: string, name: string, body: Record<string, unknown>): Reply {
    const metadata = isObject(body.metadata) ? body.metadata : {};
    if (metadata.name !== undefined && metadata.name !== name) {
      throw badRequest(`the name of the object (${JSON.stringify(metadata.name).replaceAll('"', '')}) does not match the name on the URL (${name})`);
    }
    checkNamespace(metadata, namespace);
    const spec = decodeSpec(name, body.spec);
    const existing = this.leases.get(key(namespace, name));
    const uid = typeof metadata.uid === 'string' && metadata.uid !== '' ? metadata.uid : undefined;
    if (uid !== undefined && uid !== existing?.metadata.uid) {
      // The registry turns a uid in the body into a storage precondition.
      throw conflict(name, `StorageError: invalid object, Code: 4, Key: /registry/leases/${namespace}/${name}, ` +
        `ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: ${uid}, ` +
        `UID in object meta: ${existing?.metadata.uid ?? ''}`);
    }
    if (!existing) return { status: 201, body: this.store(namespace, name, spec, undefined, metadata) };

    const version = typeof metadata.resourceVersion === 'string' ? metadata.resourceVersion : '';
    if (version === '') {
      throw invalid(name, [{ field: 'metadata.resourceVersion', message: 'Invalid value: 0x0: must be specified for an update' }]);
    }
    if (version !== existing.metadata.resourceVersion) throw conflict(name, STALE_VERSION);
    return { status: 200, body: this.store(namespace, name, spec, existing, metadata) };
  }

  private remove(namespace: string, name: string, bodyText: string): Reply {
    const existing = this.require(namespace, name);
    const options = bodyText.trim() === '' ? {} : parseJson(bodyText);
    const preconditions = isObject(options.preconditions) ? options.preconditions : {};
    if (typeof preconditions.uid === 'string' && preconditions.uid !== existing.metadata.uid) {
      throw conflict(name, `Precondition failed: UID in precondition: ${preconditions.uid}, UID in object meta: ${existing.metadata.uid}`);
    }
    if (typeof preconditions.resourceVersion === 'string' && preconditions.resourceVersion !== existing.metadata.resourceVersion) {
      throw conflict(name, STALE_VERSION);
    }
    this.deleteLease(namespace, name);
    return {
      status: 200,
      body: {
        kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success',
        details: { ...leaseDetails(name), uid: existing.metadata.uid },
      },
    };
  }

  private require(namespace: string, name: string): StoredLease {
    const stored = this.leases.get(key(namespace, name));
    if (!stored) throw notFound(name);
    return stored;
  }

  /** Writes a Lease, keeping uid and creationTimestamp of `existing`; a no-op write keeps its version. */
  private store(
    namespace: string,
    name: string,
    spec: LeaseSpecWire,
    existing: StoredLease | undefined,
    metadata: Record<string, unknown> | undefined,
  ): StoredLease {
    const labels = metadata ? stringMap(metadata.labels) : existing?.metadata.labels;
    const annotations = metadata ? stringMap(metadata.annotations) : existing?.metadata.annotations;
    const next: StoredLease = {
      apiVersion: `${LEASE_GROUP}/v1`,
      kind: 'Lease',
      metadata: {
        name,
        namespace,
        uid: existing?.metadata.uid ?? randomUUID(),
        resourceVersion: existing?.metadata.resourceVersion ?? '',
        creationTimestamp: existing?.metadata.creationTimestamp ?? nowSeconds(),
        ...(labels ? { labels } : {}),
        ...(annotations ? { annotations } : {}),
      },
      spec,
    };
    if (existing && sameContent(existing, next)) return existing;
    next.metadata.resourceVersion = String(++this.revision);
    this.leases.set(key(namespace, name), next);
    this.record(existing ? 'update' : 'create', next, existing?.spec);
    return next;
  }

  private record(op: LeaseWrite['op'], lease: StoredLease, previous: LeaseSpecWire | undefined): void {
    // A deletion is a change of its own: it carries the revision it made, not the removed object's.
    const resourceVersion = op === 'delete' ? String(this.revision) : lease.metadata.resourceVersion;
    this.watches.publish({ type: op === 'create' ? 'ADDED' : op === 'update' ? 'MODIFIED' : 'DELETED', object: watched(lease, resourceVersion) });
    this.history.push({
      seq: this.history.length + 1,
      at: Date.now(),
      op,
      namespace: lease.metadata.namespace,
      name: lease.metadata.name,
      uid: lease.metadata.uid,
      resourceVersion: lease.metadata.resourceVersion,
      spec: structuredClone(lease.spec),
      ...(previous ? { previous: structuredClone(previous) } : {}),
      viaApi: this.viaApi,
    });
  }

  private async runHooks(write: LeaseWrite): Promise<void> {
    for (const hook of [...this.hooks]) {
      if (!this.hooks.includes(hook) || !hook.filter(structuredClone(write))) continue;
      if (hook.once) this.hooks = this.hooks.filter((h) => h !== hook);
      await hook.handler(structuredClone(write));
    }
  }

  private createEvent(route: ApiRequest, body: Record<string, unknown>): Reply {
    const metadata = isObject(body.metadata) ? { ...body.metadata } : {};
    const name = typeof metadata.name === 'string' ? metadata.name : '';
    const details = { name, kind: 'events', ...(route.eventApi === 'events.k8s.io/v1' ? { group: 'events.k8s.io' } : {}) };
    if (name === '') {
      throw failure(422, 'Invalid', 'Event "" is invalid: metadata.name: Required value: name or generateName is required', details);
    }
    if (this.storedEvents.some((e) => e.namespace === route.namespace && e.body.metadata.name === name)) {
      throw failure(409, 'AlreadyExists', `events "${name}" already exists`, details);
    }
    Object.assign(metadata, {
      namespace: route.namespace,
      uid: randomUUID(),
      resourceVersion: String(++this.revision),
      creationTimestamp: nowSeconds(),
    });
    const stored = { ...body, metadata };
    this.storedEvents.push({ api: route.eventApi, namespace: route.namespace, body: stored });
    return { status: 201, body: stored };
  }

  // --- plumbing -------------------------------------------------------------------------------------

  /** Sleeps unless the server closes first; false when it closed. */
  private sleep(ms: number): Promise<boolean> {
    const signal = this.closing.signal;
    return new Promise((resolve) => {
      if (signal.aborted) {
        resolve(false);
        return;
      }
      const onClose = (): void => {
        clearTimeout(timer);
        resolve(false);
      };
      const timer = setTimeout(() => {
        signal.removeEventListener('abort', onClose);
        resolve(true);
      }, ms);
      signal.addEventListener('abort', onClose, { once: true });
    });
  }

  private waitUntil(predicate: () => boolean): Promise<void> {
    if (predicate()) return Promise.resolve();
    return new Promise((resolve) => {
      const check = (): void => {
        if (!predicate()) return;
        this.waiters = this.waiters.filter((w) => w !== check);
        resolve();
      };
      this.waiters.push(check);
    });
  }

  private notify(): void {
    for (const waiter of [...this.waiters]) waiter();
  }
}

function watched(lease: StoredLease, resourceVersion: string): WatchedLease {
  const { name, namespace, uid } = lease.metadata;
  return { apiVersion: lease.apiVersion, kind: lease.kind, metadata: { name, namespace, uid, resourceVersion }, spec: structuredClone(lease.spec) as Record<string, unknown> };
}

function key(namespace: string, name: string): string {
  return `${namespace}/${name}`;
}

function checkNamespace(metadata: Record<string, unknown>, namespace: string): void {
  if (metadata.namespace !== undefined && metadata.namespace !== namespace) {
    throw badRequest('the namespace of the provided object does not match the namespace sent on the request');
  }
}

function parseRoute(method: string, url: string): ApiRequest | undefined {
  const path = new URL(url, 'http://fake').pathname;
  const lease = LEASE_ROUTE.exec(path);
  if (lease) {
    const namespace = decodeURIComponent(lease[1] ?? '');
    const name = lease[2] === undefined ? undefined : decodeURIComponent(lease[2]);
    return { method, namespace, name, kind: 'lease', eventApi: 'core/v1' };
  }
  const core = CORE_EVENT_ROUTE.exec(path);
  const modern = core ? null : EVENTS_API_ROUTE.exec(path);
  const eventMatch = core ?? modern;
  if (eventMatch && method === 'POST') {
    return {
      method,
      namespace: decodeURIComponent(eventMatch[1] ?? ''),
      name: undefined,
      kind: 'event',
      eventApi: core ? 'core/v1' : 'events.k8s.io/v1',
    };
  }
  return undefined;
}

function verbOf(route: ApiRequest): LeaseVerb | 'event' | undefined {
  if (route.kind === 'event') return 'event';
  if (route.name === undefined) {
    if (route.method === 'GET') return 'list';
    return route.method === 'POST' ? 'create' : undefined;
  }
  switch (route.method) {
    case 'GET':
      return 'get';
    case 'PUT':
      return 'update';
    case 'DELETE':
      return 'delete';
    default:
      return undefined;
  }
}

/** Consumes one use of the first fault that targets `verb`, and returns its value. */
function takeFault<T>(faults: Array<CountedFault<T>>, verb: LeaseVerb | 'event'): T | undefined {
  const fault = faults.find((f) => f.remaining > 0 && (f.target === 'all' || f.target === verb));
  if (!fault) return undefined;
  fault.remaining--;
  return fault.value;
}

function injectedFailure(injected: InjectedFailure, name: string): StatusError {
  const details = leaseDetails(name);
  switch (injected.status) {
    case 429: {
      const seconds = injected.retryAfterSeconds ?? 1;
      return failure(429, 'TooManyRequests', 'Too many requests, please try again later.',
        { ...details, retryAfterSeconds: seconds }, { 'retry-after': String(seconds) });
    }
    case 503:
      return failure(503, 'ServiceUnavailable', 'The server is currently unable to handle the request', details,
        injected.retryAfterSeconds === undefined ? undefined : { 'retry-after': String(injected.retryAfterSeconds) });
    default:
      return failure(500, 'InternalError', 'Internal error occurred: injected failure', details);
  }
}

/** The `metadata.name` of a JSON body, or `''` when there is none. */
function nameInBody(text: string): string {
  try {
    const body: unknown = JSON.parse(text);
    const metadata = isObject(body) ? body.metadata : undefined;
    return isObject(metadata) && typeof metadata.name === 'string' ? metadata.name : '';
  } catch {
    return '';
  }
}

function parseJson(text: string): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw badRequest('the body of the request was in an unknown format');
  }
  if (!isObject(parsed)) throw badRequest('the body of the request was in an unknown format');
  return parsed;
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}
