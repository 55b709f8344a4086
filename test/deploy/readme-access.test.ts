/**
 * docs/operations.md's "Who may use the status page, the API and Bull Board" against the HTTP server: without
 * credentials on loopback everything is open, a POST trigger included; with credentials every request needs
 * them, reads included; probes and metrics are open either way. The admin behind the API is a stub that
 * records the calls, so what is checked is the server's access rules, not the trigger path.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Admin } from '../../src/admin/admin.js';
import { startHttpServer, type HttpServerHandle } from '../../src/serving/http-server.js';
import { createMetrics } from '../../src/serving/metrics.js';
import { rawRequest } from '../support/http-request.js';
import { basicAuth, fixedSource } from '../serving/fixture.js';

const doc = readFileSync(join(resolve(import.meta.dirname, '../..'), 'docs/operations.md'), 'utf8').replace(/\s+/g, ' ');

describe('docs/operations.md: who may use the status page, the API and Bull Board', () => {
  const triggered: string[] = [];
  const admin = {
    trigger: (job: string) => {
      triggered.push(job);
      return Promise.resolve({ requestId: 'r1', jobId: `${job}@manual-r1` });
    },
    status: () => Promise.resolve({ jobs: [] }),
  } as unknown as Admin;
  let open: HttpServerHandle;
  let guarded: HttpServerHandle;

  before(async () => {
    const options = { host: '127.0.0.1', port: 0, source: Object.assign(fixedSource([]), { admin }), metrics: createMetrics() };
    open = await startHttpServer(options);
    guarded = await startHttpServer({ ...options, board: { user: 'ops', password: 'pw' } });
  });
  after(async () => {
    await open?.close();
    await guarded?.close();
  });

  it('says what the server does', () => {
    assert.match(doc, /all three are behind one check/);
    assert.match(doc, /every request to them needs the credentials, reads included/);
    assert.match(doc, /With none set, they are open to anyone who reaches the port, writes included/);
    assert.match(doc, /allowed only on a loopback address .*? or with `--insecure-board`/);
    assert.match(doc, /`curl -X POST http:\/\/127\.0\.0\.1:8080\/api\/jobs\/<job>\/trigger` works/);
    assert.match(doc, /`\/livez`, `\/readyz` and `\/metrics` are open in every case/);
  });

  it('on loopback without credentials, a POST trigger from curl runs, and reads are open', async () => {
    const trigger = await rawRequest(`${open.url}/api/jobs/nightly-report/trigger`, { method: 'POST' });
    assert.equal(trigger.status, 200, trigger.body);
    assert.deepEqual(triggered, ['nightly-report']);
    for (const path of ['/', '/api/status', '/api/cluster', '/admin/queues']) {
      assert.equal((await rawRequest(open.url + path)).status, 200, path);
    }
  });

  it('with credentials, reads and writes alike need them; probes and metrics do not', async () => {
    for (const [method, path] of [['GET', '/'], ['GET', '/api/status'], ['GET', '/api/cluster'], ['GET', '/admin/queues'], ['POST', '/api/jobs/nightly-report/trigger']] as const) {
      assert.equal((await rawRequest(guarded.url + path, { method })).status, 401, `${method} ${path}`);
    }
    const authorized = await rawRequest(`${guarded.url}/api/cluster`, { headers: { authorization: basicAuth('ops', 'pw') } });
    assert.equal(authorized.status, 200);
    for (const path of ['/livez', '/readyz', '/metrics']) {
      assert.equal((await rawRequest(guarded.url + path)).status, 200, path);
      assert.equal((await rawRequest(open.url + path)).status, 200, path);
    }
  });

  it('a non-loopback address without credentials is refused unless --insecure-board', async () => {
    await assert.rejects(startHttpServer({ host: '0.0.0.0', port: 0, source: fixedSource([]), metrics: createMetrics() }), /Refusing to serve Bull Board without authentication/);
  });
});
