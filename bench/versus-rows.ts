/**
 * The table rows of issue 30's sections, each showing this checkout, the `--baseline` commit (when the run
 * had one, in a column of its own) and BullMQ side by side, and whether the row regressed against the
 * baseline by more than 10 %.
 */
import type { Spread } from '../scripts/chaos/report.js';
import { INSTANCE_ROUNDS, INSTANCE_SIZES, runtimeSize, type InstancePrecisionResult, type InstanceRun, type InstanceScenario, type InstanceSystem } from './instance-precision.js';
import { BYTES_SCHEDULES, type BytesKind, type RedisBytesResult, type RedisBytesRun } from './redis-bytes.js';
import { BURST_PATTERN } from './schedule-upserts.js';
import type { System } from './trees.js';

/** A row regresses when it is worse than the baseline's by more than this percentage of the baseline. */
const REGRESSION_PERCENT = 10;
/** The whole-instance goal (issue 30): handler start at half BullMQ's lag, in one instance as users run it. */
const INSTANCE_GOAL = 0.5;
const BYTES_GOAL = 0.5;
const UPSERT_GOAL = 1.5;

export const BASELINE_HEADER = '`--baseline` commit';

/** Adds an empty baseline cell (after the leasebeat cell) to a row of a section without a baseline. */
export function addBaselineCell(row: string): string {
  const cells = row.split('|');
  cells.splice(4, 0, ' ');
  return cells.join('|');
}

/** The median of the pairs' ratios, their spread, and the pair with the median ratio (whose figures are shown). */
export function medianRatio<T>(pairs: T[], ratioOf: (pair: T) => number): { ratio: number; spread: string; pair: T } | undefined {
  const rated = pairs.map((pair) => ({ pair, ratio: ratioOf(pair) })).sort((a, b) => a.ratio - b.ratio);
  const middle = rated[Math.floor((rated.length - 1) / 2)];
  if (!middle) return undefined;
  const all = rated.map((r) => r.ratio.toFixed(2));
  return { ratio: middle.ratio, spread: rated.length > 1 ? `${all[0]}–${all.at(-1)}× over ${rated.length} runs` : '1 run', pair: middle.pair };
}

const int = (n: number): string => Math.round(n).toLocaleString('en-US');
const show = (s: Spread | undefined): string => (s ? `${int(s.median)} / ${int(s.p99)} / ${int(s.max)} ms` : 'n/a');
const mib = (n: number | undefined): string => (n === undefined ? 'n/a' : `${n.toFixed(0)} MiB`);
const zip = <A, B>(a: A[], b: B[]): Array<[A, B]> => a.flatMap((x, i) => (b[i] === undefined ? [] : [[x, b[i]] as [A, B]]));
const row = (cells: string[]): string => `| ${cells.join(' | ')} |`;

/** The verdict of a goal; a reduced run claims none. */
const verdict = (ok: boolean, reduced: boolean): string => (reduced ? `n/a (reduced run; ${ok ? 'yes' : 'no'} at this scale)` : ok ? 'yes' : '**no**');

/** `worseBy`: how much worse than the baseline, as a share of it (0.23 = 23 % worse); judged in whole percent, as shown. */
function regression(worseBy: number | undefined, label: string | undefined): string {
  const percent = worseBy === undefined ? 0 : Math.round(worseBy * 100);
  return percent > REGRESSION_PERCENT ? `; **regressed ${percent} %** against ${label}` : '';
}

export function instancePrecisionRows(r: InstancePrecisionResult, baselineColumn: boolean): string[] {
  const reduced = r.rounds < INSTANCE_ROUNDS || r.sizes.join() !== INSTANCE_SIZES.join();
  const scale = reduced ? ` (reduced run: the issue asks ${INSTANCE_SIZES.map(int).join(' and ')}, ${INSTANCE_ROUNDS} rounds)` : '';
  const of = (system: InstanceSystem, scenario: InstanceScenario, size: number): InstanceRun[] =>
    r.runs.filter((run) => run.system === system && run.scenario === scenario && run.schedules === size);
  const p99 = (run: InstanceRun): number => run.startLagMs?.p99 ?? Infinity;
  const figures = (run: InstanceRun): string =>
    `${show(run.startLagMs)}; ${int(run.delivered)}/${int(run.expected)} runs; peak RSS ${mib(run.peakRssMiB)}${run.failed ? `; **failed**: ${run.failed}` : ''}`;
  const rowOf = (scenario: InstanceScenario, size: number, what: string): string[] => {
    const ours = of('leasebeat', scenario, size);
    const vsBullmq = medianRatio(zip(ours, of('bullmq', 'file', size)), ([a, b]) => p99(a) / p99(b));
    if (!vsBullmq) return [];
    const [mine, theirs] = vsBullmq.pair;
    const base = of('baseline', scenario, size);
    const vsBaseline = medianRatio(zip(ours, base), ([a, b]) => p99(a) / p99(b));
    const baselineCell = !r.baseline
      ? ''
      : base[0]?.unsupported !== undefined
        ? `${r.baseline.label}: n/a (${base[0].unsupported})`
        : vsBaseline
          ? `${r.baseline.label}: ${figures(vsBaseline.pair[1])}; this commit's p99 ${vsBaseline.ratio.toFixed(2)}× (median; ${vsBaseline.spread})`
          : 'n/a (not measured)';
    const ok = vsBullmq.ratio <= INSTANCE_GOAL && ours.every((run) => run.delivered === run.expected);
    // The floor is BullMQ's Worker alone: a goal below it cannot be met by anything that runs through that Worker.
    const floor = medianRatio(zip(of('floor', 'file', size), of('bullmq', 'file', size)), ([a, b]) => p99(a) / p99(b));
    const floorCell = floor ? `; its Worker alone on plain delayed jobs (the floor): ${figures(floor.pair[0])}, p99 ${floor.ratio.toFixed(2)}× the Job Schedulers' (median; ${floor.spread})` : '';
    const belowFloor = floor && floor.ratio > INSTANCE_GOAL ? `; the goal is below BullMQ's own floor (${floor.ratio.toFixed(2)}×)` : '';
    return [
      row([
        '10',
        `Whole instance, ${what}: one \`leasebeat start\` (${r.commit}) with its own workers against BullMQ's Job Schedulers and one Worker in one process, ` +
          `concurrency 100 each; handler start (\`processedOn\`) − nominal tick (median / p99 / max; the run with the median ratio); runs started; peak RSS${scale}`,
        figures(mine),
        ...(baselineColumn ? [baselineCell] : []),
        `BullMQ: ${figures(theirs)}${floorCell}`,
        `p99 ${vsBullmq.ratio.toFixed(2)}× (median; ${vsBullmq.spread})`,
        `p99 ≤ ${INSTANCE_GOAL}× BullMQ's; every run started`,
        verdict(ok, reduced) + regression(vsBaseline && vsBaseline.ratio - 1, r.baseline?.label) + belowFloor,
      ]),
    ];
  };
  const pattern = `\`${BURST_PATTERN}\``;
  return [
    ...r.sizes.flatMap((size) => rowOf('file', size, `${int(size)} job-file definitions firing together (${pattern})`)),
    ...rowOf('runtime', runtimeSize(r.sizes), `${int(runtimeSize(r.sizes))} runtime schedules of one job type firing together (${pattern}, stored through \`schedules.upsert\`)`),
  ];
}

