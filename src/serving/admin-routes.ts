import express, { type ErrorRequestHandler, type Request, type RequestHandler, type Response, type Router } from 'express';
import { AdminError, type Admin, type AdminErrorCode } from '../admin/admin.js';
import { BackfillError, type BackfillOptions } from '../admin/backfill.js';
import { ScheduleError, type ScheduleErrorCode } from '../admin/schedules.js';
import type { ScheduleSpec } from '../schedules/spec.js';

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

/** The HTTP status of each refusal of the schedules API. */
const SCHEDULE_STATUS_OF: Record<ScheduleErrorCode, number> = {
  invalid: 400,
  'not-found': 404,
  'name-taken': 409,
  'version-conflict': 409,
  // The server has no job types to check a spec against: its configuration, and it may come back.
  'no-definitions': 503,
  // Too few replicas acknowledged the write: the same request may succeed once they answer.
  unconfirmed: 503,
};

/**
 * Runs one admin call and answers with its result, or with `{ error, code }` and the matching status; a
 * refused schedule adds `errors`, one line per problem. With `preconditioned` (the request sent If-Match)
 * a version conflict is 412, as HTTP has it for a failed precondition.
 */
async function answer(res: Response, call: () => Promise<unknown>, options: { preconditioned?: boolean } = {}): Promise<void> {
  try {
    const result = await call();
    res.json(result === undefined ? { ok: true } : result);
  } catch (error) {
    if (error instanceof AdminError) {
      res.status(STATUS_OF[error.code] ?? 500).json({ error: error.message, code: error.code });
      return;
    }
    if (error instanceof BackfillError) {
      res.status(400).json({ error: error.message, code: 'invalid', option: error.option });
      return;
    }
    if (error instanceof ScheduleError) {
      const status = error.code === 'version-conflict' && options.preconditioned ? 412 : SCHEDULE_STATUS_OF[error.code];
      res.status(status ?? 500).json({ error: error.errors[0] ?? error.message, errors: error.errors, code: error.code });
      return;
    }
    throw error;
  }
}

/** A request whose form is wrong (a query parameter, a header): 400, worded as a refused spec is. */
function badRequest(line: string): ScheduleError {
  return new ScheduleError('invalid', line);
}

function notFound(id: string): ScheduleError {
  return new ScheduleError('not-found', `no schedule has id "${id}": GET /api/schedules lists them`);
}

/** An optional whole-number query parameter of at least `min`. */
function queryNumber(req: Request, name: string, min: number): number | undefined {
  const value = req.query[name];
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || !/^\d+$/.test(value) || Number(value) < min) {
    throw badRequest(`${name} ${JSON.stringify(value)}: must be a whole number of at least ${min}`);
  }
  return Number(value);
}

function queryText(req: Request, name: string): string | undefined {
  const value = req.query[name];
  if (value === undefined) return undefined;
  if (typeof value !== 'string') throw badRequest(`${name}: give it once, as text`);
  return value;
}

/** The version a write expects, from `If-Match: <version>` (an ETag: `"3"`, `W/"3"` or `3`) or `?expectedVersion=`. */
function expectedVersion(req: Request): { expectedVersion?: number } {
  const header = req.headers['if-match'];
  const query = queryNumber(req, 'expectedVersion', 0);
  if (header === undefined) return query === undefined ? {} : { expectedVersion: query };
  const match = /^\s*(?:W\/)?"?(\d+)"?\s*$/.exec(header);
  if (!match) throw badRequest(`If-Match ${JSON.stringify(header)}: give the schedule's version, as its ETag has it (like "3")`);
  const version = Number(match[1]);
  if (query !== undefined && query !== version) throw badRequest(`If-Match ${header} and expectedVersion=${query} differ: send one of them`);
  return { expectedVersion: version };
}

