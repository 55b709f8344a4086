import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import { AuditLog } from '../../src/admin/audit-log.js';
import { directWrites } from '../../src/redis/durability.js';
import { AUDIT_IDS_PER_NAME, KeySpace } from '../../src/redis/keys.js';
import { auditIndexIds } from '../support/keyspace.js';
import { useRedis } from '../support/redis-server.js';

describe('AuditLog: one capped stream for the deployment, read by name through its index (real Redis)', () => {
  const redis = useRedis({ flush: true });
  const keys = new KeySpace();
  let audit: AuditLog;
  beforeEach(() => {
    audit = new AuditLog(redis.client, keys, directWrites(redis.client));
  });
  const notes = async (name: string, limit: number, log = audit): Promise<string[]> => (await log.history(name, limit)).map((entry) => String(entry.detail.note));

  it("answers only the name's entries, newest first, at most `limit`, from one stream and one index", async () => {
    for (let n = 1; n <= 5; n++) {
      for (const name of ['a', 'b', 'c']) await audit.record(name, 'pause', `${name}@ops`, { note: `${name}${n}` });
    }
    assert.deepEqual(await notes('b', 3), ['b5', 'b4', 'b3']);
    assert.deepEqual(await notes('a', 20), ['a5', 'a4', 'a3', 'a2', 'a1']);
    const [newest] = await audit.history('c', 1);
    assert.deepEqual({ action: newest!.action, by: newest!.by, detail: newest!.detail }, { action: 'pause', by: 'c@ops', detail: { note: 'c5' } });
    assert.ok(Math.abs(Date.parse(newest!.at) - Date.now()) < 60_000, newest!.at);
    assert.deepEqual(await audit.history('nobody', 5), []);
    assert.deepEqual((await redis.client.keys('*')).sort(), [keys.audit, keys.auditIndex], 'no key per name');
    assert.equal(await redis.client.xlen(keys.audit), 15);
  });

  it(`keeps the newest ${AUDIT_IDS_PER_NAME} ids of a name, which bounds what history answers`, async () => {
    for (let n = 1; n <= AUDIT_IDS_PER_NAME + 5; n++) await audit.record('busy', 'pause', 'ops', { note: String(n) });
    assert.equal((await auditIndexIds(redis.client, 'busy', keys)).length, AUDIT_IDS_PER_NAME);
    const history = await notes('busy', 1_000);
    assert.equal(history.length, AUDIT_IDS_PER_NAME);
    assert.deepEqual(history.slice(0, 2), [String(AUDIT_IDS_PER_NAME + 5), String(AUDIT_IDS_PER_NAME + 4)]);
  });

  it('trims the stream to its cap as it writes, and takes the trimmed ids out of the index', async () => {
    const capped = new AuditLog(redis.client, keys, directWrites(redis.client), 4);
    await capped.record('gone', 'pause', 'ops', { note: 'g1' });
    await capped.record('gone', 'resume', 'ops', { note: 'g2' });
    for (let n = 1; n <= 4; n++) await capped.record('kept', 'pause', 'ops', { note: `k${n}` });
    assert.equal(await redis.client.xlen(keys.audit), 4);
    assert.deepEqual(await notes('kept', 10, capped), ['k4', 'k3', 'k2', 'k1']);
    assert.deepEqual(await auditIndexIds(redis.client, 'gone', keys), [], 'a name whose entries were all trimmed leaves the index');
    assert.deepEqual(await notes('gone', 10, capped), []);
    await capped.record('kept', 'pause', 'ops', { note: 'k5' });
    assert.deepEqual(await notes('kept', 10, capped), ['k5', 'k4', 'k3', 'k2']);
    assert.equal((await auditIndexIds(redis.client, 'kept', keys)).length, 4);
  });

  it('a read drops the ids whose entries are gone from the stream (trimmed by hand)', async () => {
    for (let n = 1; n <= 3; n++) await audit.record('old', 'pause', 'ops', { note: `o${n}` });
    await audit.record('new', 'pause', 'ops', { note: 'n1' });
    await redis.client.xtrim(keys.audit, 'MAXLEN', 2);
    assert.deepEqual(await notes('old', 1), ['o3']);
    assert.equal((await auditIndexIds(redis.client, 'old', keys)).length, 1, 'the trimmed ids left its index entry');
    await redis.client.xtrim(keys.audit, 'MAXLEN', 1);
    assert.deepEqual(await notes('old', 5), []);
    assert.equal(await redis.client.hexists(keys.auditIndex, 'old'), 0, 'and a name with none left goes');
    assert.deepEqual(await notes('new', 5), ['n1']);
  });
});