const KIND: Record<BytesKind, string> = {
  'cron-spread': 'cron spread over the day (`m h * * *`, minute and hour varied)',
  'every-1h': "`every: '1h'` (BullMQ `every: 3600000`)",
};

export function redisBytesRows(r: RedisBytesResult, baselineColumn: boolean): string[] {
  const reduced = r.schedules < BYTES_SCHEDULES;
  const scale = reduced ? ` (reduced run: the issue asks ${int(BYTES_SCHEDULES)})` : '';
  const kinds = [...new Set(r.runs.map((run) => run.kind))];
  const n = int(r.schedules);
  return kinds.flatMap((kind) => {
    const run = (system: System): RedisBytesRun | undefined => r.runs.find((x) => x.system === system && x.kind === kind);
    const [ours, base, bullmq] = [run('leasebeat'), run('baseline'), run('bullmq')];
    const measures: Array<{ what: string; pick: (x: RedisBytesRun) => number | undefined; unit: string; goal: number; lowerIsBetter: boolean }> = [
      {
        what: `Redis bytes per schedule: ${n} schedules, ${KIND[kind]}, written through \`schedules.upsert\` of ${r.commit} or BullMQ's \`upsertJobScheduler\`, ` +
          `${r.inFlight} in flight, each system into a fresh redis-server; \`used_memory\` after − before, ÷ ${n}${scale}`,
        pick: (x) => x.bytesPerSchedule,
        unit: 'B',
        goal: BYTES_GOAL,
        lowerIsBetter: true,
      },
      { what: `Upsert throughput of the same ${n} schedules, ${KIND[kind]}, ${r.inFlight} in flight${scale}`, pick: (x) => x.upsertsPerSecond, unit: 'upserts/s', goal: UPSERT_GOAL, lowerIsBetter: false },
    ];
    return measures.map(({ what, pick, unit, goal, lowerIsBetter }) => {
      const value = (x: RedisBytesRun | undefined): number | undefined => (x === undefined ? undefined : pick(x));
      const cell = (x: RedisBytesRun | undefined): string => (x?.unsupported !== undefined ? `n/a (${x.unsupported})` : value(x) === undefined ? 'n/a' : `${int(value(x)!)} ${unit}`);
      const [mine, previous, theirs] = [value(ours), value(base), value(bullmq)];
      const vsBullmq = mine !== undefined && theirs !== undefined ? mine / theirs : undefined;
      const vsBaseline = mine !== undefined && previous !== undefined ? mine / previous : undefined;
      const ok = vsBullmq !== undefined && (lowerIsBetter ? vsBullmq <= goal : vsBullmq >= goal);
      const worseBy = vsBaseline === undefined ? undefined : lowerIsBetter ? vsBaseline - 1 : 1 - vsBaseline;
      return row([
        '11',
        what,
        cell(ours),
        ...(baselineColumn ? [r.baseline ? `${r.baseline.label}: ${cell(base)}${vsBaseline === undefined ? '' : `; this commit ${vsBaseline.toFixed(2)}×`}` : ''] : []),
        `BullMQ \`upsertJobScheduler\`: ${cell(bullmq)}`,
        vsBullmq === undefined ? '' : `${vsBullmq.toFixed(2)}×`,
        `${lowerIsBetter ? '≤' : '≥'} ${goal}× BullMQ's`,
        verdict(ok, reduced) + regression(worseBy, r.baseline?.label),
      ]);
    });
  });
}