/** A version conflict under If-Match is a failed precondition (412). */
function preconditioned(req: Request): { preconditioned: boolean } {
  return { preconditioned: req.headers['if-match'] !== undefined };
}

/**
 * Who a write is recorded as: the basic-auth user (`<user> (http)`), else `http`. The credentials check ran
 * before this, when credentials are configured; without them anyone who reaches the port may write anyway.
 */
function writer(req: Request): string {
  const match = /^\s*basic\s+(\S+)/i.exec(req.headers.authorization ?? '');
  const user = match ? Buffer.from(match[1]!, 'base64').toString('utf8').split(':')[0] : undefined;
  return user ? `${user} (http)` : 'http';
}

/**
 * A body express could not read is the client's mistake, in one line: not JSON (400) or too large (413),
 * rather than the server's "internal error".
 */
const unreadableBody: ErrorRequestHandler = (err: { type?: unknown; message?: unknown }, _req, res, next) => {
  if (err.type === 'entity.parse.failed') {
    res.status(400).json({ error: `the body is not JSON (${String(err.message)}): send a JSON object with Content-Type: application/json`, code: 'invalid' });
  } else if (err.type === 'entity.too.large') {
    res.status(413).json({ error: 'the body is too large: a schedule is a pointer to work; keep large payloads elsewhere and pass a reference in data', code: 'invalid' });
  } else {
    next(err);
  }
};

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
 * - `GET /api/cluster` status from Redis and the lease; `GET /api/members`; `GET /api/jobs/:job/runs?limit=`,
 *   `GET /api/jobs/:job/describe?ticks=&runs=` (a job or a schedule);
 * - `POST /api/jobs/:job/trigger`, `/pause` (`{ note?, force? }`), `/resume` (`{ force? }`), `/backfill`
 *   (`{ from, to, overlap?, rate?, includeSkipped?, yes? }`: answers the backfill, queued; a refused one 400
 *   with the `option` at fault); `GET /api/jobs/:job/backfills` (their progress, newest first);
 * - `POST /api/members/:member/cordon` (`{ note?, force? }`), `/uncordon`, `/drain` (`{ note?, force? }`:
 *   cordons and reports; waiting for the drain is the CLI's `drain --wait`, not an HTTP request's).
 * - `GET /api/schedules?job=&search=&cursor=&limit=`, `GET /api/schedules/:id` (its `ETag` is its
 *   version), `GET /api/schedules/:id/describe?ticks=&runs=`; `PUT /api/schedules/:id` (the spec as the body;
 *   `If-Match: <version>` or `?expectedVersion=` to compare and set), `DELETE /api/schedules/:id`,
 *   `POST /api/schedules/:id/pause` (`{ note? }`), `/resume`, `/trigger`.
 * Refusals answer `{ error, code }` with 404 (unknown job, member or schedule), 409 (among them the last
 * member that could lead, a name a file job has, a version conflict; 412 for one under If-Match), 503 or
 * 504; a refused spec answers 400 with `errors` too, one line per problem. Writes answer 405
 * when the board is read-only. Every call is bounded by the admin API's own timeout.
 */
