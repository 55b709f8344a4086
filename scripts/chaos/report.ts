import type { Audit } from './audit.js';
import type { ExecutedFault } from './faults.js';
import type { LeaseRecordWrite } from './lease-history.js';
import { describeFault, type ElectionTimings, type LockKind, type PlannedFault } from './plan.js';
import type { RedisKind } from './topology.js';

/** min / median / p99 / max of a sample (nearest rank), or undefined for an empty one. */
export interface Spread {
  n: number;
  min: number;
  median: number;
  p99: number;
  max: number;
}

export function spread(values: number[]): Spread | undefined {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = (q: number): number => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
  return { n: sorted.length, min: sorted[0]!, median: rank(0.5), p99: rank(0.99), max: sorted.at(-1)! };
}

export const formatSpread = (s: Spread | undefined, unit = 'ms'): string =>
  s ? `${s.min} / ${s.median} / ${s.p99} / ${s.max} ${unit} (n=${s.n})` : 'none';

/** Everything a chaos run found, as written to `report.json`. */
export interface ChaosReport {
  lock: LockKind;
  redis: RedisKind;
  instances: number;
  seed: number;
  durationMs: number;
  timings: ElectionTimings;
  startedAt: string;
  /** The replay command. */
  command: string;
  window: { from: string; to: string; seconds: number };
  drainMs: number;
  plan: PlannedFault[];
  faults: ExecutedFault[];
  faultCounts: Record<string, number>;
  ok: boolean;
  invariants: Audit['invariants'];
  ticks: Audit['ticks'];
  failover: { all: Spread | undefined; byKind: Record<string, Spread | undefined>; gaps: Audit['failovers'] };
  /** Replicated Redis: from a fault that promoted a replica to the first job added after the promotion. */
  redisFailover: { all: Spread | undefined; byKind: Record<string, Spread | undefined> };
  enqueueLagMs: Spread | undefined;
  longestSilenceMs: number;
  runsPerJob: Record<string, number>;
  /** Every second handler run of one job id: explained by a death of the previous runner, or a duplicate. */
  secondRuns: Audit['secondRuns'];
  repeatedAdds: number;
  /** Run records the records client wrote twice (see RunRecord.runId), each counted once. */
  resentRunRecords: number;
  writesWithoutEvent: number;
  terms: Audit['terms'];
  lease: Audit['lease'];
  /** Every write of the lock's history the lease invariants were judged on (report.json only: for reading a violation). */
  leaseWrites: LeaseRecordWrite[];
  fence: { leaderTransitions: number; fenced: number; rejectedRaises: number };
  processes: number;
  /** The runtime schedules a client wrote during the faults, when it ran. */
  schedules?: Audit['schedules'];
}

