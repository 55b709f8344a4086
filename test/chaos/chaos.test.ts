import assert from 'node:assert/strict';
import { it } from 'node:test';
import { formatSpread } from '../../scripts/chaos/report.js';
import { runChaos } from '../../scripts/chaos/suite.js';

/**
 * Seeds whose schedules cover every fault kind of the lock within the run (each aimed at the leader where
 * it can be); CHAOS_SEED replays another one.
 */
const SEEDS = { redis: 34, kubernetes: 12 } as const;
const FAULTS_MS = 65_000;

for (const lock of ['redis', 'kubernetes'] as const) {
  it(`chaos, ${lock} lock: 3 real instances under ${FAULTS_MS / 1000} s of seeded faults; every invariant holds`, { timeout: 330_000 }, async (t) => {
    const seed = Number(process.env.CHAOS_SEED ?? SEEDS[lock]);
    const { report, outDir } = await runChaos({ lock, instances: 3, durationMs: FAULTS_MS, seed });
    t.diagnostic(`seed ${seed}; replay: ${report.command}; report: ${outDir}/report.md`);
    t.diagnostic(`faults: ${JSON.stringify(report.faultCounts)}; ${report.terms.length} terms over ${report.processes} processes`);
    t.diagnostic(`failover (fault → first enqueue of a newer term) min/median/p99/max: ${formatSpread(report.failover.all)}`);
    t.diagnostic(`ticks: ${JSON.stringify(report.ticks)}; runs per job ${JSON.stringify(report.runsPerJob)}`);
    for (const invariant of report.invariants) {
      assert.ok(invariant.ok, `${invariant.name}: ${invariant.violationCount} violation(s): ${invariant.violations.join(' | ')}`);
      assert.ok(invariant.checked > 0, `${invariant.name}: checked nothing`);
    }
    assert.ok(report.faults.length >= 5, `expected at least 5 faults, got ${report.faults.length}`);
    assert.ok(report.faults.some((f) => f.wasLeader && (f.kind === 'kill' || f.kind === 'stop')), 'a leader was crashed or stopped');
    assert.ok(report.failover.gaps.length >= 2, 'leadership changed hands at least twice');
    assert.ok(report.ticks['every-second']!.enqueued >= 50, 'the per-second job kept ticking through the faults');
  });
}
