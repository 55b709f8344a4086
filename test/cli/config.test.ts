import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Redis } from 'ioredis';
import { SETTINGS } from '../../src/config/settings.js';
import { oneLine, runCli } from '../support/cli.js';
import { startRedis, type TestRedis } from '../support/redis-server.js';

const goodJobs = new URL('../fixtures/jobs-good/', import.meta.url).pathname;
const packageJson = JSON.parse(await readFile(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };

describe('CLI configuration: one schema, every bad value a one-line exit 2 before anything connects', () => {
  let server: TestRedis;
  let redis: Redis;
  let env: Record<string, string>;
  let busy: Server;
  let busyPort: number;
  before(async () => {
    server = await startRedis();
    redis = server.client();
    // A prefix of its own: any key written under it means the instance got further than it may.
    env = { LEASEBEAT_REDIS_URL: server.url, LEASEBEAT_JOBS_DIR: goodJobs, LEASEBEAT_PREFIX: 'cfg', LEASEBEAT_HTTP_PORT: '0' };
    busy = createServer();
    await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve));
    busyPort = (busy.address() as { port: number }).port;
  });
  after(async () => {
    await new Promise((resolve) => busy.close(resolve));
    redis.disconnect();
    await server.close();
  });

  it('--version prints the package version', async () => {
    const result = await runCli(['--version']);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(result.stdout.trim(), packageJson.version);
  });

  it('start --help lists every setting with its flag and variable', async () => {
    const help = await runCli(['start', '--help']);
    assert.equal(help.code, 0, help.stderr);
    const text = help.stdout.replace(/\s+/g, ' ');
    for (const spec of Object.values(SETTINGS)) {
      assert.ok(text.includes(spec.flag), `${spec.flag} missing from start --help`);
      assert.ok(text.includes(spec.env), `${spec.env} missing from start --help`);
    }
  });

  const cases: Array<{ title: string; settings: () => Record<string, string>; args?: string[]; message: RegExp }> = [
    { title: 'a malformed Redis URL', settings: () => ({ LEASEBEAT_REDIS_URL: 'not a url' }), message: /^leasebeat: LEASEBEAT_REDIS_URL="not a url" \(--redis-url\) is not a usable Redis URL: expected one of redis:\/\//  },
    { title: 'a Redis URL with port 99999', settings: () => ({ LEASEBEAT_REDIS_URL: 'redis://127.0.0.1:99999' }), message: /LEASEBEAT_REDIS_URL=.*bad port .*99999.*ports go up to 65535/ },
    { title: 'an HTTP port out of range', settings: () => ({ LEASEBEAT_HTTP_PORT: '99999' }), message: /^leasebeat: LEASEBEAT_HTTP_PORT="99999" \(--http-port\) must be a port number/ },
    { title: 'an HTTP port in use', settings: () => ({ LEASEBEAT_HTTP_PORT: String(busyPort) }), message: /LEASEBEAT_HTTP_PORT="\d+" \(--http-port\): port \d+ on 127\.0\.0\.1 is already in use/ },
    { title: 'a public HTTP host without board credentials', settings: () => ({ LEASEBEAT_HTTP_HOST: '0.0.0.0' }), message: /LEASEBEAT_HTTP_HOST="0\.0\.0\.0" .*LEASEBEAT_BOARD_USER.*--insecure-board/ },
    // Issue 19, finding 7: an address that is none is not reported as "reachable from other hosts".
    { title: 'an HTTP host that is no IP address', settings: () => ({ LEASEBEAT_HTTP_HOST: '999.1.1.1' }), message: /^leasebeat: LEASEBEAT_HTTP_HOST="999\.1\.1\.1" \(--http-host\) is not an IPv4 address/ },
    {
      title: 'an HTTP host name that does not resolve',
      settings: () => ({ LEASEBEAT_HTTP_HOST: 'no-such-host.invalid', LEASEBEAT_INSECURE_BOARD: 'true' }),
      message: /^leasebeat: LEASEBEAT_HTTP_HOST="no-such-host\.invalid" \(--http-host\) does not resolve to an address here \(ENOTFOUND\)/,
    },
    { title: 'an unknown log level', settings: () => ({ LEASEBEAT_LOG_LEVEL: 'verbose' }), message: /^leasebeat: LEASEBEAT_LOG_LEVEL="verbose" \(--log-level\) must be one of fatal, error, warn, info, debug, trace, silent$/ },
    { title: 'a missing jobs folder', settings: () => ({ LEASEBEAT_JOBS_DIR: '/nonexistent/jobs' }), message: /LEASEBEAT_JOBS_DIR .*\/nonexistent\/jobs does not exist/ },
    { title: 'a duration that is not one', settings: () => ({ LEASEBEAT_SHUTDOWN_TIMEOUT: 'soon' }), message: /LEASEBEAT_SHUTDOWN_TIMEOUT="soon" .*is not a positive duration: write it like 15s/ },
    {
      title: 'a bare number of milliseconds that breaks a rule says its unit',
      settings: () => ({ LEASEBEAT_LEASE_DURATION: '15' }),
      message: /LEASEBEAT_LEASE_DURATION \(15, a bare number: 15ms\) must be greater than LEASEBEAT_RENEW_DEADLINE \(10s\)/,
    },
    { title: 'the same value given as a flag', settings: () => ({}), args: ['--log-level', 'loud'], message: /LEASEBEAT_LOG_LEVEL="loud" \(--log-level\)/ },
  ];
  for (const { title, settings, args = [], message } of cases) {
    it(`start with ${title}: exit 2, one line naming the setting, nothing in Redis`, async () => {
      const result = await runCli(['start', ...args], { env: { ...env, ...settings() }, timeoutMs: 30_000 });
      assert.equal(result.code, 2, `exit ${result.code}\n${result.stdout}\n${result.stderr}`);
      assert.match(oneLine(result), message);
      assert.deepEqual(await redis.keys('cfg:*'), [], 'no member record or any other key: nothing connected');
    });
  }

  it('validate of a folder that does not exist: exit 2, one line', async () => {
    const result = await runCli(['validate', '/nonexistent']);
    assert.equal(result.code, 2);
    assert.match(oneLine(result), /^leasebeat: validate: the jobs folder \/nonexistent does not exist/);
  });

  it('validate reports a job file whose top-level await never settles, like start does', { timeout: 60_000 }, async () => {
    const dir = await mkdtemp(join(tmpdir(), 'leasebeat-tla-'));
    try {
      await writeFile(join(dir, 'hangs.mjs'), "await new Promise(() => {});\nexport default { name: 'hangs', every: '5s', handler: () => 1 };\n");
      await writeFile(join(dir, 'fine.mjs'), "export default { name: 'fine', every: '5s', handler: () => 1 };\n");
      const result = await runCli(['validate', dir]);
      assert.equal(result.code, 1, result.stderr);
      assert.match(result.stderr, /hangs\.mjs: .*did not finish importing within 10s/);
      assert.match(result.stdout, /1 job\(s\) valid, 1 error\(s\)/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
