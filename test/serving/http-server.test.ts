import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startHttpServer, type HttpServerHandle } from '../../src/serving/http-server.js';
import { createMetrics } from '../../src/serving/metrics.js';
import { basicAuth, fixedSource, IDENTITY, LAST_JOB_ID, sampleSnapshot, startQueueWorld, type FixedSource, type QueueWorld } from './fixture.js';

const USER = 'ops';
const PASSWORD = 'correct horse battery staple';
const TOKEN = 'tok_3b9f0c7e1d';

describe('startHttpServer', () => {
  let world: QueueWorld;
  let source: FixedSource;
  let server: HttpServerHandle;
  const metrics = createMetrics();

  before(async () => {
    world = await startQueueWorld();
    source = fixedSource([world.reports, world.cleanup]);
    server = await startHttpServer({
      host: '127.0.0.1',
      port: 0,
      source,
      metrics,
      board: { user: USER, password: PASSWORD, token: TOKEN },
    });
  });
  after(async () => {
    await server.close();
    await world.close();
  });

  const get = (path: string, headers: Record<string, string> = {}): Promise<Response> =>
    fetch(new URL(path, server.url), { headers });
  const withBasic = { authorization: basicAuth(USER, PASSWORD) };

  describe('probes', () => {
    it('/livez answers 200 ok, and 500 with the elector error for a leader that stopped renewing', async () => {
      const healthy = await get('/livez');
      assert.equal(healthy.status, 200);
      assert.equal(await healthy.text(), 'ok\n');

      source.livenessError = new Error('leader lease not renewed for 31s (tolerance 20s)');
      try {
        const stale = await get('/livez');
        assert.equal(stale.status, 500);
        assert.equal(await stale.text(), 'leader lease not renewed for 31s (tolerance 20s)\n');
      } finally {
        source.livenessError = undefined;
      }
    });

    it('/readyz answers 200 when every check passes and 503 listing the failing one otherwise', async () => {
      const ready = await get('/readyz');
      assert.equal(ready.status, 200);
      assert.deepEqual(await ready.json(), { status: 'ready', checks: source.checks });

      const saved = source.checks;
      source.checks = [{ name: 'jobs', ok: true }, { name: 'workers', ok: false, detail: 'stopped' }, { name: 'elector', ok: true }];
      try {
        const notReady = await get('/readyz');
        assert.equal(notReady.status, 503);
        assert.deepEqual(await notReady.json(), { status: 'not ready', checks: source.checks });
      } finally {
        source.checks = saved;
      }
    });

    it('/readyz stays 200 with Redis down: a check that is not required is shown, never gating', async () => {
      const saved = source.checks;
      source.checks = [{ name: 'redis', ok: false, required: false, detail: 'connect ECONNREFUSED 127.0.0.1:6379' }, { name: 'jobs', ok: true }, { name: 'elector', ok: true }];
      try {
        const response = await get('/readyz');
        assert.equal(response.status, 200, 'every instance would be unready at once, and the Service left without an endpoint');
        assert.deepEqual(await response.json(), { status: 'ready', checks: source.checks });
      } finally {
        source.checks = saved;
      }
    });

    it('/readyz answers 503 when the checks themselves fail', async () => {
      source.readinessFailure = new Error('redis ping timed out');
      try {
        const response = await get('/readyz');
        assert.equal(response.status, 503);
        assert.deepEqual(await response.json(), {
          status: 'not ready',
          checks: [{ name: 'readiness', ok: false, detail: 'redis ping timed out' }],
        });
      } finally {
        source.readinessFailure = undefined;
      }
    });
  });

  describe('/metrics', () => {
    it('serves the registry and BullMQ queue metrics as Prometheus text, without auth', async () => {
      metrics.electionMetrics.leaderOn('leasebeat');
      metrics.electionMetrics.slowpathExercised('leasebeat');
      metrics.electionMetrics.renewFailed?.('leasebeat');
      metrics.producerMetrics.enqueued('nightly-report', 0.2);
      metrics.producerMetrics.skipped('nightly-report', 'overlap', 2);
      metrics.producerMetrics.fenced(1);

      const response = await get('/metrics');
      assert.equal(response.status, 200);
      assert.equal(response.headers.get('content-type'), 'text/plain; version=0.0.4; charset=utf-8');
      const text = await response.text();
      for (const line of [
        'leader_election_master_status{name="leasebeat"} 1',
        'leader_election_slowpath_total{name="leasebeat"} 1',
        'leasebeat_lease_renew_failures_total{name="leasebeat"} 1',
        'leasebeat_leader_transitions_total 1',
        'leasebeat_ticks_enqueued_total{job="nightly-report"} 1',
        'leasebeat_ticks_skipped_total{job="nightly-report",reason="overlap"} 2',
        'leasebeat_enqueue_fenced_total 1',
        'leasebeat_schedule_lag_seconds_bucket{le="0.25"} 1',
        'bullmq_job_count{queue="reports", state="waiting"} 2',
        'bullmq_job_count{queue="cleanup", state="delayed"} 1',
      ]) {
        assert.ok(text.split('\n').includes(line), `missing line: ${line}`);
      }
    });
  });

  describe('/api/status', () => {
    it('serves the snapshot as JSON behind auth', async () => {
      source.snapshot = sampleSnapshot();
      const response = await get('/api/status', withBasic);
      assert.equal(response.status, 200);
      assert.match(response.headers.get('content-type') ?? '', /^application\/json/);
      assert.equal(response.headers.get('cache-control'), 'no-store');
      assert.deepEqual(await response.json(), sampleSnapshot());
    });
  });

  describe('status page', () => {
    it('is a self-contained page with a strict CSP whose embedded data cannot break out of its script', async () => {
      const response = await get('/', withBasic);
      assert.equal(response.status, 200);
      const csp = response.headers.get('content-security-policy') ?? '';
      assert.match(csp, /default-src 'none'/);
      const nonce = /script-src 'nonce-([^']+)'/.exec(csp)?.[1];
      assert.ok(nonce);
      const html = await response.text();
      assert.match(html, new RegExp(`<title>leasebeat · ${IDENTITY}</title>`));
      assert.doesNotMatch(html, /(src|href)="(https?:)?\/\//, 'no external assets');
      // The hostile job name and file name only appear as escaped JSON.
      assert.doesNotMatch(html, /<img src=x/);
      assert.equal(html.match(/<\/script>/g)?.length, 2);
      assert.ok(html.includes('\\u003cimg src=x onerror=alert(1)\\u003e'));
      assert.equal(html.split(`nonce="${nonce}"`).length - 1, 2, 'the style and the script carry the nonce');
    });
  });

  describe('authentication', () => {
    const protectedPaths = ['/', '/api/status', '/admin/queues', '/admin/queues/api/queues'];

    it('answers 401 with challenges without credentials or with wrong ones', async () => {
      const wrong: Array<Record<string, string>> = [
        {},
        { authorization: basicAuth(USER, 'wrong') },
        { authorization: basicAuth('root', PASSWORD) },
        { authorization: basicAuth(USER, `${PASSWORD}x`) },
        { authorization: 'Bearer wrong-token' },
        { authorization: `Bearer ${TOKEN.slice(0, -1)}` },
        { authorization: `Basic ${TOKEN}` },
        { authorization: TOKEN },
      ];
      for (const path of protectedPaths) {
        for (const headers of wrong) {
          const response = await get(path, headers);
          assert.equal(response.status, 401, `${path} with ${JSON.stringify(headers)}`);
          assert.equal(response.headers.get('www-authenticate'), 'Basic realm="leasebeat", charset="UTF-8", Bearer realm="leasebeat"');
          assert.doesNotMatch(await response.text(), /nightly-report/);
        }
      }
    });

    it('lets basic auth and the bearer token through', async () => {
      for (const path of protectedPaths) {
        assert.equal((await get(path, withBasic)).status, 200, `${path} with basic auth`);
        assert.equal((await get(path, { authorization: `Bearer ${TOKEN}` })).status, 200, `${path} with the token`);
        assert.equal((await get(path, { authorization: `bearer ${TOKEN}` })).status, 200, `${path}: schemes are case-insensitive`);
      }
    });

    it('keeps probes and metrics open for the kubelet and Prometheus', async () => {
      for (const path of ['/livez', '/readyz', '/metrics']) assert.equal((await get(path)).status, 200, path);
    });
  });

  describe('Bull Board', () => {
    it('lists every queue with its real job counts', async () => {
      const response = await get('/admin/queues/api/queues', withBasic);
      assert.equal(response.status, 200);
      const body = (await response.json()) as { queues: Array<{ name: string; counts: Record<string, number>; readOnlyMode: boolean }> };
      const byName = new Map(body.queues.map((queue) => [queue.name, queue]));
      assert.equal(byName.get('reports')?.counts.waiting, 2);
      assert.equal(byName.get('cleanup')?.counts.delayed, 1);
      assert.equal(byName.get('reports')?.readOnlyMode, false);
    });

    it('serves a job at the /queue/<queue>/<jobId> shape the status page links to', async () => {
      const page = await get(`/admin/queues/queue/reports/${encodeURIComponent(LAST_JOB_ID)}`, withBasic);
      assert.equal(page.status, 200);
      assert.match(page.headers.get('content-type') ?? '', /^text\/html/);
      const job = await get(`/admin/queues/api/queues/reports/${encodeURIComponent(LAST_JOB_ID)}`, withBasic);
      assert.equal(job.status, 200);
      assert.equal(((await job.json()) as { job: { id: string } }).job.id, LAST_JOB_ID);
    });

    it('picks up queues added after start', async () => {
      const added = world.queue('late-queue');
      source.queueList = [...source.queueList, added];
      try {
        const body = (await (await get('/admin/queues/api/queues', withBasic)).json()) as { queues: Array<{ name: string }> };
        assert.deepEqual(body.queues.map((queue) => queue.name).sort(), ['cleanup', 'late-queue', 'reports']);
      } finally {
        source.queueList = source.queueList.filter((queue) => queue !== added);
      }
    });

    it('changes queues when not read-only', async () => {
      const response = await fetch(new URL('/admin/queues/api/queues/cleanup/pause', server.url), { method: 'PUT', headers: withBasic });
      assert.equal(response.status, 200);
      assert.equal(await world.cleanup.isPaused(), true);
      await world.cleanup.resume();
    });
  });
});

