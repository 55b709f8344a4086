import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express, { type ErrorRequestHandler, type RequestHandler } from 'express';
import type { Logger } from 'pino';
import { withTimeout } from '../util/abort.js';
import { systemClock } from '../util/clock.js';
import { silentLogger } from '../util/logger.js';
import { adminRoutes } from './admin-routes.js';
import { requireCredentials, resolveBoardAccess, type BoardOptions } from './auth.js';
import { BOARD_PATH, createBoard } from './board.js';
import { scrapeMetrics } from './exposition.js';
import type { HistorySnapshot } from './history.js';
import type { LeasebeatMetrics } from './metrics.js';
import { requireLoopbackHost, requireSameOrigin } from './request-guards.js';
import type { InstanceSource, ReadinessCheck } from './sources.js';
import { renderStatusPage } from './status-page.js';
import { renderJobPage } from './job-page.js';
import { statusPagePolicy } from './page-kit.js';

/** Options of `startHttpServer`. */
export interface HttpServerOptions {
  /** `LEASEBEAT_HTTP_HOST`; a non-loopback host needs board credentials or `board.insecure`. */
  host: string;
  /** `LEASEBEAT_HTTP_PORT`; 0 picks a free port. */
  port: number;
  source: InstanceSource;
  metrics: LeasebeatMetrics;
  board?: BoardOptions;
  logger?: Logger;
  /** Bound of each queue's BullMQ metrics export during a scrape. Default 5 s. */
  queueMetricsTimeoutMs?: number;
  /**
   * Bound of every read behind a request (readiness checks, status, history). Past it `/readyz` reports
   * the timeout as a failing check, `/api/status` and `/api/history` answer 503 saying what did not answer,
   * and `/` (503 too) shows that with this instance's readiness checks, instead of hanging with Redis.
   * Default 5 s.
   */
  requestTimeoutMs?: number;
  /**
   * Extra `Host` names accepted on a loopback bind (for a local proxy that rewrites Host); loopback names
   * (`localhost`, 127.0.0.0/8, `[::1]`) always are.
   */
  allowedHosts?: string[];
}

/** A listening server. */
export interface HttpServerHandle {
  /** The bound address, e.g. `http://127.0.0.1:8080`. */
  url: string;
  /** Stops accepting connections, closes idle ones and resolves once in-flight requests have finished. */
  close(): Promise<void>;
}

function urlOf(server: Server): string {
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return `http://${host}:${address.port}`;
}

function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

/** Default bound of the reads behind `/readyz`, `/`, `/api/status` and `/api/history`. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 5_000;

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Responses that describe live state must never come from a cache. */
const noStore: RequestHandler = (_req, res, next) => {
  res.setHeader('Cache-Control', 'no-store');
  next();
};

/**
 * Serves, on one port:
 * - `/livez`, `/readyz`, `/metrics`: always open, for the kubelet and Prometheus;
 * - `/`, `/api/status`, `/api/history`, the admin API under `/api` (when the source has one) and
 *   `/admin/queues` (Bull Board): behind basic auth or a bearer token when credentials are configured,
 *   since they reveal job names and can change queues.
 * Rejects before listening when the board would be open on a non-loopback address without `board.insecure`.
 * Every mutating request must come from this origin (or from a non-browser client), and on a loopback bind
 * every request must name a loopback host (DNS rebinding).
 */
