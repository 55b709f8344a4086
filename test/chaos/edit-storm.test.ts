import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { createAdmin, type Admin, type ScheduleSpec } from '../../src/index.js';
import { TickLedger } from '../../src/ledger/tick-ledger.js';
import { KeySpace } from '../../src/redis/keys.js';
import { explainFailure, FAST_ELECTION, killAll, startInstance, type Instance } from '../support/instance.js';
import { seededRandom } from '../support/race.js';
import { useRedis } from '../support/redis-server.js';
import { SCHEDULE_JOBS } from '../support/schedule-instance.js';
import { until } from '../support/until.js';

/**
 * The edit storm of issue 31, finding 1 (bullmq #3085's many clients upserting one id), under leader
 * faults: four clients keep upserting one schedule with specs that drop and restore ticks (every 1 s,
 * every 2 s, every third second) while the leader is killed or releases its lease every few seconds. The
 * audit reads Redis alone: the schedule's change feed says which version was stored when (Redis time),
 * each acknowledged upsert which spec that version is, the ledger and BullMQ what became of each tick.
 */
const ID = 'storm';
const SPECS: Array<{ spec: ScheduleSpec; periodS: number }> = [
  { spec: { job: 'work', every: '1s' }, periodS: 1 },
  { spec: { job: 'work', every: '2s' }, periodS: 2 },
  { spec: { job: 'work', schedule: '*/3 * * * * *' }, periodS: 3 },
];
const CLIENTS = 4;
const STORM_MS = 30_000;
/** A fault every this long, alternately a SIGKILL and a SIGTERM (a release) of the leader. */
const FAULT_EVERY_MS = 6_000;
/**
 * Around a fault, ticks may be missed while no leader runs (up to the lease, 2 s, and a takeover) and be
 * recorded skipped by the catch-up policy, or by a version written since (`rescheduled`, each by the
 * version that owed it): the audit asks those only not to run when not owed. So may a tick due shortly
 * before it whose run a write held (a worker hands a held run back for a second) until the fault: the
 * next leader decides it as a late staged run (issue 31, finding 3, is about that decision).
 */
const FAULT_REACH_MS = 5_000;
const FAULT_BEFORE_MS = 2_000;
/** A tick this close to a write is left out: which side of the write it fell on is a matter of microseconds. */
const WRITE_MARGIN_MS = 20;

