import express, { type Request, type RequestHandler, type Response, type Router } from 'express';
import { AdminError, type Admin, type AdminErrorCode } from '../admin/admin.js';

/** The HTTP status of each refusal or failure of the admin API. */
const STATUS_OF: Record<AdminErrorCode, number> = {
  'unknown-job': 404,
  'unknown-member': 404,
  'ambiguous-member': 409,
  'no-eligible-leader': 409,
  'no-definitions': 409,
  paused: 409,
  timeout: 504,
  unreachable: 503,
  // The server cannot honour the instance's Redis URL: the instance's configuration, not the request.
  config: 500,
};

/** Runs one admin call and answers with its result, or with `{ error, code }` and the matching status. */
async function answer(res: Response, call: () => Promise<unknown>): Promise<void> {
  try {
    const result = await call();
    res.json(result === undefined ? { ok: true } : result);
  } catch (error) {
    if (error instanceof AdminError) {
      res.status(STATUS_OF[error.code] ?? 500).json({ error: error.message, code: error.code });
      return;
    }
    throw error;
  }
}

/**
 * A write must carry JSON or nothing: a `text/plain` or form body is what a cross-site form sends, and no
 * client of this API sends one. (The same-origin check already refuses those; this is a second lock.)
 */
const jsonOnly: RequestHandler = (req, res, next) => {
  const length = Number(req.headers['content-length'] ?? 0);
  if ((length > 0 || req.headers['transfer-encoding'] !== undefined) && !req.is('application/json')) {
    res.status(415).json({ error: 'send a JSON body (Content-Type: application/json) or none' });
    return;
  }
  next();
};

interface WriteBody {
  note?: unknown;
  force?: unknown;
}

function body(req: Request): WriteBody {
  return (req.body ?? {}) as WriteBody;
}

function text(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

/** `{ note?, force? }` of a cordon or drain. */
function cordonOptions(req: Request): { note?: string; force: boolean } {
  const { note, force } = body(req);
  return { ...(text(note) !== undefined ? { note: text(note) } : {}), force: force === true };
}

/**
 * The admin API over HTTP, the same `Admin` the CLI uses (mounted at `/api`, behind the board's
 * credentials and the same-origin check):
 * - `GET /api/cluster` status from Redis and the lease; `GET /api/members`; `GET /api/jobs/:job/runs?limit=`;
 * - `POST /api/jobs/:job/trigger`, `/pause` (`{ note?, force? }`), `/resume` (`{ force? }`);
 * - `POST /api/members/:member/cordon` (`{ note?, force? }`), `/uncordon`, `/drain` (`{ note?, force? }`:
 *   cordons and reports; waiting for the drain is the CLI's `drain --wait`, not an HTTP request's).
 * Refusals answer `{ error, code }` with 404 (unknown job or member), 409 (among them the last member that
 * could lead), 503 or 504; writes answer 405
 * when the board is read-only. Every call is bounded by the admin API's own timeout.
 */
export function adminRoutes(admin: Admin, options: { readOnly: boolean }): Router {
  const router = express.Router();
  const write: RequestHandler = (_req, res, next) => {
    if (options.readOnly) {
      res.status(405).json({ error: 'this server is read-only (LEASEBEAT_BOARD_READONLY)' });
      return;
    }
    next();
  };
  const writes = [write, jsonOnly, express.json({ limit: '16kb' })];

  router.get('/cluster', (_req, res) => answer(res, () => admin.status()));
  router.get('/members', (_req, res) => answer(res, () => admin.members()));
  router.get('/jobs/:job/runs', (req, res) => {
    const limit = Number(req.query.limit ?? 20);
    return answer(res, () => admin.runs(String(req.params.job), { limit: Number.isFinite(limit) ? limit : 20 }));
  });

  router.post('/jobs/:job/trigger', ...writes, (req, res) => answer(res, () => admin.trigger(String(req.params.job))));
  router.post('/jobs/:job/pause', ...writes, (req, res) => {
    const { note, force } = body(req);
    return answer(res, () => admin.pause(String(req.params.job), { ...(text(note) !== undefined ? { note: text(note) } : {}), force: force === true }));
  });
  router.post('/jobs/:job/resume', ...writes, (req, res) =>
    answer(res, async () => ({ resumed: await admin.resume(String(req.params.job), { force: body(req).force === true }) })),
  );
  router.post('/members/:member/cordon', ...writes, (req, res) =>
    answer(res, async () => ({ identity: await admin.cordon(String(req.params.member), cordonOptions(req)) })),
  );
  router.post('/members/:member/uncordon', ...writes, (req, res) => answer(res, () => admin.uncordon(String(req.params.member))));
  router.post('/members/:member/drain', ...writes, (req, res) => answer(res, () => admin.drain(String(req.params.member), cordonOptions(req))));
  return router;
}
