import assert from 'node:assert/strict';
import { it } from 'node:test';
import { AIMED_KILLS } from '../../scripts/chaos/plan.js';
import { formatSpread } from '../../scripts/chaos/report.js';
import { runChaos } from '../../scripts/chaos/suite.js';

/**
 * Seeds whose schedules cover most fault kinds of the lock within the run (each aimed at the leader where
 * it can be); CHAOS_SEED replays another one.
 */
const SEEDS = { redis: 34, kubernetes: 12 } as const;
const FAULTS_MS = 65_000;
/**
 * The faults that found the single-Redis bugs come first, whatever the seed: the leader frozen with its
 * renewal applied but unanswered (twice: with these seeds at least once as the reply lands, which is
 * what let a resumed leader take the lease back), and a Redis restart followed by a leader kill before
 * its retries of the ticks that failed meanwhile.
 */
const LEAD = ['freeze-in-renewal', 'redis-restart-kill-leader', 'freeze-in-renewal'];
/**
 * On replicated Redis, shorter runs led by the faults of the topology: the primary frozen past
 * the failure detector (a stale primary resumes), killed during steady ticking, a replica restarted, and a
 * leader killed.
 * The Redis lock on Sentinel, the Kubernetes lock on Cluster.
 */
const REPLICATED_FAULTS_MS = 60_000;
/** With a leader kill, so that the lease changes hands (the Kubernetes lock is not touched by Redis' faults). */
const REPLICATED_LEAD = ['primary-freeze', 'primary-kill', 'replica-restart', 'kill-leader'];

/**
 * Exactly once on Cluster (BullMQ and the ledger on two shards), led by three aimed kills: BullMQ's
 * primary right after a handler returned, and while a staged run waits in the delayed set; the ledger's
 * right after a claim. Before workers recorded their takes and finishes durably this failed: the run
 * whose finish the failover lost ran twice, and the staged run was lost.
 */
const AIMED_LEAD = [...AIMED_KILLS];
/** A bound on how far a kill may land from the instant it aims at (measured: 0–4 ms). */
const AIM_GAP_MS = 100;

/**
 * The chaos runs, one file each (test/chaos/chaos-*.test.ts) so that they run beside the rest of the
 * suite. `draws`: how many faults beyond the lead must fit (a topology's faults take longer: fewer fit).
 */
export const CHAOS_CASES = {
  redis: { lock: 'redis', redis: 'single', seed: SEEDS.redis, faultsMs: FAULTS_MS, lead: LEAD, draws: 2 },
  kubernetes: { lock: 'kubernetes', redis: 'single', seed: SEEDS.kubernetes, faultsMs: FAULTS_MS, lead: LEAD, draws: 2 },
  sentinel: { lock: 'redis', redis: 'sentinel', seed: 5, faultsMs: REPLICATED_FAULTS_MS, lead: REPLICATED_LEAD, draws: 1 },
  kubernetesOnCluster: { lock: 'kubernetes', redis: 'cluster', seed: 6, faultsMs: REPLICATED_FAULTS_MS, lead: REPLICATED_LEAD, draws: 1 },
  aimedOnCluster: { lock: 'redis', redis: 'cluster', seed: 1, faultsMs: REPLICATED_FAULTS_MS, lead: AIMED_LEAD, draws: 0 },
} as const;

/** Registers one chaos run as a test: the run, then every invariant and the faults it must have seen. */
export function chaosTest({ lock, redis, seed: defaultSeed, faultsMs, lead, draws }: (typeof CHAOS_CASES)[keyof typeof CHAOS_CASES]): void {
  const on = redis === 'single' ? '' : ` on Redis ${redis}`;
  it(`chaos, ${lock} lock${on}: 3 real instances under ${faultsMs / 1000} s of seeded faults; every invariant holds`, { timeout: 330_000 }, async (t) => {
    const seed = Number(process.env.CHAOS_SEED ?? defaultSeed);
    const { report, outDir } = await runChaos({ lock, redis, instances: 3, durationMs: faultsMs, seed, faults: { lead: [...lead] } });
    t.diagnostic(`seed ${seed}; replay: ${report.command}; report: ${outDir}/report.md`);
    t.diagnostic(`faults: ${JSON.stringify(report.faultCounts)}; ${report.terms.length} terms over ${report.processes} processes`);
    t.diagnostic(`failover (fault → first enqueue of a newer term) min/median/p99/max: ${formatSpread(report.failover.all)}`);
    t.diagnostic(`ticks: ${JSON.stringify(report.ticks)}; runs per job ${JSON.stringify(report.runsPerJob)}`);
    // Every broken invariant at once, not only the first.
    const broken = report.invariants.filter((i) => !i.ok).map((i) => `${i.name}: ${i.violationCount} violation(s): ${i.violations.join(' | ')}`);
    assert.deepEqual(broken, [], `report: ${outDir}/report.md`);
    for (const invariant of report.invariants) assert.ok(invariant.checked > 0, `${invariant.name}: checked nothing`);
    // The lead, and more drawn from the bag.
    const minimum = lead.length + draws;
    assert.ok(report.faults.length >= minimum, `expected at least ${minimum} faults, got ${report.faults.length}`);
    for (const name of lead) {
      // Bag names: `kill-leader` is a `kill` aimed at the leader.
      const kind = name === 'kill-leader' || name === 'kill-follower' ? 'kill' : name;
      const injected = report.faults.filter((f) => f.kind === kind && !f.detail.startsWith('skipped'));
      assert.ok(injected.length > 0, `${kind} was injected: ${JSON.stringify(report.faults.filter((f) => f.kind === kind))}`);
      for (const { aim } of injected.filter((f) => f.aim)) assert.ok(aim!.gapMs <= AIM_GAP_MS, `${kind} killed ${aim!.gapMs} ms after ${aim!.event}`);
    }
    // L1–L3 are judged from the lock's own history: every write, not a sample of the record.
    assert.equal(report.lease.source, lock === 'kubernetes' ? 'api' : 'stream');
    if (redis === 'single') {
      assert.ok(report.lease.holderChanges >= 2, `the lock's history shows ${report.lease.holderChanges} holder changes`);
      assert.ok(report.faults.some((f) => f.wasLeader && (f.kind === 'kill' || f.kind === 'stop')), 'a leader was crashed or stopped');
      assert.ok(report.failover.gaps.length >= 2, 'leadership changed hands at least twice');
    } else {
      t.diagnostic(`Redis failover (fault → first add after the promotion): ${formatSpread(report.redisFailover.all)}`);
      // A freeze may end before the sentinels promote; the kill always leads to a promotion.
      assert.ok(report.redisFailover.all && report.redisFailover.all.n >= 1, 'production resumed after a promotion');
    }
    assert.ok(report.ticks['every-second']!.enqueued >= faultsMs / 1000 - 15, 'the per-second job kept ticking through the faults');
    // The schedules client wrote through the faults: creates, data and interval edits, removes, re-creates.
    const schedules = report.schedules!;
    t.diagnostic(`schedules: writes ${JSON.stringify(schedules.writes)}; ${schedules.runs} runs; ticks ${JSON.stringify(schedules.ticks)}`);
    const { create, remove, 'edit-data': edits, 'edit-interval': intervals } = schedules.writes;
    assert.ok(create >= 8 && remove >= 3 && edits >= 10 && intervals >= 2, `the client wrote too little: ${JSON.stringify(schedules.writes)}`);
    assert.ok(schedules.runs >= faultsMs / 1000, `${schedules.runs} runs of the schedules`);
  });
}