/** The second runs of one job id: the duplicates, then those a death of the previous runner explains. */
function secondRunLines(report: ChaosReport): string[] {
  const { explained, duplicates } = report.secondRuns;
  if (explained.length + duplicates.length === 0) return [];
  const row = (r: Audit['secondRuns']['duplicates'][number], why: string): string =>
    `| ${r.jobId} | ${r.previous.identity} ${new Date(r.previous.startedAt).toISOString()} (attempts ${r.previous.attemptsMade}) | ` +
    `${r.again.identity} ${new Date(r.again.startedAt).toISOString()} (attempts ${r.again.attemptsMade}) | ${why} |`;
  const lines = ['', '## Second runs of one job id', '', `${duplicates.length} duplicate(s); ${explained.length} explained by the death of the previous run's process.`];
  const table = ['', '| Job id | Previous run | Run again | |', '|---|---|---|---|'];
  if (duplicates.length > 0) {
    lines.push('', 'Duplicates (the previous runner was alive):', ...table);
    for (const r of duplicates.slice(0, 25)) lines.push(row(r, r.cause ? `fault in between: #${r.cause.fault} ${r.cause.kind}${r.cause.aimedAtThis ? ' (aimed at this run)' : ''}` : ''));
  }
  if (explained.length > 0) {
    lines.push('', 'Explained (worker process deaths):', ...table);
    for (const r of explained.slice(0, 25)) {
      lines.push(row(r, `${r.previous.identity} exited ${new Date(r.death!.at).toISOString()}${r.death!.fault === undefined ? '' : ` (#${r.death!.fault} ${r.death!.kind})`}`));
    }
  }
  return lines;
}

/** The runtime schedules' section: what the client wrote, and their ticks as the audit judged them. */
function scheduleLines(report: ChaosReport): string[] {
  const s = report.schedules;
  if (!s) return [];
  const w = s.writes;
  const ticks = Object.values(s.ticks).reduce((sum, t) => ({ all: sum.all + t.ticks, optional: sum.optional + (t.optional ?? 0) }), { all: 0, optional: 0 });
  const lines = [
    '', '## Runtime schedules', '',
    `A client wrote ${s.schedules} schedules of the \`tenant\` job type during the faults: ${w.total} writes (${w.create} creates, ${w['edit-data']} data edits, ` +
      `${w['edit-interval']} interval edits, ${w.remove} removes), ${w.unknown} of them unknown (the call threw). ${s.runs} runs of them were audited. ` +
      `Allowance around a write: stage-ahead ${s.allowanceMs.stageAhead} ms + apply ${s.allowanceMs.apply} ms; a staged run of a tick a write dropped, ${s.allowanceMs.drop} ms.`,
    '',
    `- ticks audited in the window: ${ticks.all} (${ticks.all - ticks.optional} owed, ${ticks.optional} around a write, owed or not)`,
    `- a tick run with a version after the acknowledgement of the write that replaced it, by how much: ${formatSpread(s.ranAfterEditMs)}`,
    `- a tick of a removed schedule run after its removal's acknowledgement, by how much: ${formatSpread(s.ranAfterRemoveMs)}`,
    `- ticks decided late (catch-up, or a claim left pending) and run by a version written after the tick: ${s.caughtUpByLaterVersion}`,
    '', '| Schedule | Ticks | Of them around a write | Enqueued | Skipped (reason: count) |', '|---|---:|---:|---:|---|',
  ];
  for (const [id, stats] of Object.entries(s.ticks)) {
    lines.push(`| ${id} | ${stats.ticks} | ${stats.optional ?? 0} | ${stats.enqueued} | ${Object.entries(stats.skipped).map(([reason, n]) => `${reason}: ${n}`).join(', ')} |`);
  }
  return lines;
}

/** The Markdown report: the verdict first, then faults, failovers and ticks. */
export function toMarkdown(report: ChaosReport): string {
  const lines: string[] = [];
  const on = report.redis === 'single' ? '' : ` on Redis ${report.redis === 'sentinel' ? 'Sentinel' : 'Cluster'}`;
  lines.push(`# Chaos run: ${report.lock} lock${on}, ${report.instances} instances, seed ${report.seed}`);
  lines.push('');
  lines.push(`**${report.ok ? 'All invariants held' : 'INVARIANTS VIOLATED'}.** Started ${report.startedAt}; faults for ${(report.durationMs / 1000).toFixed(0)} s, ` +
    `window ${report.window.seconds} s of ticks (${report.window.from} – ${report.window.to}), drained in ${(report.drainMs / 1000).toFixed(1)} s. ` +
    `Election timings: lease ${report.timings.leaseDurationMs} ms, renew deadline ${report.timings.renewDeadlineMs} ms, retry ${report.timings.retryPeriodMs} ms.`);
  lines.push('');
  lines.push(`Replay: \`${report.command}\``);
  lines.push('');
  lines.push('| Invariant | Result | Checked | Violations |');
  lines.push('|---|---|---:|---:|');
  for (const inv of report.invariants) lines.push(`| ${inv.name} | ${inv.ok ? 'pass' : '**FAIL**'} | ${inv.checked} | ${inv.violationCount} |`);
  for (const inv of report.invariants.filter((i) => !i.ok)) {
    lines.push('', `Violations of "${inv.name}":`, ...inv.violations.map((v) => `- ${v}`));
  }
  lines.push('', '## Faults', '');
  lines.push(`${report.faults.length} injected over ${report.processes} process incarnations: ` +
    Object.entries(report.faultCounts).map(([kind, n]) => `${kind} ${n}`).join(', ') + '.');
  lines.push('', '| # | Fault | Target | Leader? | Detail |', '|---:|---|---|---|---|');
  for (const fault of report.faults) {
    lines.push(`| ${fault.index} | ${fault.kind} | ${fault.target ?? ''} | ${fault.wasLeader ? 'yes' : ''} | ${fault.detail} |`);
  }
  lines.push('', '## Failover', '');
  lines.push('From the fault to the first enqueue written under a newer term (min / median / p99 / max):', '');
  lines.push(`- all: ${formatSpread(report.failover.all)}`);
  for (const [kind, s] of Object.entries(report.failover.byKind)) lines.push(`- ${kind}: ${formatSpread(s)}`);
  if (report.redis !== 'single') {
    lines.push('', 'From a fault on the primary that led to a promotion to the first job added after the promotion:', '');
    lines.push(`- all: ${formatSpread(report.redisFailover.all)}`);
    for (const [kind, s] of Object.entries(report.redisFailover.byKind)) lines.push(`- ${kind}: ${formatSpread(s)}`);
    lines.push('');
  }
  lines.push(`- longest stretch without an enqueue of the per-second job: ${report.longestSilenceMs} ms`);
  lines.push(`- enqueue lag in the window (Redis write minus nominal tick, catch-up included): ${formatSpread(report.enqueueLagMs)}`);
  lines.push(`- fence: ${report.terms.length} terms, leaderTransitions now ${report.fence.leaderTransitions}; ` +
    `${report.fence.fenced} claims/skips and ${report.fence.rejectedRaises} raises turned away by the fence; ${report.repeatedAdds} repeated adds ignored by BullMQ`);
  lines.push(`- lock history (${report.lease.source}): ${report.lease.writes} writes, ${report.lease.holderChanges} holder changes, ` +
    `${report.lease.stretches} holding stretches; longest unexcused stretch without an enqueue by the holder ${report.lease.longestUnexcusedSilenceMs} ms` +
    (report.redis === 'single' ? '' : `; ${report.lease.lostInFailover} writes seen when made and lost in a failover (unconfirmed, so no term counted on them; left out of L1–L3)`));
  lines.push('', '## Ticks', '', '| Job | Ticks | Enqueued | Skipped (reason: count) |', '|---|---:|---:|---|');
  for (const [job, stats] of Object.entries(report.ticks)) {
    const skipped = Object.entries(stats.skipped).map(([reason, n]) => `${reason}: ${n}`).join(', ');
    lines.push(`| ${job} | ${stats.ticks} | ${stats.enqueued} | ${skipped} |`);
  }
  lines.push('', `Handler runs per enqueued job: ${Object.entries(report.runsPerJob).map(([runs, n]) => `${runs} run(s): ${n}`).join(', ')} ` +
    '(a second run is allowed only when the process of the first one died: at-least-once processing). ' +
    `${report.resentRunRecords} run record(s) written twice by the records client's resend after a reconnect, each counted once.`);
  lines.push(...secondRunLines(report));
  lines.push(...scheduleLines(report));
  const aimed = report.faults.filter((f) => f.aim);
  if (aimed.length > 0) {
    lines.push('', '## Aimed kills', '', '| # | Fault | Aimed at | Kill after it | Replication held | Primary |', '|---:|---|---|---:|---:|---:|');
    for (const f of aimed) lines.push(`| ${f.index} | ${f.kind} | ${f.aim!.event} | ${f.aim!.gapMs} ms | ${f.aim!.heldMs} ms | ${f.aim!.port} |`);
  }
  lines.push('', '## Fault schedule (from the seed)', '', ...report.plan.map((f) => `- ${describeFault(f)}`));
  return lines.join('\n') + '\n';
}