export async function startHttpServer(options: HttpServerOptions): Promise<HttpServerHandle> {
  const { host, port, source, metrics } = options;
  const log = (options.logger ?? silentLogger).child({ component: 'http' });
  const access = resolveBoardAccess(options.board ?? {}, host);
  const guard: RequestHandler = access.credentials
    ? requireCredentials(access.credentials)
    : (_req, _res, next) => next();

  const app = express();
  app.disable('x-powered-by');
  app.use((_req, res, next) => {
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.setHeader('Referrer-Policy', 'no-referrer');
    next();
  });
  // Before anything answers: a DNS-rebinding page must not even read the status.
  app.use(requireLoopbackHost(host, options.allowedHosts));
  // Before auth: a cross-site request is refused whatever credentials the browser attaches to it.
  app.use(requireSameOrigin((reason) => log.warn({ reason }, 'refused a cross-site request')));

  app.get('/livez', noStore, (_req, res) => {
    const problem = source.liveness();
    res.status(problem ? 500 : 200).type('text/plain').send(problem ? `${problem.message}\n` : 'ok\n');
  });

  const requestTimeoutMs = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
  const bounded = <T>(what: string, read: () => Promise<T>): Promise<T> => withTimeout(systemClock, requestTimeoutMs, undefined, what, read);

  const readiness = async (): Promise<ReadinessCheck[]> => {
    try {
      return await bounded('the readiness checks', () => source.readiness());
    } catch (error) {
      return [{ name: 'readiness', ok: false, detail: errorText(error) }];
    }
  };

  // Readiness is about this instance: it answers, its jobs are loaded, its elector and workers run, it is
  // not shutting down. A check that is not `required` (Redis, which every instance shares) is reported,
  // never gating: with Redis down, every instance would be unready at once, a Service would have no
  // endpoint left, and the status page, the one place that explains the outage, could not be reached.
  // Nothing is gained by failing: no instance can work without Redis, so none is a better endpoint.
  app.get('/readyz', noStore, async (_req, res) => {
    const checks = await readiness();
    const ready = checks.every((check) => check.ok || check.required === false);
    res.status(ready ? 200 : 503).json({ status: ready ? 'ready' : 'not ready', checks });
  });

  app.get('/metrics', noStore, async (_req, res) => {
    // Jobs come and go with hot reloads: declare the current ones at each scrape (cheap, idempotent).
    if (source.metricLabels) metrics.declare(source.metricLabels());
    const body = await scrapeMetrics(metrics, source.queues(), {
      ...(options.queueMetricsTimeoutMs !== undefined ? { timeoutMs: options.queueMetricsTimeoutMs } : {}),
      onQueueError: (queue, err) => log.warn({ queue, err }, 'left a queue out of the metrics scrape'),
    });
    res.type(metrics.registry.contentType).send(body);
  });

  app.get('/api/status', guard, noStore, async (_req, res) => {
    try {
      res.json(await bounded('the status (Redis and the lease)', () => source.status()));
    } catch (error) {
      res.status(503).json({ error: errorText(error) });
    }
  });

  // The history is an extra: when it cannot be read in time the page still shows the tables.
  const readHistory = async (): Promise<HistorySnapshot | null> => {
    if (!source.history) return null;
    try {
      return await bounded('the tick and leadership history', () => source.history!());
    } catch (error) {
      log.warn({ err: error }, 'could not read the tick and leadership history');
      return null;
    }
  };

  app.get('/api/history', guard, noStore, async (_req, res) => {
    const history = await readHistory();
    if (history) res.json(history);
    else res.status(source.history ? 503 : 404).json({ error: source.history ? 'history unavailable' : 'this instance keeps no history' });
  });

  app.get('/', guard, noStore, async (_req, res) => {
    const nonce = randomBytes(16).toString('base64');
    const page = {
      identity: source.identity, hasHistory: source.history !== undefined, nonce, boardPath: BOARD_PATH,
      // The page lists runtime schedules only where /api/schedules is served.
      schedules: source.admin ? { readOnly: options.board?.readOnly ?? false } : undefined,
    };
    let html: string;
    try {
      const [snapshot, history] = await Promise.all([bounded('the status (Redis and the lease)', () => source.status()), readHistory()]);
      html = renderStatusPage({ ...page, snapshot, history });
      res.status(200);
    } catch (error) {
      // The page is where an outage is explained: it still renders, saying what did not answer, with this
      // instance's readiness checks (Redis among them), and recovers by itself once the status answers.
      html = renderStatusPage({ ...page, snapshot: null, outage: { problem: errorText(error), checks: await readiness() } });
      res.status(503);
    }
    res.setHeader('Content-Security-Policy', statusPagePolicy(nonce));
    res.type('html').send(html);
  });

  // The admin API the CLI uses, over HTTP; its writes pass the same-origin check above and the credentials.
  if (source.admin) {
    app.use('/api', guard, noStore, adminRoutes(source.admin, { readOnly: options.board?.readOnly ?? false }));
    // A job's own page: its describe, with its actions through the API above.
    app.get('/jobs/:job', guard, noStore, (req, res) => {
      const nonce = randomBytes(16).toString('base64');
      res.setHeader('Content-Security-Policy', statusPagePolicy(nonce));
      res.type('html').send(renderJobPage({ name: String(req.params.job), nonce, boardPath: BOARD_PATH, readOnly: options.board?.readOnly ?? false }));
    });
  }

  const board = createBoard({
    queues: () => source.queues(),
    readOnly: options.board?.readOnly ?? false,
    title: `leasebeat · ${source.identity}`,
  });
  app.use(BOARD_PATH, guard, board.sync, board.router);

  const onError: ErrorRequestHandler = (err, req, res, _next) => {
    log.error({ err, path: req.path }, 'request failed');
    if (!res.headersSent) res.status(500).type('text/plain').send('internal error\n');
  };
  app.use(onError);

  const server = createServer(app);
  await listen(server, port, host);
  const url = urlOf(server);
  const auth = access.credentials
    ? [access.credentials.basic && 'basic', access.credentials.token && 'bearer'].filter(Boolean).join('+')
    : 'none';
  if (access.warning) log.warn(access.warning);
  log.info({ url, auth, readOnly: options.board?.readOnly ?? false }, 'HTTP server listening');

  let closing: Promise<void> | undefined;
  return {
    url,
    close: () =>
      (closing ??= new Promise<void>((resolve, reject) => {
        server.close((err) => (err ? reject(err) : resolve()));
        // Browsers keep idle keep-alive connections open; they would hold close() indefinitely.
        server.closeIdleConnections();
      })),
  };
}
