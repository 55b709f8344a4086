import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { InstancePrecisionResult, InstanceRun } from '../../bench/instance-precision.js';
import type { RedisBytesResult } from '../../bench/redis-bytes.js';
import { addBaselineCell, instancePrecisionRows, redisBytesRows } from '../../bench/versus-rows.js';

const run = (system: InstanceRun['system'], scenario: InstanceRun['scenario'], schedules: number, p99: number): InstanceRun => ({
  system,
  scenario,
  schedules,
  startLagMs: { n: schedules * 3, min: 1, median: p99 / 2, p99, max: p99 + 1 },
  delivered: schedules * 3,
  expected: schedules * 3,
  setupMs: 1000,
  peakRssMiB: 200,
});

/** Three rounds at the sizes: this commit's p99 `ours`, the baseline's `theirs`, BullMQ's 1,400 ms (ours under 700 meets the goal). */
function instanceResult(ours: number, theirs: number): InstancePrecisionResult {
  const round = [1000, 10_000].flatMap((size) => [run('leasebeat', 'file', size, ours), run('baseline', 'file', size, theirs), run('bullmq', 'file', size, 1400)]);
  const runtime = [run('leasebeat', 'runtime', 10_000, ours), { ...run('baseline', 'runtime', 10_000, 0), unsupported: 'no runtime schedules' }];
  return { commit: 'abc1234', baseline: { label: '7c89ce3', commit: '7c89ce3' }, sizes: [1000, 10_000], rounds: 3, runs: [round, round, round, runtime, runtime, runtime].flat() };
}

const cells = (row: string): string[] => row.split('|').slice(1, -1).map((cell) => cell.trim());

describe('bench rows against a --baseline commit', () => {
  it('a whole-instance row 10 % or less worse than the baseline is not flagged; more is, with its share', () => {
    const [within] = instancePrecisionRows(instanceResult(660, 600), true);
    assert.equal(cells(within!)[7], 'yes');
    const [file1000, , runtimeRow] = instancePrecisionRows(instanceResult(690, 600), true);
    assert.match(cells(file1000!)[7]!, /^yes; \*\*regressed 15 %\*\* against 7c89ce3$/);
    assert.match(cells(file1000!)[3]!, /^7c89ce3: 300 \/ 600 \/ 601 ms; 3,000\/3,000 runs; peak RSS 200 MiB; this commit's p99 1\.15× \(median; 1\.15–1\.15× over 3 runs\)$/);
    assert.equal(cells(runtimeRow!)[3], '7c89ce3: n/a (no runtime schedules)');
  });

  it('the BullMQ goal is judged on the median ratio; without a baseline column the row has its seven cells', () => {
    const rows = instancePrecisionRows(instanceResult(840, 840), false);
    assert.equal(cells(rows[0]!).length, 7);
    assert.equal(cells(rows[0]!)[4], 'p99 0.60× (median; 0.60–0.60× over 3 runs)');
    assert.equal(cells(rows[0]!)[6], '**no**');
  });

  it("BullMQ's floor (its Worker alone) is shown beside BullMQ, and a goal below it is said to be", () => {
    const result = instanceResult(840, 840);
    result.runs.push(...[1, 2, 3].flatMap(() => [1000, 10_000].map((size) => run('floor', 'file', size, 980))));
    const [row] = instancePrecisionRows(result, false).map(cells);
    assert.match(row![3]!, /; its Worker alone on plain delayed jobs \(the floor\): 490 \/ 980 \/ 981 ms; 3,000\/3,000 runs; peak RSS 200 MiB, p99 0\.70× the Job Schedulers' \(median; 0\.70–0\.70× over 3 runs\)$/);
    assert.equal(row![6], "**no**; the goal is below BullMQ's own floor (0.70×)");
    const [withoutFloor] = instancePrecisionRows(instanceResult(840, 840), false).map(cells);
    assert.doesNotMatch(withoutFloor![3]!, /floor/);
  });

  it('Redis rows: more bytes or fewer upserts than the baseline is a regression; a reduced run claims no goal', () => {
    const result: RedisBytesResult = {
      commit: 'abc1234',
      baseline: { label: '7c89ce3', commit: '7c89ce3' },
      schedules: 100_000,
      inFlight: 32,
      runs: [
        { system: 'leasebeat', kind: 'every-1h', bytesPerSchedule: 500, upsertsPerSecond: 8000 },
        { system: 'baseline', kind: 'every-1h', bytesPerSchedule: 400, upsertsPerSecond: 10_000 },
        { system: 'bullmq', kind: 'every-1h', bytesPerSchedule: 1000, upsertsPerSecond: 5000 },
      ],
    };
    const [bytes, upserts] = redisBytesRows(result, true).map(cells);
    assert.deepEqual(bytes!.slice(2), ['500 B', '7c89ce3: 400 B; this commit 1.25×', 'BullMQ `upsertJobScheduler`: 1,000 B', '0.50×', "≤ 0.5× BullMQ's", 'n/a (reduced run; yes at this scale); **regressed 25 %** against 7c89ce3']);
    assert.deepEqual(upserts!.slice(5), ['1.60×', "≥ 1.5× BullMQ's", 'n/a (reduced run; yes at this scale); **regressed 20 %** against 7c89ce3']);
  });

  it('other sections\' rows get an empty cell where the baseline column is', () => {
    assert.deepEqual(cells(addBaselineCell('| 1 | a | b | c | | goal | yes |')), ['1', 'a', 'b', '', 'c', '', 'goal', 'yes']);
  });
});
