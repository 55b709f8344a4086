import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import type { Redis } from 'ioredis';
import { LockConflictError } from '../../src/election/resource-lock.js';
import { RedisLeaseLock } from '../../src/election/redis-lock.js';
import type { LeaderElectionRecord } from '../../src/election/record.js';
import { RedisProcess } from '../support/redis-process.js';
import { useRedis } from '../support/redis-server.js';
import { until } from '../support/until.js';

const record = (holder: string, transitions: number): LeaderElectionRecord => ({
  holderIdentity: holder,
  leaseDurationSeconds: 2,
  acquireTime: Date.now(),
  renewTime: Date.now(),
  leaderTransitions: transitions,
});

describe('the Redis lock across a change of primary (replication epochs)', () => {
  const primary = useRedis();
  let replica: RedisProcess;
  let onReplica: Redis;

  before(async () => {
    replica = await RedisProcess.start((port) => ['--port', String(port), '--bind', '127.0.0.1', '--dir', primary.server.dir, '--dbfilename', `replica-${port}.rdb`, '--save', '', '--appendonly', 'no', '--replicaof', '127.0.0.1', String(primary.server.port), '--repl-diskless-sync-delay', '0']);
    onReplica = replica.client();
    await until('the replica to be in sync', async () => /slave0:.*state=online/.test(await primary.client.info('replication')));
  });
  primary.beforeClose(async () => {
    onReplica.disconnect();
    await replica.kill();
  });

  it('a record that a failover rolled back is continued by nobody, its holder included, and the next term starts a new generation', async () => {
    const signal = AbortSignal.timeout(20_000);
    const options = { name: 'epochs', replicationEpochs: true };
    const a = new RedisLeaseLock({ ...options, connection: primary.client, identity: 'A' });
    // Term 0 of A, replicated.
    await a.create(record('A', 0), signal);
    const replicated = await a.update(record('A', 0), (await a.get(signal)).version, signal);
    assert.equal(await primary.client.wait(1, 2_000), 1);

    // The replica is promoted (a failover) while A goes on writing to the old primary: a takeover of
    // its own record (term 1), which the promoted node never receives.
    await onReplica.call('REPLICAOF', 'NO', 'ONE');
    const lost = await a.update(record('A', 1), replicated, signal);
    assert.equal((await a.get(signal)).record.leaderTransitions, 1);

    // On the promoted node the record is A's term 0, rolled back. A's connection follows the promotion.
    const aAfter = new RedisLeaseLock({ ...options, connection: onReplica, identity: 'A' });
    const b = new RedisLeaseLock({ ...options, connection: onReplica, identity: 'B' });
    const seen = await b.get(signal);
    assert.deepEqual([seen.record.holderIdentity, seen.record.leaderTransitions], ['A', 0]);
    assert.match(seen.damaged ?? '', /before the last change of Redis primary/, 'the record is flagged: its holder is unknown until it expires');

    // A must not continue it: neither from its lost version nor from the version that survived, whose
    // token (generation, 1) it also handed out on the old primary.
    await assert.rejects(aAfter.update(record('A', 1), lost, signal), LockConflictError);
    await assert.rejects(aAfter.update(record('A', 1), replicated, signal), LockConflictError, 'the surviving version is not continued either');

    // Whoever takes it over (after a lease duration, as for a damaged record) starts a new generation:
    // no token of the old one can be handed out again.
    const taken = await b.update(record('B', 1), seen.version, signal);
    const after = await b.get(signal);
    assert.equal(after.damaged, undefined, 'written in the new epoch');
    assert.equal(after.record.holderIdentity, 'B');
    assert.notEqual((taken as unknown as { generation: string }).generation, (replicated as unknown as { generation: string }).generation, 'a new generation');
    // And the new term continues normally in its own epoch.
    await b.update(record('B', 1), taken, signal);
  });

  it('without replication epochs (one server) a restart does not cost a term', async () => {
    const signal = AbortSignal.timeout(10_000);
    const lock = new RedisLeaseLock({ name: 'no-epochs', connection: onReplica, identity: 'A' });
    await lock.create(record('A', 0), signal);
    const observed = await lock.get(signal);
    // A record written with another replication id (as after a restart) is not flagged when epochs are off.
    await onReplica.hset(lock.key, 'epoch', 'another');
    assert.equal((await lock.get(signal)).damaged, undefined);
    await lock.update(record('A', 0), observed.version, signal);
  });
});
