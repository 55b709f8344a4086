import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import type { MemberRecord } from '../../src/members/record.js';
import type { MembersReport } from '../../src/members/status.js';
import { MemberStore } from '../../src/members/store.js';
import { KeySpace } from '../../src/redis/keys.js';
import { useRedis } from '../support/redis-server.js';
import { leasebeatCli } from './support.js';

const JOBS = new URL('./fixtures/jobs/', import.meta.url).pathname;

function record(identity: string, fields: Partial<MemberRecord> = {}): MemberRecord {
  return {
    identity,
    version: '0.1.0',
    startedAt: Date.UTC(2026, 0, 1),
    seq: 1,
    role: 'follower',
    workers: 'running',
    activeJobs: 1,
    activeJobIds: ['long/7'],
    cordoned: false,
    draining: false,
    ready: true,
    ...fields,
  };
}

describe('leasebeat cordon, uncordon, drain and status against registered members', () => {
  const redis = useRedis();
  let store: MemberStore;
  let env: Record<string, string>;

  before(async () => {
    store = new MemberStore(redis.client, new KeySpace());
    env = { LEASEBEAT_REDIS_URL: redis.server.url, LEASEBEAT_JOBS_DIR: JOBS };
    // Records as members write them; nobody runs here, so nobody obeys (or answers) a cordon.
    await store.beat(record('pod-a_1f2e'));
    await store.beat(record('pod-b_77c1'));
    await store.beat(record('worker-9', { role: 'leader', activeJobs: 0, activeJobIds: [] }));
  });

  it('names a member by its identity or a unique prefix, and refuses unknown or ambiguous ones', async () => {
    const unknown = await leasebeatCli(['cordon', 'nope'], env);
    assert.equal(unknown.code, 2);
    assert.match(unknown.stderr, /no member "nope" is registered/);
    const ambiguous = await leasebeatCli(['cordon', 'pod-'], env);
    assert.equal(ambiguous.code, 2);
    assert.match(ambiguous.stderr, /"pod-" matches 2 members \(pod-a_1f2e, pod-b_77c1\)/);

    const cordoned = await leasebeatCli(['cordon', 'pod-a', '--note', 'kernel update'], env);
    assert.equal(cordoned.code, 0, cordoned.stderr);
    assert.match(cordoned.stdout, /^cordoned pod-a_1f2e: /m);
    assert.equal((await store.cordons()).get('pod-a_1f2e')?.note, 'kernel update');

    const status = JSON.parse((await leasebeatCli(['status', '--json'], env)).stdout) as MembersReport;
    assert.deepEqual(
      status.members.map((m) => [m.identity, m.role, m.cordoned, m.cordonRequested, m.condition]),
      [
        ['worker-9', 'leader', false, false, null],
        ['pod-a_1f2e', 'follower', false, true, null],
        ['pod-b_77c1', 'follower', false, false, null],
      ],
      'the leader first; the cordon is requested but not yet obeyed; no judgement without a leader',
    );
    assert.equal(status.disruption, null);

    assert.match((await leasebeatCli(['uncordon', 'pod-a_1f2e'], env)).stdout, /^uncordoned pod-a_1f2e$/m);
    assert.match((await leasebeatCli(['uncordon', 'pod-a_1f2e'], env)).stdout, /^pod-a_1f2e was not cordoned$/m);
  });

  it('the member settings are checked at start-up, with the settings named', async () => {
    const result = await leasebeatCli(['status'], { ...env, LEASEBEAT_HEARTBEAT_INTERVAL: '10s', LEASEBEAT_MEMBER_GRACE: '15s' });
    assert.equal(result.code, 2);
    assert.match(result.stderr, /LEASEBEAT_MEMBER_GRACE \(15s\) must be more than twice LEASEBEAT_HEARTBEAT_INTERVAL \(10s\)/);
  });

  it('drain --wait gives up after --timeout with exit code 1 when the member never reports drained, and leaves it cordoned', async () => {
    // Another member that could lead, heard from just now: one silent past the grace could not, and the drain would be refused.
    await store.beat(record('worker-9', { role: 'leader', activeJobs: 0, activeJobIds: [] }));
    const drain = await leasebeatCli(['drain', 'pod-b', '--wait', '--timeout', '1s'], env);
    assert.equal(drain.code, 1);
    assert.match(drain.stdout, /^cordoned pod-b_77c1; waiting up to 1s for its active jobs to finish$/m);
    assert.match(drain.stderr, /pod-b_77c1 did not drain within 1s \(1 active job\(s\)\); it stays cordoned/);
    assert.equal((await store.cordons()).has('pod-b_77c1'), true);
    const bad = await leasebeatCli(['drain', 'pod-b', '--wait', '--timeout', 'soon'], env);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /--timeout "soon" is not a duration/);
  });
});
