import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { createAdmin, type Admin, type ScheduleView } from '../../src/index.js';
import { startHttpServer, type HttpServerHandle } from '../../src/serving/http-server.js';
import { createMetrics } from '../../src/serving/metrics.js';
import { rawRequest, type RawResponse } from '../support/http-request.js';
import { isOneLine, scheduleFootprint, type ScheduleFootprint } from '../support/keyspace.js';
import { useRedis } from '../support/redis-server.js';
import { useScheduleInstance } from '../support/schedule-instance.js';
import { basicAuth, fixedSource } from './fixture.js';

const USER = 'ops';
const PASSWORD = 'pw';

interface Refusal {
  error: string;
  errors?: string[];
  code: string;
}

/** `/api/schedules` of a running instance's HTTP server, on a real Redis with the fixture's job types. */
describe('the schedules API over HTTP', () => {
  const redis = useRedis();
  const instance = useScheduleInstance(redis);
  let server: HttpServerHandle;
  let readOnly: HttpServerHandle;
  /** A server whose admin has no job types to check a spec against. */
  let typeless: HttpServerHandle;
  let bare: Admin;
  const auth = { authorization: basicAuth(USER, PASSWORD) };

  before(async () => {
    const options = { host: '127.0.0.1', port: 0, source: instance.scheduler, metrics: createMetrics(), board: { user: USER, password: PASSWORD } };
    server = await startHttpServer(options);
    readOnly = await startHttpServer({ ...options, board: { ...options.board, readOnly: true } });
    bare = createAdmin({ connection: redis.server.url, timeoutMs: 5_000 });
    typeless = await startHttpServer({ ...options, source: Object.assign(fixedSource([]), { admin: bare }) });
  });
  redis.beforeClose(async () => {
    await Promise.all([server.close(), readOnly.close(), typeless.close()]);
    await bare.close();
  });

  const call = (method: string, path: string, options: { body?: unknown; headers?: Record<string, string>; base?: string } = {}): Promise<RawResponse> =>
    rawRequest((options.base ?? server.url) + path, {
      method,
      headers: { ...auth, ...(options.body === undefined ? {} : { 'content-type': 'application/json' }), ...options.headers },
      ...(options.body === undefined ? {} : { body: typeof options.body === 'string' ? options.body : JSON.stringify(options.body) }),
    });
  const json = <T>(response: RawResponse): T => JSON.parse(response.body) as T;

  it('PUT creates, the same spec again changes nothing, and GET answers the view with its version as ETag', async () => {
    const created = await call('PUT', '/api/schedules/tenant-1', { body: { job: 'work', schedule: '0 9 * * *', timezone: 'Europe/Berlin', data: { tenant: 1 } } });
    assert.equal(created.status, 200, created.body);
    assert.deepEqual(json(created), { id: 'tenant-1', version: 1, changed: true });
    assert.equal(created.headers.etag, '"1"');
    const same = await call('PUT', '/api/schedules/tenant-1', { body: { job: 'work', schedule: '0 9 * * *', timezone: 'Europe/Berlin', data: { tenant: 1 } } });
    assert.deepEqual(json(same), { id: 'tenant-1', version: 1, changed: false });

    const got = await call('GET', '/api/schedules/tenant-1');
    assert.equal(got.status, 200);
    assert.equal(got.headers.etag, '"1"');
    const view = json<ScheduleView>(got);
    assert.deepEqual([view.spec.data, view.trigger, view.updatedBy, view.problem], [{ tenant: 1 }, '0 9 * * *', `${USER} (http)`, null]);
  });

  it('compare-and-set: If-Match or expectedVersion; a stale one is 412 under If-Match, 409 otherwise', async () => {
    const spec = (every: string) => ({ job: 'work', every });
    assert.equal(json<{ version: number }>(await call('PUT', '/api/schedules/cas', { body: spec('1h'), headers: { 'if-match': '"0"' } })).version, 1);
    const next = await call('PUT', '/api/schedules/cas', { body: spec('2h'), headers: { 'if-match': '"1"' } });
    assert.deepEqual(json(next), { id: 'cas', version: 2, changed: true });
    const stale = await call('PUT', '/api/schedules/cas', { body: spec('3h'), headers: { 'if-match': '"1"' } });
    assert.equal(stale.status, 412, stale.body);
    assert.equal(json<Refusal>(stale).code, 'version-conflict');
    const staleQuery = await call('PUT', '/api/schedules/cas?expectedVersion=1', { body: spec('3h') });
    assert.equal(staleQuery.status, 409, staleQuery.body);
    assert.match(json<Refusal>(staleQuery).error, /is at version 2, not the version the write expected/);
    const staleDelete = await call('DELETE', '/api/schedules/cas', { headers: { 'if-match': '1' } });
    assert.equal(staleDelete.status, 412);
    const badHeader = await call('PUT', '/api/schedules/cas', { body: spec('3h'), headers: { 'if-match': 'latest' } });
    assert.equal(badHeader.status, 400);
    assert.match(json<Refusal>(badHeader).error, /^If-Match "latest": give the schedule's version/);
    assert.equal((await instance.scheduler.schedules.get('cas'))?.spec.every, '2h', 'no refused write landed');
  });

  it('refusals: 400 with one line per problem, 404 for no schedule, 409 for a file job\'s name, 503 with no job types', async () => {
    const invalid = await call('PUT', '/api/schedules/bad', { body: { jb: 'work', scheduel: '0 * * * *' } });
    assert.equal(invalid.status, 400, invalid.body);
    const refusal = json<Refusal>(invalid);
    assert.equal(refusal.code, 'invalid');
    assert.equal(refusal.errors?.length, 4, refusal.errors?.join('\n'));
    assert.equal(refusal.error, refusal.errors?.[0]);
    assert.match(refusal.error, /^schedule "bad": jb: unknown field; did you mean "job"\?/);
    const badCron = await call('PUT', '/api/schedules/bad', { body: { job: 'work', schedule: '61 * * * *' } });
    assert.equal(badCron.status, 400);
    assert.match(json<Refusal>(badCron).error, /^schedule "bad": schedule "61 \* \* \* \*": /);
    const unknownType = await call('PUT', '/api/schedules/bad', { body: { job: 'wrok', every: '1h' } });
    assert.deepEqual(json(unknownType), {
      error: 'schedule "bad": job "wrok": unknown job type; did you mean "work"? job types are report, work',
      errors: ['schedule "bad": job "wrok": unknown job type; did you mean "work"? job types are report, work'],
      code: 'invalid',
    });

    const notJson = await call('PUT', '/api/schedules/bad', { body: '{"job": "work",' });
    assert.equal(notJson.status, 400);
    assert.match(json<Refusal>(notJson).error, /^the body is not JSON \(.*\): send a JSON object/);
    const noBody = await call('PUT', '/api/schedules/bad');
    assert.equal(noBody.status, 400);
    assert.match(json<Refusal>(noBody).error, /spec: must be an object/);

    for (const [method, path] of [['GET', '/api/schedules/missing'], ['GET', '/api/schedules/missing/describe'], ['DELETE', '/api/schedules/missing'], ['POST', '/api/schedules/missing/pause']] as const) {
      const response = await call(method, path);
      assert.equal(response.status, 404, `${method} ${path}: ${response.body}`);
      assert.equal(json<Refusal>(response).code, 'not-found');
    }
    const taken = await call('PUT', '/api/schedules/nightly', { body: { job: 'work', every: '1h' } });
    assert.equal(taken.status, 409);
    assert.equal(json<Refusal>(taken).code, 'name-taken');
    const typelessPut = await call('PUT', '/api/schedules/typeless', { body: { job: 'work', every: '1h' }, base: typeless.url });
    assert.equal(typelessPut.status, 503, typelessPut.body);
    assert.equal(json<Refusal>(typelessPut).code, 'no-definitions');
    assert.equal((await call('GET', '/api/schedules?limit=zero')).status, 400);
    assert.deepEqual((await instance.scheduler.schedules.list({ search: 'bad' })).schedules, [], 'nothing refused was stored');
  });

  it('issue 21 over HTTP: a bad id, a body over the bound, an unknown time zone, `at` in the past: 4xx, one line naming the field, nothing written', async () => {
    /** PUT `body` as schedule `path`; asserts a `status` refusal whose `error` is one line matching `line`, and that nothing of `id` was written. */
    const refused = async (path: string, id: string, body: unknown, status: number, line: RegExp): Promise<Refusal> => {
      const before = await scheduleFootprint(redis.client, id);
      const response = await call('PUT', `/api/schedules/${path}`, { body });
      assert.equal(response.status, status, response.body);
      const refusal = json<Refusal>(response);
      assert.equal(refusal.code, 'invalid');
      assert.ok(isOneLine(refusal.error), `more than one line: ${JSON.stringify(refusal.error)}`);
      assert.match(refusal.error, line);
      if (refusal.errors !== undefined) assert.deepEqual(refusal.errors, [refusal.error]);
      assert.deepEqual(await scheduleFootprint(redis.client, id), before, `nothing of ${JSON.stringify(id)} was written`);
      assert.equal(before.record, null);
      assert.equal(await instance.scheduler.schedules.get(id), undefined);
      return refusal;
    };
    const spec = { job: 'work', every: '1h' };
    const ID = /id: may contain only letters, digits, "\.", "_" and "-", must start with a letter or digit and be at most 128 long/;
    await refused('tenant%3A1', 'tenant:1', spec, 400, new RegExp(`^schedule "tenant:1": ${ID.source}`));
    await refused('tenant%201', 'tenant 1', spec, 400, new RegExp(`^schedule "tenant 1": ${ID.source}`));
    await refused('tenant%2F1', 'tenant/1', spec, 400, new RegExp(`^schedule "tenant/1": ${ID.source}`));
    await refused('tenant%0A1', 'tenant\n1', spec, 400, new RegExp(`^schedule "tenant\\\\n1": ${ID.source}`));
    await refused('x'.repeat(129), 'x'.repeat(129), spec, 400, new RegExp(`^schedule "x{129}": ${ID.source}`));

    // Over the body limit (64 KiB, room for a 16 KiB spec pretty-printed): refused before the spec is read.
    const tooLarge = await refused('too-large', 'too-large', { ...spec, data: { blob: 'x'.repeat(70 * 1024) } }, 413, /^the body is too large: .*pass a reference in data$/);
    assert.equal(tooLarge.errors, undefined);
    // Within it, but the spec over its own bound: refused by the spec's check, naming data.
    await refused('large', 'large', { ...spec, data: { blob: 'x'.repeat(20 * 1024) } }, 400, /^schedule "large": data: the spec is over 16 KiB as JSON; keep large payloads elsewhere and pass a reference in data$/);
    await refused('large-utf8', 'large-utf8', { ...spec, data: { blob: 'é'.repeat(9 * 1024) } }, 400, /^schedule "large-utf8": data: the spec is over 16 KiB as JSON/);

    await refused('zone', 'zone', { job: 'work', schedule: '0 9 * * *', timezone: 'Mars/Olympus' }, 400, /^schedule "zone": timezone "Mars\/Olympus": unknown time zone; use an IANA name like "Europe\/Berlin"/);
    const past = new Date(Date.now() - 60_000).toISOString();
    await refused('past', 'past', { job: 'work', at: past }, 400, new RegExp(`^schedule "past": at "${past.replace(/\./g, '\\.')}": is in the past; give a future instant, or trigger\\(id\\) to run now$`));
    await refused('limit', 'limit', { ...spec, limit: 0 }, 400, /^schedule "limit": limit 0: must be a whole number from 1 to 10000/);
    await refused('break', 'break', { ...spec, 'no\nte': 'x' }, 400, /^schedule "break": no\\nte: unknown field; did you mean "note"\?$/);

    // A refused edit leaves the stored version, its spec and its ETag as they were.
    assert.equal((await call('PUT', '/api/schedules/steady', { body: { job: 'work', schedule: '0 9 * * *' } })).status, 200);
    const stored = await call('GET', '/api/schedules/steady');
    // The due index is left out: the leader reviews the schedule meanwhile.
    const steady = async (): Promise<Omit<ScheduleFootprint, 'due'>> => {
      const { record, listed, previous, history, feed } = await scheduleFootprint(redis.client, 'steady');
      return { record, listed, previous, history, feed };
    };
    const footprint = await steady();
    for (const [body, status] of [
      [{ job: 'work', schedule: '0 9 * * *', timezone: 'Mars/Olympus' }, 400],
      [{ job: 'work', at: past }, 400],
      [{ job: 'work', every: '1h', data: { blob: 'x'.repeat(20 * 1024) } }, 400],
      [{ job: 'work', every: '1h', data: { blob: 'x'.repeat(70 * 1024) } }, 413],
    ] as const) {
      const response = await call('PUT', '/api/schedules/steady', { body, headers: { 'if-match': '"1"' } });
      assert.equal(response.status, status, response.body);
      assert.ok(isOneLine(json<Refusal>(response).error));
    }
    assert.deepEqual(await steady(), footprint, 'the refused edits wrote nothing');
    const after = await call('GET', '/api/schedules/steady');
    assert.equal(after.headers.etag, stored.headers.etag);
    // `live` turns from null to 1 once the instance has loaded the write: the rest is as stored.
    assert.deepEqual({ ...json<ScheduleView>(after), live: null }, { ...json<ScheduleView>(stored), live: null });
  });

  it('lists page by page with the cursor, filtered by job type and search', async () => {
    for (let i = 0; i < 5; i++) await instance.scheduler.schedules.upsert(`page-${i}`, { job: i === 2 ? 'report' : 'work', every: `${i + 1}h` });
    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const page = json<{ schedules: ScheduleView[]; cursor?: string; total: number }>(
        await call('GET', `/api/schedules?search=page-&limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`),
      );
      assert.ok(page.schedules.length <= 2);
      seen.push(...page.schedules.map((s) => s.id));
      cursor = page.cursor;
    } while (cursor);
    assert.deepEqual(seen, ['page-0', 'page-1', 'page-2', 'page-3', 'page-4']);
    const reports = json<{ schedules: ScheduleView[] }>(await call('GET', '/api/schedules?job=report&search=page-'));
    assert.deepEqual(reports.schedules.map((s) => s.id), ['page-2']);
  });

  it('pause with a note, resume, trigger through the leader; describe and DELETE', { timeout: 60_000 }, async () => {
    assert.equal((await call('PUT', '/api/schedules/live', { body: { job: 'work', schedule: '0 12 * * *', timezone: 'Asia/Tokyo' } })).status, 200);
    await instance.loaded('live');
    assert.deepEqual(json(await call('POST', '/api/schedules/live/pause', { body: { note: 'tenant suspended' } })), { ok: true });
    const view = json<ScheduleView>(await call('GET', '/api/schedules/live'));
    assert.deepEqual([view.paused, view.pauseNote], [true, 'tenant suspended']);
    const refused = await call('POST', '/api/schedules/live/trigger');
    assert.equal(refused.status, 409, refused.body);
    assert.equal(json<Refusal>(refused).code, 'paused');
    assert.deepEqual(json(await call('POST', '/api/schedules/live/resume')), { resumed: true });
    assert.deepEqual(json(await call('POST', '/api/schedules/live/resume')), { resumed: false });

    const triggered = await call('POST', '/api/schedules/live/trigger');
    assert.equal(triggered.status, 200, triggered.body);
    const { jobId, queue } = json<{ jobId: string; queue: string }>(triggered);
    assert.ok(jobId.startsWith('live@manual-'), jobId);
    assert.equal(queue, 'leasebeat');

    const described = await call('GET', '/api/schedules/live/describe?ticks=3&runs=5');
    assert.equal(described.status, 200, described.body);
    const description = json<{ next: string[]; timezone: string; runs: Array<{ kind: string; jobId: string | null }>; skipped: Record<string, number> }>(described);
    assert.equal(description.timezone, 'Asia/Tokyo');
    assert.equal(description.next.length, 3);
    for (const tick of description.next) assert.equal(new Date(tick).getUTCHours(), 3, tick);
    assert.ok(description.runs.some((run) => run.kind === 'manual' && run.jobId === jobId), described.body);
    assert.equal((await call('GET', '/api/schedules/live/describe?ticks=-1')).status, 400);

    assert.deepEqual(json(await call('DELETE', '/api/schedules/live')), { removed: true });
    assert.equal((await call('GET', '/api/schedules/live')).status, 404);
  });

  it('writes need the credentials, come from this origin, carry JSON, and are refused when read-only', async () => {
    const spec = JSON.stringify({ job: 'work', every: '1h' });
    await instance.scheduler.schedules.upsert('kept', { job: 'work', every: '1h' });
    const anonymous = await rawRequest(`${server.url}/api/schedules/guarded`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: spec });
    assert.equal(anonymous.status, 401);
    assert.equal((await rawRequest(`${server.url}/api/schedules`)).status, 401, 'reads need them too');
    const crossSite = await call('PUT', '/api/schedules/guarded', { body: spec, headers: { origin: 'http://evil.example' } });
    assert.equal(crossSite.status, 403, crossSite.body);
    const crossSiteDelete = await call('DELETE', '/api/schedules/kept', { headers: { 'sec-fetch-site': 'cross-site' } });
    assert.equal(crossSiteDelete.status, 403);
    const form = await call('PUT', '/api/schedules/guarded', { body: spec, headers: { 'content-type': 'text/plain' } });
    assert.equal(form.status, 415);
    const sameOrigin = new URL(server.url).host;
    const fromPage = await call('PUT', '/api/schedules/guarded', { body: spec, headers: { origin: `http://${sameOrigin}` } });
    assert.equal(fromPage.status, 200, fromPage.body);
    assert.equal((await call('DELETE', '/api/schedules/guarded', { base: readOnly.url })).status, 405);
    assert.equal((await call('PUT', '/api/schedules/other', { body: spec, base: readOnly.url })).status, 405);
    assert.equal((await call('GET', '/api/schedules/guarded', { base: readOnly.url })).status, 200, 'reads stay open');
    assert.equal(await instance.scheduler.schedules.get('other'), undefined);
    assert.ok(await instance.scheduler.schedules.get('kept'), 'the cross-site DELETE removed nothing');
  });
});
