import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Redis } from 'ioredis';
import { oneLine, runCli } from '../support/cli.js';
import { FAST_ELECTION, startInstance } from '../support/instance.js';
import { RedisProcess } from '../support/redis-process.js';
import { startRedis, type TestRedis } from '../support/redis-server.js';
import { silentServer } from '../support/silent-server.js';

const JOBS = new URL('../fixtures/jobs-good/', import.meta.url).pathname;

/**
 * Issue 19, findings 1-4: a Redis that is there but cannot be used (refused credentials, another kind of
 * server than the URL names, no answer, a user without what leasebeat needs) stops `start` and the admin
 * commands within their bound, with one line naming LEASEBEAT_REDIS_URL, what is wrong and the fix, and
 * nothing written.
 */
describe('a Redis the URL cannot use is named, with the fix, before anything starts (issue 19)', () => {
  let plain: TestRedis;
  let client: Redis;
  let secured: RedisProcess;
  before(async () => {
    plain = await startRedis();
    client = plain.client();
    secured = await RedisProcess.start(
      (port) => ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--requirepass', 'sekret'],
      { ping: { password: 'sekret' } },
    );
  });
  after(async () => {
    client.disconnect();
    await plain.close();
    await secured.kill();
  });

  const env = (url: string, extra: Record<string, string> = {}): Record<string, string> => ({
    LEASEBEAT_REDIS_URL: url,
    LEASEBEAT_JOBS_DIR: JOBS,
    LEASEBEAT_HTTP_PORT: '0',
    ...FAST_ELECTION,
    ...extra,
  });

  /**
   * Runs `start` and an admin command against `url`; each must exit 2 with one line matching `message`,
   * within `boundMs` when given as LEASEBEAT_COMMAND_TIMEOUT (a refusal is not waited out).
   */
  const refused = async (url: string, message: RegExp, boundMs?: number): Promise<void> => {
    const commands = [['start'], ['status']];
    const extra: Record<string, string> = boundMs === undefined ? {} : { LEASEBEAT_COMMAND_TIMEOUT: `${boundMs}ms` };
    const results = await Promise.all(commands.map((args) => runCli(args, { env: env(url, extra), timeoutMs: 90_000 })));
    results.forEach((result, i) => {
      const command = commands[i]!.join(' ');
      assert.equal(result.code, 2, `${command}: exit ${result.code}\n${result.stderr}`);
      assert.match(oneLine(result), message, command);
      if (boundMs !== undefined) assert.ok(result.elapsedMs < boundMs, `${command} took ${result.elapsedMs} ms, past its bound`);
    });
  };

  it('a wrong password, or none where one is required: authentication failed, naming the setting and the fix', { timeout: 120_000 }, async () => {
    const port = secured.port;
    await refused(`redis://:wrong@127.0.0.1:${port}`, /^leasebeat: LEASEBEAT_REDIS_URL: .*authentication failed \(WRONGPASS .*\): fix the user and password in the URL/);
    await refused(`redis://127.0.0.1:${port}`, /^leasebeat: LEASEBEAT_REDIS_URL: .*authentication failed \(NOAUTH .*\): put the password in the URL/);
    const admin = secured.client({ password: 'sekret' });
    try {
      assert.deepEqual(await admin.keys('*'), [], 'nothing written');
    } finally {
      admin.disconnect();
    }
  });

  it('a Cluster or Sentinel URL at a plain Redis: says what the server is and what the URL expects, within the bound', { timeout: 240_000 }, async () => {
    const address = `127.0.0.1:${plain.port}`;
    // Before: `status` died of an uncaught "Connection is closed." (exit 1), `start` said "no Redis answers"
    // after twice its bound. A bound long enough that a loaded machine's start-up stays inside it.
    const boundMs = 30_000;
    await refused(`redis+cluster://${address}`, new RegExp(`LEASEBEAT_REDIS_URL: .*${address} is a standalone Redis, not a Redis Cluster node as redis\\+cluster:// expects: use redis://${address}`), boundMs);
    await refused(`redis+sentinel://${address}/mymaster`, new RegExp(`LEASEBEAT_REDIS_URL: .*${address} is a standalone Redis, not a Sentinel as redis\\+sentinel:// expects: use redis://${address}`), boundMs);
    assert.deepEqual(await client.keys('*'), [], 'nothing written');
  });

  it('a Redis that accepts connections and never answers: start and the admin commands end at LEASEBEAT_COMMAND_TIMEOUT', { timeout: 120_000 }, async () => {
    const boundMs = 4_000;
    const attempt = async (args: string[]): Promise<void> => {
      // A server per command: its first connection is where the bound starts, however long node took to load.
      const hung = await silentServer();
      try {
        const result = await runCli(args, { env: env(hung.url, { LEASEBEAT_COMMAND_TIMEOUT: '4s' }), timeoutMs: 60_000 });
        const tookMs = performance.now() - (hung.firstConnectionAt() ?? NaN);
        assert.equal(result.code, args[0] === 'start' ? 2 : 3, `${args.join(' ')}: exit ${result.code}\n${result.stderr}`);
        assert.match(oneLine(result), /within 4s/);
        // Before: start gave up after twice the bound.
        assert.ok(tookMs >= boundMs - 100 && tookMs < boundMs + 2_500, `${args.join(' ')}: gave up ${Math.round(tookMs)} ms after connecting, for a bound of ${boundMs} ms`);
      } finally {
        await hung.close();
      }
    };
    await Promise.all([['start'], ['status'], ['trigger', 'heartbeat']].map(attempt));
  });

  it('an ACL user without what leasebeat needs: each missing command, key pattern and channel named with the grant, nothing written', { timeout: 120_000 }, async () => {
    const user = async (name: string, ...rules: string[]): Promise<string> => {
      await client.call('ACL', 'SETUSER', name, 'reset', 'on', '>pw', ...rules);
      return `redis://${name}:pw@127.0.0.1:${plain.port}`;
    };
    // "+@all -@dangerous" takes INFO too, which leasebeat's scripts and BullMQ call (and ioredis' ready check,
    // whose warning would be a second line).
    await refused(await user('noinfo', '+@all', '-@dangerous', '~*', '&*'), /LEASEBEAT_REDIS_URL: .*the user "noinfo" may not use INFO .*ACL SETUSER noinfo \+info\b/);
    // Its own keys only, and no channel (Redis 7's default for a new user): BullMQ's keys, the Redis lock's channel and the run stop requests' are missing.
    const partial = await user('partial', '+@all', '-@dangerous', '+info', '~leasebeat:*');
    const start = await runCli(['start'], { env: env(partial), timeoutMs: 60_000 });
    assert.equal(start.code, 2, start.stderr);
    assert.match(
      oneLine(start),
      /LEASEBEAT_REDIS_URL: .*the user "partial" may not use the keys bull:\* \(BullMQ's queues\), the channel leasebeat:\{leasebeat\}:lease:changes \(the Redis lock's change feed\), the channel leasebeat:\{leasebeat\}:run-stops \(stop requests of runs \(overlap cancelOther, terminateOther\)\): grant them \(ACL SETUSER partial ~bull:\* &leasebeat:\{leasebeat\}:lease:changes &leasebeat:\{leasebeat\}:run-stops\)/,
    );
    const scripts = await user('noscripts', '+@all', '-@scripting', '+info', '~*', '&*');
    const status = await runCli(['status'], { env: env(scripts), timeoutMs: 60_000 });
    assert.equal(status.code, 2, status.stderr);
    assert.match(oneLine(status), /may not use EVAL .*, EVALSHA .*ACL SETUSER noscripts \+eval \+evalsha/);
    assert.deepEqual(await client.keys('*'), [], 'nothing written');

    // A user that may run every command leasebeat needs but write none: the writes of a command are refused by
    // the server mid-way, and the CLI says so in one line with the fix, exit 2, instead of a stack trace.
    const readOnly = await user('readonly', '+@all', '-@write', '-@dangerous', '+info', '~*', '&*');
    const pause = await runCli(['pause', 'heartbeat'], { env: env(readOnly), timeoutMs: 60_000 });
    assert.equal(pause.code, 2, pause.stderr);
    assert.match(oneLine(pause), /^leasebeat: LEASEBEAT_REDIS_URL: Redis refused the command: NOPERM .*; give the URL's user what the reply names \(ACL SETUSER\)/);
    assert.deepEqual(await client.keys('*'), [], 'nothing written');

    // The grant the message suggests is enough: the probes refuse nothing an instance uses.
    const granted = startInstance('acl-granted', env(await user('granted', '+@all', '-@dangerous', '+info', '~*', '&*')));
    try {
      await granted.waitForLog((line) => line.msg === 'fence raised; producing', 30_000);
    } finally {
      granted.child.kill('SIGTERM');
      assert.equal(await granted.exited(), 0, granted.stderr.join('\n'));
    }
  });
});
