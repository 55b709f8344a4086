import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { ConfigError, loadServiceConfig, SETTINGS, type SettingName } from '../../src/config/settings.js';
import { DEFAULT_MEMBER_SETTINGS } from '../../src/members/settings.js';
import { DEFAULT_WORKER_TUNING } from '../../src/workers/worker-pool.js';
import { CONFIG_DOC, withSettingsTable } from '../../scripts/readme-config.js';

/** The environment of a run with only `values` set (no LEASEBEAT_* from the test runner's own). */
const only = (values: Partial<Record<SettingName, string>>): NodeJS.ProcessEnv =>
  Object.fromEntries(Object.entries(values).map(([name, value]) => [`LEASEBEAT_${name}`, value]));

describe('the settings schema', () => {
  it('every setting has its variable, flag and description, and no two share a name', () => {
    const envs = new Set<string>();
    const flags = new Set<string>();
    for (const [name, spec] of Object.entries(SETTINGS)) {
      assert.equal(spec.env, `LEASEBEAT_${name}`);
      assert.equal(spec.flag, `--${name.toLowerCase().replaceAll('_', '-')}`);
      assert.ok(spec.description.length > 10, name);
      envs.add(spec.env);
      flags.add(spec.flag);
    }
    assert.equal(envs.size, Object.keys(SETTINGS).length);
    assert.equal(flags.size, Object.keys(SETTINGS).length);
  });

  it('the documented defaults are the values used', () => {
    const config = loadServiceConfig({}, only({}));
    assert.equal(config.redisUrl, 'redis://127.0.0.1:6379');
    assert.equal(config.redisUrlExplicit, false);
    assert.equal(config.lock, 'redis');
    assert.deepEqual([config.leaseDurationMs, config.renewDeadlineMs, config.retryPeriodMs], [15_000, 10_000, 2_000]);
    assert.equal(config.httpPort, 8080);
    assert.equal(config.shutdownTimeoutMs, 25_000);
    assert.equal(config.commandTimeoutMs, 10_000);
    assert.equal(config.httpRequestTimeoutMs, 5_000);
    assert.deepEqual(config.httpAllowedHosts, []);
    assert.deepEqual(loadServiceConfig({}, only({ HTTP_ALLOWED_HOSTS: 'dev.local, proxy.internal,' })).httpAllowedHosts, ['dev.local', 'proxy.internal']);
    assert.equal(config.members.heartbeatIntervalMs, DEFAULT_MEMBER_SETTINGS.heartbeatIntervalMs);
    assert.equal(config.members.graceMs, DEFAULT_MEMBER_SETTINGS.graceMs);
    assert.equal(config.members.removalTimeoutMs, DEFAULT_MEMBER_SETTINGS.removalTimeoutMs);
    assert.equal(config.workerTuning.lockDurationMs, DEFAULT_WORKER_TUNING.lockDurationMs);
    assert.equal(config.workerTuning.stalledIntervalMs, DEFAULT_WORKER_TUNING.stalledIntervalMs);
  });

  it('flags win over the environment, and empty variables count as unset', () => {
    const config = loadServiceConfig({ PREFIX: 'from-flag' }, only({ PREFIX: 'from-env', LOG_LEVEL: '' }));
    assert.equal(config.prefix, 'from-flag');
    assert.equal(config.logLevel, 'info');
  });

  it('a bad value names the setting and its flag, in one line; a secret is never echoed', () => {
    const fails = (values: Partial<Record<SettingName, string>>, message: RegExp): void => {
      assert.throws(() => loadServiceConfig({}, only(values)), (error: unknown) => {
        assert.ok(error instanceof ConfigError);
        assert.doesNotMatch(error.message, /\n/);
        assert.match(error.message, message);
        return true;
      });
    };
    fails({ BOARD_READONLY: 'maybe' }, /^LEASEBEAT_BOARD_READONLY="maybe" \(--board-readonly\) must be true or false$/);
    fails({ LEASE_NAME: 'Not_DNS' }, /^LEASEBEAT_LEASE_NAME="Not_DNS" \(--lease-name\) must be a DNS subdomain name/);
    fails({ REDIS_URL: 'http://localhost:6379' }, /is not a usable Redis URL: expected one of redis:\/\/, rediss:\/\/, redis\+sentinel:\/\//);
    // A Redis URL may carry a password: a message shows it redacted.
    fails({ REDIS_URL: 'redis://app:s3cret@h:6379?bogus=1' }, /^LEASEBEAT_REDIS_URL="redis:\/\/app:\*\*\*@h:6379\?bogus=1" \(--redis-url\) is not a usable Redis URL: unknown option "bogus"/);
    fails({ MEMBER_GRACE: '5s', HEARTBEAT_INTERVAL: '5s' }, /^LEASEBEAT_MEMBER_GRACE \(5s\) must be more than twice LEASEBEAT_HEARTBEAT_INTERVAL \(5s\)/);
    fails({ RENEW_DEADLINE: '2s', RETRY_PERIOD: '2s' }, /^LEASEBEAT_RENEW_DEADLINE \(2s\) must be greater than 1\.2 × LEASEBEAT_RETRY_PERIOD \(2s\)/);
    fails({ BOARD_USER: 'ops' }, /BOARD_USER and LEASEBEAT_BOARD_PASSWORD must be set together/);
    assert.throws(() => loadServiceConfig({ BOARD_USER: 'a:b', BOARD_PASSWORD: 'hunter2' }, {}), (error: unknown) => {
      assert.match((error as Error).message, /LEASEBEAT_BOARD_USER="a:b" \(--board-user\) must not contain ":"/);
      assert.doesNotMatch((error as Error).message, /hunter2/);
      return true;
    });
  });

  it('takes an IP address or a host name as the HTTP host, and refuses what is neither (issue 19)', () => {
    for (const host of ['0.0.0.0', '127.0.0.1', '::', '::1', 'localhost', 'scheduler-0.internal']) {
      assert.equal(loadServiceConfig({ HTTP_HOST: host, INSECURE_BOARD: 'true' }, {}).httpHost, host);
    }
    const refused: Array<[string, RegExp]> = [
      ['999.1.1.1', /^LEASEBEAT_HTTP_HOST="999\.1\.1\.1" \(--http-host\) is not an IPv4 address \(four numbers from 0 to 255\)/],
      ['10.0.0', /is not an IPv4 address/],
      ['[::1]', /is not an IP address \(IPv6 without brackets\) or a host name/],
      ['web_1', /is not an IP address .* or a host name/],
    ];
    for (const [host, message] of refused) {
      assert.throws(() => loadServiceConfig({ HTTP_HOST: host, INSECURE_BOARD: 'true' }, {}), (error: unknown) => error instanceof ConfigError && message.test(error.message), host);
    }
  });

  it('takes every Redis topology URL: one server, Sentinel, Cluster', () => {
    for (const url of ['rediss://u:p@h:6380/2', 'redis+sentinel://a:26379,b:26379/mymaster', 'redis+cluster://a:7000,b:7001']) {
      assert.equal(loadServiceConfig({ REDIS_URL: url }, {}).redisUrl, url);
    }
  });

  it('refuses a braced key prefix on Redis Cluster (it would move the hash tag), naming the setting', () => {
    assert.throws(
      () => loadServiceConfig({ REDIS_URL: 'redis+cluster://a:7000', PREFIX: '{app}' }, {}),
      (error: unknown) => error instanceof ConfigError && /^LEASEBEAT_PREFIX="\{app\}" \(--prefix\) may not contain "\{" or "\}" on Redis Cluster/.test(error.message),
    );
    assert.equal(loadServiceConfig({ REDIS_URL: 'redis://a:6379', PREFIX: '{app}' }, {}).prefix, '{app}', 'one server has no slots');
  });

  it('takes BullMQ\'s prefix as a setting, hash-tagged on Redis Cluster, derived from the key prefix when unset', () => {
    assert.equal(loadServiceConfig({}, only({ BULL_PREFIX: 'queues' })).bullPrefix, 'queues');
    assert.equal(loadServiceConfig({}, only({ PREFIX: 'iso' })).bullPrefix, undefined, 'unset: derived where the topology is known');
    assert.equal(loadServiceConfig({ REDIS_URL: 'redis+cluster://a:7000', BULL_PREFIX: '{queues}' }, {}).bullPrefix, '{queues}');
    assert.throws(
      () => loadServiceConfig({ REDIS_URL: 'redis+cluster://a:7000', BULL_PREFIX: 'queues' }, {}),
      (error: unknown) => error instanceof ConfigError && /^LEASEBEAT_BULL_PREFIX="queues" \(--bull-prefix\) needs a hash tag on Redis Cluster.*\{queues\}/.test(error.message),
    );
  });

  it('a duration or list setting that is unset gets its default, and COMMAND_TIMEOUT is checked like the others', () => {
    assert.throws(() => loadServiceConfig({}, only({ COMMAND_TIMEOUT: 'later' })), /LEASEBEAT_COMMAND_TIMEOUT="later"/);
    assert.equal(loadServiceConfig({ COMMAND_TIMEOUT: '250ms' }, only({})).commandTimeoutMs, 250);
  });

  it("docs/configuration.md's table is the one generated from the schema", () => {
    const page = readFileSync(CONFIG_DOC, 'utf8').split('\n');
    const generated = withSettingsTable(page.join('\n')).split('\n');
    // Line by line: a whole-file assert.equal diffs 50 kB strings, which takes minutes.
    const at = generated.findIndex((line, i) => line !== page[i]);
    assert.equal(at === -1 && generated.length === page.length, true, `docs/configuration.md is out of date at line ${at + 1} (${JSON.stringify(generated[at])}): run npm run readme:config`);
  });
});
