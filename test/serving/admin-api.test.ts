import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { Queue } from 'bullmq';
import { createAdmin, type Admin } from '../../src/admin/admin.js';
import { MemberStore } from '../../src/members/store.js';
import { KeySpace } from '../../src/redis/keys.js';
import { startHttpServer, type HttpServerHandle } from '../../src/serving/http-server.js';
import { createMetrics } from '../../src/serving/metrics.js';
import { rawRequest } from '../support/http-request.js';
import { useRedis } from '../support/redis-server.js';
import { leadInProcess } from '../support/trigger-leader.js';
import { basicAuth, fixedSource } from './fixture.js';

const pick = (object: Record<string, unknown>, names: string[]): Record<string, unknown> => Object.fromEntries(names.map((name) => [name, object[name]]));
const JOBS = new URL('../fixtures/jobs-good/', import.meta.url).pathname;
const USER = 'ops';
const PASSWORD = 'pw';

/** The CLI's admin API served over HTTP, on a real Redis with the real job definitions. */
describe('the admin API over HTTP', () => {
  const redis = useRedis();
  let admin: Admin;
  let server: HttpServerHandle;
  let readOnly: HttpServerHandle;
  const auth = { authorization: basicAuth(USER, PASSWORD) };

  before(async () => {
    admin = createAdmin({ connection: redis.server.url, jobsDir: JOBS, timeoutMs: 5_000 });
    const source = Object.assign(fixedSource([]), { admin });
    const options = { host: '127.0.0.1', port: 0, source, metrics: createMetrics() };
    server = await startHttpServer({ ...options, board: { user: USER, password: PASSWORD } });
    readOnly = await startHttpServer({ ...options, board: { user: USER, password: PASSWORD, readOnly: true } });
    await new MemberStore(redis.client, new KeySpace()).beat({
      identity: 'pod-a_1', version: 'test', startedAt: 0, seq: 1, role: 'follower', workers: 'running',
      activeJobs: 0, activeJobIds: [], cordoned: false, draining: false, ready: true,
    });
  });
  redis.beforeClose(async () => {
    await server.close();
    await readOnly.close();
    await admin.close();
  });

  const post = (path: string, payload?: unknown, base = server.url) =>
    rawRequest(base + path, {
      method: 'POST',
      headers: { ...auth, ...(payload === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(payload === undefined ? {} : { body: JSON.stringify(payload) }),
    });

  it('triggers a job through the leader, as a tick; a paused job answers 409 with its code', async () => {
    const leader = await leadInProcess(redis.client, JOBS);
    let response: Awaited<ReturnType<typeof post>>;
    let paused: Awaited<ReturnType<typeof post>>;
    try {
      response = await post('/api/jobs/nightly-report/trigger');
      await admin.pause('nightly-report');
      paused = await post('/api/jobs/nightly-report/trigger');
      await admin.resume('nightly-report');
    } finally {
      await leader.stop();
    }
    assert.equal(paused.status, 409, paused.body);
    assert.equal((JSON.parse(paused.body) as { code: string }).code, 'paused');
    assert.equal(response.status, 200, response.body);
    const { jobId, queue } = JSON.parse(response.body) as { jobId: string; queue: string };
    const bull = new Queue(queue, { connection: redis.client });
    try {
      assert.equal((await bull.getJob(jobId))?.name, 'nightly-report');
    } finally {
      await bull.close();
    }
  });

  it('pauses and resumes a known job, and refuses an unknown one with 404 and its code', async () => {
    assert.equal((await post('/api/jobs/nightly-report/pause', { note: 'maintenance' })).status, 200);
    const cluster = JSON.parse((await rawRequest(server.url + '/api/cluster', { headers: auth })).body) as { jobs: Array<{ name: string; paused: boolean; pauseNote: string | null }> };
    assert.deepEqual(cluster.jobs.filter((job) => job.name === 'nightly-report').map((job) => [job.paused, job.pauseNote]), [[true, 'maintenance']]);
    assert.deepEqual(JSON.parse((await post('/api/jobs/nightly-report/resume')).body), { resumed: true });

    const unknown = await post('/api/jobs/no-such-job/pause', {});
    assert.equal(unknown.status, 404);
    assert.equal((JSON.parse(unknown.body) as { code: string }).code, 'unknown-job');
  });

  it('cordons and uncordons a member by a unique prefix, lists the members and the runs', async () => {
    // The only member could lead: cordoned, it would leave the cluster without a leader.
    const refused = await post('/api/members/pod-a/cordon', { note: 'disk' });
    assert.equal(refused.status, 409, refused.body);
    assert.equal((JSON.parse(refused.body) as { code: string }).code, 'no-eligible-leader');
    assert.deepEqual(JSON.parse((await post('/api/members/pod-a/cordon', { note: 'disk', force: true })).body), { identity: 'pod-a_1' });
    const members = JSON.parse((await rawRequest(server.url + '/api/members', { headers: auth })).body) as { members: Array<{ identity: string; cordonRequested: boolean }> };
    assert.deepEqual(members.members.map((m) => [m.identity, m.cordonRequested]), [['pod-a_1', true]]);
    assert.equal((JSON.parse((await post('/api/members/pod-a_1/uncordon')).body) as { changed: boolean }).changed, true);
    assert.equal((await post('/api/members/pod-z/cordon')).status, 404);
    const runs = await rawRequest(server.url + '/api/jobs/nightly-report/runs?limit=5', { headers: auth });
    assert.equal(runs.status, 200);
    assert.ok(Array.isArray(JSON.parse(runs.body)));
  });

  it('backfill: a refused one answers 400 naming the option, read-only refuses it, a job not defined is 404; progress is listed', async () => {
    const from = Date.UTC(2026, 0, 1);
    const inverted = await post('/api/jobs/heartbeat/backfill', { from: new Date(from + 60_000).toISOString(), to: new Date(from).toISOString() });
    assert.equal(inverted.status, 400, inverted.body);
    assert.deepEqual(pick(JSON.parse(inverted.body) as Record<string, unknown>, ['code', 'option']), { code: 'invalid', option: 'from' });
    // No leader has scheduled heartbeat here: the option at fault is the job.
    const unscheduled = await post('/api/jobs/heartbeat/backfill', { from, to: from + 60_000 });
    assert.deepEqual(pick(JSON.parse(unscheduled.body) as Record<string, unknown>, ['code', 'option']), { code: 'invalid', option: 'job' });
    assert.equal((await post('/api/jobs/no-such-job/backfill', { from, to: from + 60_000 })).status, 404);
    assert.equal((await post('/api/jobs/heartbeat/backfill', { from, to: from + 60_000 }, readOnly.url)).status, 405);
    const listed = await rawRequest(`${server.url}/api/jobs/heartbeat/backfills`, { headers: auth });
    assert.equal(listed.status, 200);
    assert.deepEqual(JSON.parse(listed.body), [], 'nothing was stored');
  });

  it('refuses writes without credentials, with a non-JSON body, from another site, or when read-only', async () => {
    assert.equal((await rawRequest(server.url + '/api/jobs/nightly-report/trigger', { method: 'POST' })).status, 401);
    const form = await rawRequest(server.url + '/api/jobs/nightly-report/pause', {
      method: 'POST', headers: { ...auth, 'content-type': 'text/plain' }, body: 'note=x',
    });
    assert.equal(form.status, 415);
    const crossSite = await rawRequest(server.url + '/api/jobs/nightly-report/pause', {
      method: 'POST', headers: { ...auth, origin: 'http://evil.example', 'sec-fetch-site': 'cross-site' },
    });
    assert.equal(crossSite.status, 403);
    assert.equal((await post('/api/jobs/nightly-report/trigger', undefined, readOnly.url)).status, 405);
    assert.equal((await rawRequest(readOnly.url + '/api/cluster', { headers: auth })).status, 200, 'reads stay open');
    const cluster = JSON.parse((await rawRequest(server.url + '/api/cluster', { headers: auth })).body) as { jobs: Array<{ name: string; paused: boolean }> };
    assert.equal(cluster.jobs.find((job) => job.name === 'nightly-report')?.paused, false, 'none of them paused the job');
  });
});
