import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { CLUSTER_BULL_PREFIX, defaultBullPrefix, hashTag, keySlot, parseRedisUrl, redact, RedisConnections, RedisTopologyError } from '../../src/redis/redis-topology.js';
import { KeySpace } from '../../src/redis/keys.js';
import { startRedisCluster, type TestRedisCluster } from '../support/redis-cluster.js';
import { startSentinelGroup, type TestSentinelGroup } from '../support/redis-sentinel.js';

describe('Redis URLs', () => {
  it('reads a single server, with credentials, TLS and a database', () => {
    const t = parseRedisUrl('rediss://app:s%3Acret@redis.example:6380/2?minReplicas=1');
    assert.equal(t.kind, 'standalone');
    assert.deepEqual(t.options, { username: 'app', password: 's:cret', tls: {}, host: 'redis.example', port: 6380, db: 2 });
    assert.equal(t.minReplicas, 1);
    assert.deepEqual(parseRedisUrl('redis://localhost').options, { host: 'localhost', port: 6379 });
  });

  it('reads a Sentinel group: sentinels, master name, data and sentinel passwords, TLS to both', () => {
    const t = parseRedisUrl('rediss+sentinel://:pw@s1:26379,s2,[::1]:26381/mymaster/3?sentinelPassword=spw&sentinelTls=true');
    assert.equal(t.kind, 'sentinel');
    if (t.kind !== 'sentinel') return;
    assert.deepEqual(t.options.sentinels, [{ host: 's1', port: 26379 }, { host: 's2', port: 26379 }, { host: '::1', port: 26381 }]);
    assert.equal(t.options.name, 'mymaster');
    assert.equal(t.options.db, 3);
    assert.equal(t.options.password, 'pw');
    assert.equal(t.options.sentinelPassword, 'spw');
    assert.deepEqual([t.options.tls, t.options.enableTLSForSentinelMode], [{}, true]);
    assert.equal(new RedisConnections(t).defaultMinReplicas(), 1);
  });

  it('reads a Cluster: seed nodes and a NAT map', () => {
    const t = parseRedisUrl('redis+cluster://:pw@10.0.0.1:7000,10.0.0.2:7001?natMap=10.0.0.1:7000=127.0.0.1:17000,10.0.0.2:7001=127.0.0.1:17001');
    assert.equal(t.kind, 'cluster');
    if (t.kind !== 'cluster') return;
    assert.deepEqual(t.nodes, [{ host: '10.0.0.1', port: 7000 }, { host: '10.0.0.2', port: 7001 }]);
    assert.deepEqual(t.options.natMap, { '10.0.0.1:7000': { host: '127.0.0.1', port: 17000 }, '10.0.0.2:7001': { host: '127.0.0.1', port: 17001 } });
    assert.equal(t.options.redisOptions.password, 'pw');
  });

  it('refuses what would be misread, naming the fix', () => {
    const refusals: Array<[string, RegExp]> = [
      ['http://x:6379', /unsupported Redis URL/],
      ['redis+sentinel://s1:26379', /needs the master name/],
      ['redis://a:1,b:2', /use redis\+sentinel:\/\/ or redis\+cluster:\/\//],
      ['redis+cluster://a:1/2', /only database 0/],
      ['redis://a:1?sentinelPassword=x', /applies only to/],
      ['redis://a:1?minReplica=1', /unknown option "minReplica"/],
      ['redis://a:1?minReplicas=-1', /minReplicas must be a whole number/],
      ['redis://a:99999', /bad port/],
      ['redis+cluster://a:1?natMap=a=b', /natMap entry/],
    ];
    for (const [url, message] of refusals) assert.throws(() => parseRedisUrl(url), (e: unknown) => e instanceof RedisTopologyError && message.test(e.message), url);
  });

  it('keeps passwords out of messages', () => {
    assert.equal(redact('redis://u:secret@h:1'), 'redis://u:***@h:1');
    assert.throws(() => parseRedisUrl('redis://u:secret@h:1?bogus=1'), (e: Error) => !e.message.includes('secret'));
    assert.equal(redact('redis+sentinel://h:1/m?sentinelPassword=top'), 'redis+sentinel://h:1/m?sentinelPassword=***');
  });
});

describe('Redis Cluster key rules', () => {
  it('computes slots as Redis does (CRC16 of the hash tag)', () => {
    // Values from `redis-cli CLUSTER KEYSLOT`.
    assert.equal(keySlot('foo'), 12182);
    assert.equal(keySlot('{user1000}.following'), keySlot('user1000'));
    assert.equal(keySlot('{}x'), keySlot('{}x'), 'an empty tag hashes the whole key');
    assert.equal(hashTag('{}x'), undefined);
  });

  it("puts the lease, the fence and every ledger key of a cluster in one slot (the Lua scripts' keys)", () => {
    const keys = new KeySpace('leasebeat', 'prod');
    const lease = 'leasebeat:{prod}:lease';
    const all = [lease, `${lease}:history`, keys.fence, keys.retiredGenerations, keys.paused, keys.ledger('a'), keys.ledgerIndex('a'), keys.pending('a'), keys.skips('a'), keys.jobState('a'), keys.members, keys.cordons, keys.memberHealth];
    assert.deepEqual(new Set(all.map(keySlot)).size, 1);
  });

  it('chooses a hash-tagged BullMQ prefix on Cluster and refuses one without a tag', () => {
    const cluster = RedisConnections.fromUrl('redis+cluster://127.0.0.1:7000');
    assert.equal(cluster.bullPrefix(undefined), CLUSTER_BULL_PREFIX);
    assert.equal(cluster.bullPrefix('{jobs}'), '{jobs}');
    assert.throws(() => cluster.bullPrefix('bull'), /no hash tag.*"\{bull\}"/);
    assert.throws(() => cluster.checkLeaseName('a{b}'), /may not contain/);
    assert.throws(() => cluster.checkLeaseName('prod', '{x}'), /prefix "\{x\}" may not contain/);
    const single = RedisConnections.fromUrl('redis://127.0.0.1:6379');
    assert.equal(single.bullPrefix(undefined), undefined, "BullMQ's own default elsewhere");
    assert.equal(single.defaultMinReplicas(), 0);
  });

  it('a key prefix other than the default moves BullMQ\'s prefix with it: a deployment is one unit', () => {
    const cluster = RedisConnections.fromUrl('redis+cluster://127.0.0.1:7000');
    const single = RedisConnections.fromUrl('redis://127.0.0.1:6379');
    assert.equal(single.bullPrefix(undefined, 'leasebeat'), undefined, 'the default deployment keeps BullMQ\'s default');
    assert.equal(single.bullPrefix(undefined, 'iso'), 'iso-bull');
    assert.equal(single.bullPrefix('jobs', 'iso'), 'jobs', 'an explicit pair');
    assert.equal(cluster.bullPrefix(undefined, 'leasebeat'), CLUSTER_BULL_PREFIX);
    assert.equal(cluster.bullPrefix(undefined, 'iso'), '{iso-bull}');
    assert.equal(defaultBullPrefix(undefined, false), undefined);
  });
});

describe('RedisConnections.reach: what answers at the URL is what the URL names (issue 19; real servers)', () => {
  let group: TestSentinelGroup;
  let cluster: TestRedisCluster;
  before(async () => {
    [group, cluster] = await Promise.all([startSentinelGroup(), startRedisCluster()]);
  });
  after(async () => {
    await Promise.all([group.close(), cluster.close()]);
  });

  const problem = async (url: string): Promise<string | undefined> => {
    try {
      await RedisConnections.fromUrl(url).reach(5_000);
      return undefined;
    } catch (error) {
      assert.ok(error instanceof RedisTopologyError, String(error));
      assert.equal(error.problem, 'config');
      return error.message;
    }
  };

  it('reaches a Sentinel group and a Cluster by their URLs, and names the server and the URL for a crossed one', { timeout: 60_000 }, async () => {
    assert.equal(await problem(group.url), undefined);
    assert.equal(await problem(cluster.url), undefined);
    const sentinel = `127.0.0.1:${group.sentinels[0]!.port}`;
    const node = /^redis\+cluster:\/\/([^,/?]+)/.exec(cluster.url)![1]!;
    assert.match((await problem(group.url.replace(`/${group.masterName}`, '/nope')))!, new RegExp(`monitors no master named "nope" \\(it monitors: ${group.masterName}\\): fix the name`));
    assert.match((await problem(`redis://${sentinel}`))!, new RegExp(`${sentinel} is a Sentinel, not a standalone Redis as redis:// expects: use redis\\+sentinel://${sentinel}/<master name> \\(it monitors: ${group.masterName}\\)`));
    assert.match((await problem(`redis://${node}`))!, new RegExp(`${node} is a Redis Cluster node, not a standalone Redis as redis:// expects: use redis\\+cluster://${node}`));
    assert.match((await problem(`redis+sentinel://${node}/x`))!, new RegExp(`${node} is a Redis Cluster node, not a Sentinel as redis\\+sentinel:// expects`));
  });

  it('a seed node that accepts connections and never answers (frozen) does not hold up the others: the Cluster is reached within the bound', { timeout: 60_000 }, async () => {
    const frozen = (await cluster.replicasOf(await cluster.primaryOf(0)))[0]!;
    const url = `redis+cluster://${[frozen, ...cluster.nodes.filter((n) => n !== frozen)].map((n) => `127.0.0.1:${n.port}`).join(',')}`;
    frozen.freeze();
    try {
      // Before, every seed's probe was awaited: the frozen one took the whole bound, and the start failed.
      await RedisConnections.fromUrl(url).reach(5_000);
    } finally {
      frozen.resume();
    }
  });
});