describe('startHttpServer in read-only mode', () => {
  let world: QueueWorld;
  let server: HttpServerHandle;
  before(async () => {
    world = await startQueueWorld();
    server = await startHttpServer({
      host: '127.0.0.1',
      port: 0,
      source: fixedSource([world.reports, world.cleanup]),
      metrics: createMetrics(),
      board: { token: TOKEN, readOnly: true },
    });
  });
  after(async () => {
    await server.close();
    await world.close();
  });

  it('answers Bull Board write endpoints with 405 and leaves the queue alone', async () => {
    const headers = { authorization: `Bearer ${TOKEN}` };
    for (const path of ['/admin/queues/api/queues/reports/pause', '/admin/queues/api/queues/reports/empty']) {
      const response = await fetch(new URL(path, server.url), { method: 'PUT', headers });
      assert.equal(response.status, 405, path);
    }
    assert.equal(await world.reports.isPaused(), false);
    assert.equal(await world.reports.getWaitingCount(), 2);
    const read = await fetch(new URL('/admin/queues/api/queues', server.url), { headers });
    assert.equal(read.status, 200);
  });

  it('challenges only for the bearer scheme when no basic credentials are configured', async () => {
    const response = await fetch(new URL('/api/status', server.url));
    assert.equal(response.status, 401);
    assert.equal(response.headers.get('www-authenticate'), 'Bearer realm="leasebeat"');
  });
});

