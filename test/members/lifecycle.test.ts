import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Queue, type Job } from 'bullmq';
import { AdminError, createAdmin } from '../../src/admin/admin.js';
import { MemberStore } from '../../src/members/store.js';
import type { TickJobData } from '../../src/ledger/job-data.js';
import { KeySpace } from '../../src/redis/keys.js';
import type { StatusSnapshot } from '../../src/serving/sources.js';
import { FAST_ELECTION, killAll, startInstance, type Instance } from '../support/instance.js';
import { useRedis } from '../support/redis-server.js';
import { until } from '../support/until.js';
import { leasebeatCli } from './support.js';

const JOBS = new URL('./fixtures/gated-jobs/', import.meta.url).pathname;

/** Quick member and BullMQ timings, so that failures are detected and recovered within seconds. */
const MEMBER_TIMINGS = {
  LEASEBEAT_HEARTBEAT_INTERVAL: '250ms',
  LEASEBEAT_MEMBER_GRACE: '2s',
  LEASEBEAT_LOCK_DURATION: '2s',
  LEASEBEAT_STALLED_INTERVAL: '1s',
  LEASEBEAT_SHUTDOWN_TIMEOUT: '20s',
};


describe('member lifecycle with real `leasebeat start` processes on one Redis', () => {
  const redis = useRedis();
  const instances: Instance[] = [];
  const queues: Queue[] = [];
  /** Where the gates of `gated-run` runs live: a run ends when its gate file exists. */
  const gates = mkdtempSync(join(tmpdir(), 'leasebeat-gates-'));
  /** The data of a hand-added `gated-run` run that lasts until `openGate(id)`. */
  const gatedRun = (id: string): TickJobData<{ gate: string }> => ({
    tick: Date.now(),
    token: { generation: '', leaderTransitions: -1 },
    data: { gate: join(gates, id) },
    manual: true,
  });
  const openGate = (id: string): void => writeFileSync(join(gates, id), '');

  /** Settings of one test's cluster: its own lease name (hence its own member registry) and BullMQ prefix. */
  const clusterEnv = (cluster: string, extra: Record<string, string> = {}): Record<string, string> => ({
    LEASEBEAT_REDIS_URL: redis.server.url,
    LEASEBEAT_JOBS_DIR: JOBS,
    LEASEBEAT_LEASE_NAME: cluster,
    LEASEBEAT_BULL_PREFIX: `${cluster}-bull`,
    ...FAST_ELECTION,
    ...MEMBER_TIMINGS,
    ...extra,
  });
  const launch = (identity: string, env: Record<string, string>): Instance => {
    const instance = startInstance(identity, env);
    instances.push(instance);
    return instance;
  };
  const queue = (cluster: string, name: string): Queue => {
    const created = new Queue(name, { connection: redis.client, prefix: `${cluster}-bull` });
    queues.push(created);
    return created;
  };
  const httpUrl = async (instance: Instance): Promise<string> =>
    (await instance.waitForLog((l) => l.msg === 'HTTP server listening', 60_000)).url as string;
  const leaseHolder = (cluster: string): Promise<string | null> => redis.client.hget(`leasebeat:{${cluster}}:lease`, 'holderIdentity');
  const readyMembers = async (store: MemberStore, count: number): Promise<boolean> => {
    const view = await store.health();
    return view !== undefined && view.members.filter((m) => m.condition === 'Ready').length === count;
  };

  redis.beforeClose(async () => {
    killAll(instances);
    await Promise.all(queues.map((q) => q.close()));
  });
  after(() => rmSync(gates, { recursive: true, force: true }));

  it('SIGKILL mid-job: the member goes Unknown with its job on record, and the job completes on another instance', { timeout: 180_000 }, async (t) => {
    const store = new MemberStore(redis.client, new KeySpace('leasebeat', 'kill'));
    // The leader listens on a queue of its own, so the long run lands on a follower and the judge stays put.
    const leader = launch('kill-leader', clusterEnv('kill', { TEST_LONG_QUEUE: 'kill-leader-only' }));
    await leader.waitForLog((l) => l.msg === 'acquired the leader lease', 60_000);
    const followers = ['kill-f1', 'kill-f2'].map((id) => launch(id, clusterEnv('kill', { TEST_LONG_QUEUE: 'kill-long' })));
    await until('three Ready members', () => readyMembers(store, 3), 60_000);

    const work = queue('kill', 'kill-long');
    await work.add('gated-run', gatedRun('long-1'), { jobId: 'long-1', attempts: 1 });
    const victimId = await until('the run to start on a follower', async () => {
      for (const [identity, { record }] of await store.list()) if (record.activeJobIds.includes('kill-long/long-1')) return identity;
      return undefined;
    }, 30_000);
    const victim = followers.find((f) => f.identity === victimId)!;
    const survivor = followers.find((f) => f !== victim)!;
    const killedAt = Date.now();
    victim.child.kill('SIGKILL');
    // The killed run never finished; its rerun elsewhere may finish at once.
    openGate('long-1');

    const judged = await until('the killed member to be Unknown', async () => {
      const member = (await store.health())?.members.find((m) => m.identity === victimId);
      return member?.condition === 'Unknown' ? member : undefined;
    }, 30_000);
    const unknownAt = Date.now();
    assert.deepEqual(judged.activeJobsWhenUnknown, ['kill-long/long-1']);
    // Not before the grace period, less the heartbeat that may have been the last one before the kill.
    assert.ok(unknownAt - killedAt >= 1_000, `Unknown after the 2 s grace period, not at once (${unknownAt - killedAt} ms)`);
    const event = await leader.waitForLog((l) => l.event === 'ConditionChanged' && l.member === victimId);
    assert.deepEqual([event.from, event.to, event.activeJobIds], ['Ready', 'Unknown', ['kill-long/long-1']]);

    // The status API, the metrics and the CLI all show it, on any instance.
    const status = (await (await fetch(`${await httpUrl(survivor)}/api/status`)).json()) as StatusSnapshot;
    const row = status.cluster.members.find((m) => m.identity === victimId);
    assert.equal(row?.condition, 'Unknown');
    assert.deepEqual(row?.activeJobsWhenUnknown, ['kill-long/long-1']);
    assert.equal(status.cluster.disruption, 'Normal', 'one of three unhealthy is below the threshold');
    assert.equal(status.cluster.members[0]?.identity, leader.identity, 'the leader comes first');
    const metrics = await (await fetch(`${await httpUrl(leader)}/metrics`)).text();
    assert.match(metrics, /^leasebeat_members\{condition="Unknown"\} 1$/m);
    assert.match(metrics, /^leasebeat_members\{condition="Ready"\} 2$/m);
    assert.match(metrics, /^leasebeat_disruption_state 0$/m);
    const cli = await leasebeatCli(['status'], clusterEnv('kill'));
    assert.equal(cli.code, 0, cli.stderr);
    assert.match(cli.stdout, /^disruption: Normal \(judged by kill-leader\)$/m);
    assert.match(cli.stdout, new RegExp(`^${victimId}\\s+Unknown\\s+follower\\s+.*active when Unknown: kill-long/long-1$`, 'm'));

    const job = await until(
      'the run to complete on another instance',
      async () => {
        const current = (await work.getJob('long-1')) as Job<TickJobData, { ranOn: string }> | undefined;
        return current?.finishedOn ? current : undefined;
      },
      60_000,
    );
    const completedAt = Date.now();
    assert.equal(await job.getState(), 'completed');
    assert.equal(job.returnvalue.ranOn, survivor.identity);
    assert.equal(job.stalledCounter, 1, 'recovered by BullMQ as a stalled job');
    t.diagnostic(`SIGKILL → member Unknown: ${unknownAt - killedAt} ms (grace 2 s, heartbeat 250 ms)`);
    t.diagnostic(`SIGKILL → run restarted elsewhere: ${job.processedOn! - killedAt} ms (lockDuration 2 s, stalledInterval 1 s)`);
    t.diagnostic(`SIGKILL → run completed elsewhere: ${completedAt - killedAt} ms`);
  });

  it('cordon releases leadership to a follower within about a RetryPeriod, drains, and uncordon brings it back', { timeout: 180_000 }, async (t) => {
    const store = new MemberStore(redis.client, new KeySpace('leasebeat', 'cordon'));
    // A 10 s lease: a takeover within a few seconds can only come from the cordoned leader's release.
    const election = { LEASEBEAT_LEASE_DURATION: '10s', LEASEBEAT_RENEW_DEADLINE: '5s', LEASEBEAT_RETRY_PERIOD: '250ms' };
    const leader = launch('cordon-leader', clusterEnv('cordon', { ...election, TEST_LONG_QUEUE: 'cordon-leader-only' }));
    await leader.waitForLog((l) => l.msg === 'acquired the leader lease', 60_000);
    const followers = ['cordon-f1', 'cordon-f2'].map((id) => launch(id, clusterEnv('cordon', { ...election, TEST_LONG_QUEUE: 'cordon-long' })));
    await until('three Ready members', () => readyMembers(store, 3), 60_000);

    const mine = queue('cordon', 'cordon-leader-only');
    // Gated: the run is still active when the draining report is checked, however slow the takeover is.
    await mine.add('gated-run', gatedRun('drain-1'), { jobId: 'drain-1', attempts: 1 });
    await until('the run to start on the leader', async () => (await store.get(leader.identity))?.activeJobIds.includes('cordon-leader-only/drain-1'), 30_000);

    const drain = leasebeatCli(['drain', leader.identity, '--wait', '--timeout', '60s'], clusterEnv('cordon'));
    await until('the cordon to be stored', async () => (await redis.client.hexists('leasebeat:{cordon}:cordons', leader.identity)) === 1, 30_000);
    const cordonedAt = Date.now();
    const successor = await until('a follower to lead', async () => {
      const holder = await leaseHolder('cordon');
      return holder && holder !== leader.identity ? holder : undefined;
    }, 30_000);
    const newLeaderAt = Date.now();
    assert.ok(followers.some((f) => f.identity === successor));
    assert.ok(newLeaderAt - cordonedAt < 5_000, `takeover in ${newLeaderAt - cordonedAt} ms, well inside the 10 s lease`);
    await leader.waitForLog((l) => l.msg === 'released the lease');

    const draining = await until('the leader to report draining', async () => {
      const record = await store.get(leader.identity);
      return record?.cordoned && record.draining ? record : undefined;
    }, 30_000);
    assert.deepEqual([draining.role, draining.workers, draining.activeJobs], ['follower', 'draining', 1]);
    const releasedAt = Date.now();
    openGate('drain-1');

    const drained = await drain;
    const drainedAt = Date.now();
    assert.equal(drained.code, 0, drained.stderr);
    assert.match(drained.stdout, /^drained cordon-leader: cordoned, no active jobs$/m);
    const first = (await mine.getJob('drain-1')) as Job<TickJobData, { ranOn: string }>;
    assert.equal(await first.getState(), 'completed');
    assert.equal(first.returnvalue.ranOn, leader.identity, 'the cordoned member finished its own run');
    assert.ok(first.finishedOn! <= drainedAt, 'drain --wait returned only after the run finished');
    const record = await store.get(leader.identity);
    assert.deepEqual([record?.cordoned, record?.draining, record?.workers, record?.activeJobs], [true, false, 'paused', 0]);

    // Cordoned: a new run waits, however many heartbeats pass.
    openGate('drain-2');
    await mine.add('gated-run', gatedRun('drain-2'), { jobId: 'drain-2', attempts: 1 });
    await sleep(2_000);
    assert.equal(await mine.getJobState('drain-2'), 'waiting');

    const uncordon = await leasebeatCli(['uncordon', 'cordon-le'], clusterEnv('cordon'));
    assert.equal(uncordon.code, 0, uncordon.stderr);
    assert.match(uncordon.stdout, /^uncordoned cordon-leader$/m);
    await until('the waiting run to complete', async () => (await mine.getJobState('drain-2')) === 'completed', 30_000);
    assert.equal(((await mine.getJob('drain-2')) as Job<TickJobData, { ranOn: string }>).returnvalue.ranOn, leader.identity);
    await until('the member to campaign again', async () =>
      leader.logs.filter((l) => l.msg === 'attempting to acquire the leader lease').length === 2 && (await store.get(leader.identity))?.cordoned === false,
      30_000,
    );
    t.diagnostic(`cordon of the leader → a follower leads: ${newLeaderAt - cordonedAt} ms (RetryPeriod 250 ms, heartbeat 250 ms, lease 10 s)`);
    t.diagnostic(`cordon → drain --wait returned: ${drainedAt - cordonedAt} ms (its active run was let finish ${releasedAt - cordonedAt} ms after the cordon)`);
  });

  it('after a SIGKILL and a change of leader, the new leader judges the dead member Unknown from its first pass, by its last write in Redis', { timeout: 120_000 }, async (t) => {
    const store = new MemberStore(redis.client, new KeySpace('leasebeat', 'handover'));
    const leader = launch('handover-leader', clusterEnv('handover'));
    await leader.waitForLog((l) => l.msg === 'acquired the leader lease', 60_000);
    const [dead, heir] = ['handover-dead', 'handover-heir'].map((id) => launch(id, clusterEnv('handover')));
    await until('three Ready members', () => readyMembers(store, 3), 60_000);

    dead!.child.kill('SIGKILL');
    await until("the dead member's last write to be older than the 2 s grace, by Redis' clock", async () => ((await store.list()).get(dead!.identity)?.ageMs ?? 0) > 2_000, 30_000);
    leader.child.kill('SIGTERM');
    // Polled every 25 ms, so this is the heir's first judgement (it publishes one per 250 ms heartbeat).
    const first = await until('the heir to publish its first judgement', async () => {
      const view = await store.health();
      return view?.leader === heir!.identity ? view : undefined;
    }, 30_000);
    const judged = first.members.find((m) => m.identity === dead!.identity);
    assert.equal(judged?.condition, 'Unknown', 'not Ready for a grace period because the judge is new');
    assert.ok(judged.heartbeatAgeMs > 2_000, `its age counts from its last write (${judged.heartbeatAgeMs} ms)`);
    assert.deepEqual(first.members.find((m) => m.identity === heir!.identity)?.condition, 'Ready');
    t.diagnostic(`the dead member as the heir first judged it: Unknown, last heard ${judged.heartbeatAgeMs} ms before`);
  });

  it('refuses a cordon or drain that leaves no member able to lead, in one line with exit 2, unless forced', { timeout: 120_000 }, async () => {
    const store = new MemberStore(redis.client, new KeySpace('leasebeat', 'last'));
    const env = clusterEnv('last');
    const leader = launch('last-leader', env);
    await leader.waitForLog((l) => l.msg === 'acquired the leader lease', 60_000);
    const [dead, spare] = ['last-dead', 'last-spare'].map((id) => launch(id, env));
    await until('three Ready members', () => readyMembers(store, 3), 60_000);
    dead!.child.kill('SIGKILL');
    await until('the leader to judge the killed member Unknown', async () =>
      (await store.health())?.members.find((m) => m.identity === dead!.identity)?.condition === 'Unknown',
      30_000,
    );

    const cordon = await leasebeatCli(['cordon', spare!.identity], env);
    assert.equal(cordon.code, 0, 'the leader can still lead');
    for (const args of [['drain', leader.identity, '--wait', '--timeout', '30s'], ['cordon', leader.identity]]) {
      const refused = await leasebeatCli(args, env);
      assert.equal(refused.code, 2, `${args.join(' ')}: ${refused.stdout}${refused.stderr}`);
      assert.equal(refused.stdout, '');
      assert.match(
        refused.stderr,
        /^leasebeat: refused: last-leader is the last member that can lead \(last-dead Unknown, last-spare (cordoned|cordon requested)\); .*or pass --force\n$/,
      );
    }
    assert.deepEqual([...(await store.cordons()).keys()], [spare!.identity], 'nothing was stored for the leader');
    assert.equal(await leaseHolder('last'), leader.identity, 'it still leads');

    const admin = createAdmin({ connection: redis.server.url, leaseName: 'last', bullPrefix: 'last-bull' });
    try {
      await assert.rejects(admin.cordon(leader.identity), (error: unknown) => error instanceof AdminError && error.code === 'no-eligible-leader');
    } finally {
      await admin.close();
    }
    // Forced: done as asked, and the lease is released.
    const forced = await leasebeatCli(['drain', leader.identity, '--force', '--wait', '--timeout', '30s'], env);
    assert.equal(forced.code, 0, forced.stderr);
    assert.match(forced.stdout, /^drained last-leader: cordoned, no active jobs$/m);
    await until('the lease to be released', async () => (await leaseHolder('last')) === '', 30_000);
  });

  it('SIGTERM drains: the member reports draining, its active run finishes, then it exits and leaves the registry', { timeout: 120_000 }, async (t) => {
    const store = new MemberStore(redis.client, new KeySpace('leasebeat', 'term'));
    const instance = launch('term-only', clusterEnv('term', { TEST_LONG_QUEUE: 'term-long' }));
    await until('a Ready member', () => readyMembers(store, 1), 60_000);
    const work = queue('term', 'term-long');
    await work.add('gated-run', gatedRun('term-1'), { jobId: 'term-1', attempts: 1 });
    await until('the run to start', async () => (await store.get(instance.identity))?.activeJobs === 1, 30_000);

    const signalledAt = Date.now();
    instance.child.kill('SIGTERM');
    const draining = await until('the record to say draining', async () => {
      const record = await store.get(instance.identity);
      return record?.draining ? record : undefined;
    }, 30_000);
    assert.deepEqual([draining.ready, draining.reason, draining.activeJobIds], [false, 'shutting down', ['term-long/term-1']]);
    const releasedAt = Date.now();
    openGate('term-1');

    assert.equal(await instance.exited(), 0);
    const exitedAt = Date.now();
    const job = (await work.getJob('term-1')) as Job<TickJobData, { ranOn: string }>;
    assert.equal(await job.getState(), 'completed');
    assert.equal(job.returnvalue.ranOn, instance.identity);
    assert.ok(job.finishedOn! <= exitedAt, 'the run finished before the process exited');
    assert.equal(await store.get(instance.identity), undefined, 'a clean exit leaves the registry');
    t.diagnostic(`SIGTERM → exit: ${exitedAt - signalledAt} ms, of which ${releasedAt - signalledAt} ms before the run was let finish`);
  });

  it('SIGTERM with a run that ignores its abort signal past LEASEBEAT_SHUTDOWN_TIMEOUT: exit 0 within the timeout, the member leaves, the run restarts elsewhere as stalled', { timeout: 120_000 }, async (t) => {
    const store = new MemberStore(redis.client, new KeySpace('leasebeat', 'abandon'));
    const shutdownTimeoutMs = 2_000;
    const env = clusterEnv('abandon', { TEST_LONG_QUEUE: 'abandon-long', LEASEBEAT_SHUTDOWN_TIMEOUT: `${shutdownTimeoutMs}ms` });
    const first = launch('abandon-first', env);
    await until('a Ready member', () => readyMembers(store, 1), 60_000);
    const work = queue('abandon', 'abandon-long');
    // The gate stays shut until a successor runs it again: the first run never ends on its own.
    await work.add('gated-run', gatedRun('abandon-1'), { jobId: 'abandon-1', attempts: 1 });
    await until('the run to start', async () => (await store.get(first.identity))?.activeJobs === 1, 30_000);

    const signalledAt = Date.now();
    first.child.kill('SIGTERM');
    assert.equal(await first.exited(), 0, 'a shutdown that abandons a run is still a clean one');
    const exitedAt = Date.now();
    // At least the drain timeout (the run had its chance); well under the CLI's hard budget (timeout + RenewDeadline + 5 s), which exits 1.
    assert.ok(exitedAt - signalledAt >= shutdownTimeoutMs, `drained for the timeout before abandoning the run (${exitedAt - signalledAt} ms)`);
    assert.ok(exitedAt - signalledAt < shutdownTimeoutMs + 4_000, `exit ${exitedAt - signalledAt} ms after SIGTERM, bounded by the 2 s timeout`);
    assert.ok(first.logs.some((l) => l.msg === 'gated run: abort signal ignored'), 'the handler was told to stop at the timeout');
    assert.equal(await store.get(first.identity), undefined, 'a clean exit leaves the registry');
    assert.equal(await work.getJobState('abandon-1'), 'active', 'the abandoned run stays active, under a lock nobody renews');

    // BullMQ's stalled-job check hands it to the next worker on the queue once its lock (2 s) expires.
    const successor = launch('abandon-second', env);
    await until('the run to restart on the successor', async () => (await store.get(successor.identity))?.activeJobIds.includes('abandon-long/abandon-1'), 60_000);
    const restartedAt = Date.now();
    openGate('abandon-1');
    const job = await until('the run to complete on the successor', async () => {
      const current = (await work.getJob('abandon-1')) as Job<TickJobData, { ranOn: string }> | undefined;
      return current?.finishedOn ? current : undefined;
    }, 30_000);
    assert.equal(await job.getState(), 'completed');
    assert.equal(job.returnvalue.ranOn, successor.identity);
    assert.equal(job.stalledCounter, 1, 'recovered by BullMQ as a stalled job');
    t.diagnostic(`SIGTERM → exit 0: ${exitedAt - signalledAt} ms (LEASEBEAT_SHUTDOWN_TIMEOUT 2 s)`);
    t.diagnostic(`successor started → run restarted there: ${restartedAt - exitedAt} ms after the exit (lockDuration 2 s, stalledInterval 1 s)`);
  });
});