describe('chaos: an edit storm on one schedule while leaders are killed and released (real processes)', () => {
  const redis = useRedis();
  const instances: Instance[] = [];
  redis.beforeClose(() => killAll(instances));

  // Todo: about one run in four still finds a tick its version lacks started, after a leader kill with
  // writes going on (the next leader's takeover decides a held run by a version other than the one in
  // force at its tick). Reported on issue 31; the run reports, not gates, until that is found.
  const todo = 'a held run after a leader kill is sometimes decided by another version than the one in force at its tick';
  it('every tick the version in force owes runs or is skipped by a fault, none it lacks starts', { timeout: 120_000, todo }, async (t) => {
    const ledger = new TickLedger(redis.client, new KeySpace());
    const env = { LEASEBEAT_REDIS_URL: redis.server.url, LEASEBEAT_JOBS_DIR: SCHEDULE_JOBS, LEASEBEAT_SHUTDOWN_TIMEOUT: '2s', ...FAST_ELECTION };
    let started = 0;
    const launch = (): void => void instances.push(startInstance(`storm-${started++}`, env));
    for (let i = 0; i < 3; i++) launch();
    const clients: Admin[] = Array.from({ length: CLIENTS }, () => createAdmin({ connection: redis.server.url, jobsDir: SCHEDULE_JOBS, who: 'storm' }));
    const specOf = new Map<number, (typeof SPECS)[number]>();
    const faults: number[] = [];
    try {
      const first = await clients[0]!.schedules.upsert(ID, SPECS[0]!.spec);
      specOf.set(first.version, SPECS[0]!);
      await explainFailure(until('a first run', async () => (await ledger.jobState(ID)).enqueued >= 2, 60_000, 100), instances);
      const from = Date.now() + 1_000;
      const stormEnds = Date.now() + STORM_MS;
      const writers = clients.map(async (client, i) => {
        const random = seededRandom(31 + i);
        while (Date.now() < stormEnds) {
          const pick = SPECS[Math.floor(random() * SPECS.length)]!;
          const { version } = await client.schedules.upsert(ID, pick.spec);
          specOf.set(version, pick);
          await sleep(150 + Math.floor(random() * 450));
        }
      });
      const faulting = (async () => {
        for (let n = 0; Date.now() + FAULT_EVERY_MS < stormEnds; n++) {
          await sleep(FAULT_EVERY_MS);
          const holder = (await ledger.fence()).holder;
          const leader = instances.find((instance) => instance.identity === holder && instance.child.exitCode === null);
          if (!leader) continue;
          faults.push(Date.now());
          leader.child.kill(n % 2 === 0 ? 'SIGKILL' : 'SIGTERM');
          launch();
        }
      })();
      await Promise.all([...writers, faulting]);
      const to = Date.now() - 1_000;
      // Settled: the last leader has decided (and workers run) every tick up to the storm's end.
      await explainFailure(until('the ticks of the storm settled', async () => ((await ledger.jobState(ID)).lastScheduledTick ?? 0) > to + 5_000, 30_000, 100), instances);
      await until('the last runs to finish', async () => (await redis.client.llen('bull:leasebeat:active')) === 0, 10_000, 100);

      // Which version was stored when, on Redis' clock (the feed's entry ids), and what each one owes.
      const feed = (await redis.client.xrange(new KeySpace().scheduleChanges, '-', '+'))
        .map(([entry, fields]) => ({ at: Number(entry.split('-')[0]), id: fields[1], version: Number(fields[3]) }))
        .filter((write) => write.id === ID);
      const ranges = await ledger.skippedRanges(ID);
      const violations: string[] = [];
      const counts = { owed: 0, ran: 0, skippedByFault: 0, notOwed: 0 };
      for (let tick = Math.ceil(from / 1_000) * 1_000; tick <= to; tick += 1_000) {
        if (feed.some((write) => Math.abs(write.at - tick) < WRITE_MARGIN_MS)) continue;
        const inForce = feed.filter((write) => write.at < tick).at(-1);
        const spec = inForce && specOf.get(inForce.version);
        assert.ok(spec, `the version in force at ${tick} was acknowledged to a client`);
        const owed = (tick / 1_000) % spec.periodS === 0;
        const state = (await ledger.tickState(ID, tick)) ?? ranges.find((range) => range.from <= tick && tick <= range.to)?.reason;
        const starts = Number((await redis.client.hget(`bull:leasebeat:${ID}@${tick}`, 'leasebeatStarts')) ?? 0);
        const afterFault = faults.some((at) => tick >= at - FAULT_BEFORE_MS && tick <= at + FAULT_REACH_MS);
        const near = feed.filter((write) => Math.abs(write.at - tick) < 2_500).map((write) => `v${write.version}@${write.at - tick}:${specOf.get(write.version)?.periodS}`);
        const where = `tick ${new Date(tick).toISOString()} (version ${inForce.version}, ${JSON.stringify(spec.spec)}): ${state ?? 'no record'}, ${starts} starts; writes around it ${near.join(' ')}; faults ${faults.map((at) => at - tick).join(' ')}`;
        if (!owed) {
          counts.notOwed++;
          if (starts > 0) violations.push(`ran though its version lacks it: ${where}`);
          continue;
        }
        counts.owed++;
        if (starts > 0 && state?.startsWith('enqueued|')) counts.ran++;
        else if (afterFault && state !== undefined && state !== 'skipped|removed' && !state.startsWith('unstaging|')) counts.skippedByFault++;
        else violations.push(`owed by the version in force, not run: ${where}`);
      }
      t.diagnostic(`${feed.length} versions, ${faults.length} leader faults; ticks owed ${counts.owed} (ran ${counts.ran}, skipped after a fault ${counts.skippedByFault}), not owed ${counts.notOwed}`);
      assert.deepEqual(violations, []);
      assert.ok(counts.owed > 5 && counts.notOwed > 3, 'the storm both kept and dropped ticks');
    } finally {
      await Promise.all(clients.map((client) => client.close()));
    }
  });
});