describe('startHttpServer refuses an open board on a reachable address', () => {
  const start = (host: string, board: Parameters<typeof startHttpServer>[0]['board']) =>
    startHttpServer({ host, port: 0, source: fixedSource([]), metrics: createMetrics(), ...(board ? { board } : {}) });

  it('throws for 0.0.0.0 without credentials, naming the settings that fix it', async () => {
    await assert.rejects(start('0.0.0.0', {}), (error: Error) => {
      for (const name of ['LEASEBEAT_BOARD_USER', 'LEASEBEAT_BOARD_PASSWORD', 'LEASEBEAT_BOARD_TOKEN', '--insecure-board']) {
        assert.ok(error.message.includes(name), `message names ${name}: ${error.message}`);
      }
      return true;
    });
    await assert.rejects(start('::', undefined), /--insecure-board/);
    await assert.rejects(start('0.0.0.0', { user: '', password: '', token: '' }), /--insecure-board/, 'empty values count as unset');
  });

  it('throws for half-set basic credentials', async () => {
    await assert.rejects(start('127.0.0.1', { user: USER }), /LEASEBEAT_BOARD_USER and LEASEBEAT_BOARD_PASSWORD must be set together/);
    await assert.rejects(start('127.0.0.1', { password: PASSWORD, token: TOKEN }), /must be set together/);
  });

  it('starts open on 0.0.0.0 with insecure, and on loopback, logging a warning without secrets', async () => {
    const lines: string[] = [];
    const { pino } = await import('pino');
    const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(line) });
    for (const [host, board] of [['0.0.0.0', { insecure: true }], ['127.0.0.1', {}]] as const) {
      const server = await startHttpServer({ host, port: 0, source: fixedSource([]), metrics: createMetrics(), board, logger });
      try {
        const port = new URL(server.url).port;
        const response = await fetch(`http://127.0.0.1:${port}/api/status`);
        assert.equal(response.status, 200, `${host} serves without credentials`);
      } finally {
        await server.close();
      }
    }
    const warnings = lines.map((line) => JSON.parse(line) as { level: number; msg: string }).filter((entry) => entry.level === 40);
    assert.equal(warnings.length, 2);
    assert.match(warnings[0]!.msg, /unauthenticated on 0\.0\.0\.0 \(--insecure-board\)/);
    assert.match(warnings[1]!.msg, /unauthenticated on loopback address 127\.0\.0\.1/);
  });

  it('never logs the credentials', async () => {
    const lines: string[] = [];
    const { pino } = await import('pino');
    const logger = pino({ level: 'trace' }, { write: (line: string) => lines.push(line) });
    const server = await startHttpServer({
      host: '0.0.0.0',
      port: 0,
      source: fixedSource([]),
      metrics: createMetrics(),
      board: { user: USER, password: PASSWORD, token: TOKEN },
      logger,
    });
    await server.close();
    const output = lines.join('');
    assert.match(output, /"auth":"basic\+bearer"/);
    assert.doesNotMatch(output, new RegExp(`${PASSWORD}|${TOKEN}`));
  });
});
