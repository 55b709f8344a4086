import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { BOARD_POLICY, hardenBoardHtml } from '../../src/serving/board.js';
import { startHttpServer, type HttpServerHandle } from '../../src/serving/http-server.js';
import { createMetrics } from '../../src/serving/metrics.js';
import { crossSiteRefusal } from '../../src/serving/request-guards.js';
import { rawRequest } from '../support/http-request.js';
import { fixedSource, startQueueWorld, type QueueWorld } from './fixture.js';

/** The loopback board without credentials: what `leasebeat start` serves by default, and what a web page can reach. */
describe('the loopback board against other web pages', () => {
  let world: QueueWorld;
  let server: HttpServerHandle;
  let port: string;

  before(async () => {
    world = await startQueueWorld();
    server = await startHttpServer({ host: '127.0.0.1', port: 0, source: fixedSource([world.reports, world.cleanup]), metrics: createMetrics() });
    port = new URL(server.url).port;
  });
  after(async () => {
    await server.close();
    await world.close();
  });

  const board = (path: string): string => `${server.url}/admin/queues/api/queues/${path}`;

  it('refuses a cross-origin text/plain form post that would add a job (no CORS preflight protects it)', async () => {
    const response = await rawRequest(board('reports/add'), {
      method: 'POST',
      headers: { origin: 'http://evil.example', 'sec-fetch-site': 'cross-site', 'content-type': 'text/plain' },
      body: '{"name":"pwned","data":{}}',
    });
    assert.equal(response.status, 403);
    assert.match(response.body, /cross-site request refused \(Sec-Fetch-Site is cross-site\)/);
    assert.equal(await world.reports.getWaitingCount(), 2, 'no job was added');
  });

  it('refuses a post from another origin on the same site (another localhost port) and from an opaque origin', async () => {
    const attempts: Array<Record<string, string>> = [
      { origin: 'http://localhost:3000', 'sec-fetch-site': 'same-site' },
      // An older browser sends Origin without Sec-Fetch-Site.
      { origin: 'http://localhost:3000' },
      { origin: 'null' },
    ];
    for (const headers of attempts) {
      const response = await rawRequest(board('cleanup/pause'), { method: 'PUT', headers });
      assert.equal(response.status, 403, JSON.stringify(headers));
    }
    assert.equal(await world.cleanup.isPaused(), false);
  });

  it('refuses any request whose Host is not a loopback name (DNS rebinding), reads included', async () => {
    const rebound = { host: `evil.example:${port}` };
    const pause = await rawRequest(board('cleanup/pause'), { method: 'PUT', headers: rebound });
    assert.equal(pause.status, 421);
    assert.equal(await world.cleanup.isPaused(), false, 'the queue was not paused');
    for (const path of ['/', '/api/status', '/admin/queues', '/metrics']) {
      const read = await rawRequest(server.url + path, { headers: rebound });
      assert.equal(read.status, 421, path);
    }
    assert.equal((await rawRequest(server.url + '/api/status', { headers: { host: `localhost:${port}` } })).status, 200);
    assert.equal((await rawRequest(server.url + '/api/status', { headers: { host: `127.0.0.1:${port}` } })).status, 200);
  });

  it('accepts the names a local proxy uses when they are allowed', async () => {
    const proxied = await startHttpServer({
      host: '127.0.0.1', port: 0, source: fixedSource([]), metrics: createMetrics(), allowedHosts: ['ops.example.com'],
    });
    try {
      assert.equal((await rawRequest(proxied.url + '/api/status', { headers: { host: 'ops.example.com' } })).status, 200);
      const other = await rawRequest(proxied.url + '/api/status', { headers: { host: 'evil.example' } });
      assert.equal(other.status, 421);
      assert.match(other.body, /not Host evil\.example; a proxy that keeps the Host header needs that name in the allowed hosts/);
    } finally {
      await proxied.close();
    }
  });

  it('lets its own pages and non-browser clients change queues', async () => {
    const own = await rawRequest(board('cleanup/pause'), {
      method: 'PUT',
      headers: { origin: server.url, 'sec-fetch-site': 'same-origin' },
    });
    assert.equal(own.status, 200);
    assert.equal(await world.cleanup.isPaused(), true);
    const curl = await rawRequest(board('cleanup/resume'), { method: 'PUT' });
    assert.equal(curl.status, 200);
    assert.equal(await world.cleanup.isPaused(), false);
  });

  it('serves Bull Board with a CSP, framing protection and no external resource', async () => {
    const page = await rawRequest(server.url + '/admin/queues');
    assert.equal(page.status, 200);
    assert.equal(page.headers['x-frame-options'], 'DENY');
    const policy = String(page.headers['content-security-policy']);
    assert.match(policy, /frame-ancestors 'none'/);
    assert.match(policy, /default-src 'none'/);
    assert.match(policy, /script-src 'self'(;|$)/, 'no inline or foreign script');
    assert.doesNotMatch(page.body, /fonts\.googleapis|https?:\/\/(?!www\.w3\.org)/, 'no absolute URL in the page');
    assert.match(page.body, /<script defer src="static\/js\/main\.[0-9a-f]+\.js">/, 'the board itself is still there');
  });
});

describe('crossSiteRefusal', () => {
  it('reads Sec-Fetch-Site first, then Origin against Host, and lets safe methods and header-less clients through', () => {
    assert.equal(crossSiteRefusal('GET', { 'sec-fetch-site': 'cross-site' }), undefined);
    assert.equal(crossSiteRefusal('PUT', { 'sec-fetch-site': 'none' }), undefined);
    assert.equal(crossSiteRefusal('DELETE', { host: 'ops.example.com', origin: 'https://ops.example.com' }), undefined);
    assert.equal(crossSiteRefusal('PATCH', { host: 'ops.example.com', origin: 'https://ops.example.com:8443' }), 'Origin https://ops.example.com:8443 is another site');
    assert.equal(crossSiteRefusal('POST', {}), undefined);
  });
});

describe('hardenBoardHtml', () => {
  it('drops protocol-relative and absolute links and keeps local ones', () => {
    const html = '<head><link href="//fonts.example/x.css" rel="stylesheet">\n<link rel="stylesheet" href="static/css/main.css"><link href="https://fonts.googleapis.com/css2?family=IBM+Plex+Sans" rel="stylesheet">';
    assert.equal(hardenBoardHtml(html), '<head><link rel="stylesheet" href="static/css/main.css">');
    assert.match(BOARD_POLICY, /connect-src 'self'/);
  });
});