/** `?ticks=&runs=` of a describe request; each absent one is left to the API's default. */
function counts(req: Request): { ticks?: number; runs?: number } {
  const [ticks, runs] = [queryNumber(req, 'ticks', 0), queryNumber(req, 'runs', 1)];
  return { ...(ticks !== undefined ? { ticks } : {}), ...(runs !== undefined ? { runs } : {}) };
}

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
  router.get('/jobs/:job/describe', (req, res) => answer(res, () => admin.describe(String(req.params.job), counts(req))));

  // Each action is recorded in the job's history as the board user's.
  router.post('/jobs/:job/trigger', ...writes, (req, res) => answer(res, () => admin.trigger(String(req.params.job), { by: writer(req) })));
  router.post('/jobs/:job/pause', ...writes, (req, res) => {
    const { note, force } = body(req);
    return answer(res, () => admin.pause(String(req.params.job), { ...(text(note) !== undefined ? { note: text(note) } : {}), force: force === true, by: writer(req) }));
  });
  router.post('/jobs/:job/resume', ...writes, (req, res) =>
    answer(res, async () => ({ resumed: await admin.resume(String(req.params.job), { force: body(req).force === true, by: writer(req) }) })),
  );
  router.post('/jobs/:job/backfill', ...writes, (req, res) => {
    // Each field is checked by `backfill` itself, which names the one at fault.
    const { from, to, overlap, rate, includeSkipped, yes } = (req.body ?? {}) as Record<string, unknown>;
    const options = { from, to, overlap, rate, includeSkipped: includeSkipped === true, yes: yes === true, by: writer(req) } as BackfillOptions;
    return answer(res, () => admin.backfill(String(req.params.job), options));
  });
  router.get('/jobs/:job/backfills', (req, res) => answer(res, () => admin.backfills(String(req.params.job))));
  router.post('/members/:member/cordon', ...writes, (req, res) =>
    answer(res, async () => ({ identity: await admin.cordon(String(req.params.member), cordonOptions(req)) })),
  );
  router.post('/members/:member/uncordon', ...writes, (req, res) => answer(res, () => admin.uncordon(String(req.params.member))));
  router.post('/members/:member/drain', ...writes, (req, res) => answer(res, () => admin.drain(String(req.params.member), cordonOptions(req))));

  const { schedules } = admin;
  const id = (req: Request): string => String(req.params.id);
  router.get('/schedules', (req, res) =>
    answer(res, async () => {
      const [job, search, cursor, limit] = [queryText(req, 'job'), queryText(req, 'search'), queryText(req, 'cursor'), queryNumber(req, 'limit', 1)];
      return await schedules.list({ ...(job !== undefined ? { job } : {}), ...(search !== undefined ? { search } : {}), ...(cursor !== undefined ? { cursor } : {}), ...(limit !== undefined ? { limit } : {}) });
    }),
  );
  router.get('/schedules/:id', (req, res) =>
    answer(res, async () => {
      const view = await schedules.get(id(req));
      if (!view) throw notFound(id(req));
      // The version, for an If-Match of the next write.
      res.setHeader('ETag', `"${view.version}"`);
      return view;
    }),
  );
  router.get('/schedules/:id/describe', (req, res) => answer(res, () => schedules.describe(id(req), counts(req))));
  // A spec may be up to 16 KiB as compact JSON; the body limit leaves room for it pretty-printed, so that the
  // spec's own bound, with its message, is what refuses a large one.
  router.put('/schedules/:id', write, jsonOnly, express.json({ limit: '64kb' }), (req, res) =>
    answer(
      res,
      async () => {
        // The body is the spec as the client wrote it: `upsert` checks every field of it.
        const result = await schedules.upsert(id(req), req.body as ScheduleSpec, { ...expectedVersion(req), by: writer(req) });
        res.setHeader('ETag', `"${result.version}"`);
        return result;
      },
      preconditioned(req),
    ),
  );
  router.delete('/schedules/:id', ...writes, (req, res) =>
    answer(
      res,
      async () => {
        if (!(await schedules.remove(id(req), { ...expectedVersion(req), by: writer(req) }))) throw notFound(id(req));
        return { removed: true };
      },
      preconditioned(req),
    ),
  );
  router.post('/schedules/:id/pause', ...writes, (req, res) => answer(res, () => schedules.pause(id(req), text(body(req).note), { by: writer(req) })));
  router.post('/schedules/:id/resume', ...writes, (req, res) => answer(res, async () => ({ resumed: await schedules.resume(id(req), { by: writer(req) }) })));
  router.post('/schedules/:id/trigger', ...writes, (req, res) => answer(res, () => schedules.trigger(id(req), { by: writer(req) })));
  router.use(unreadableBody);
  return router;
}
