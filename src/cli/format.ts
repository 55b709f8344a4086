import { formatRuns, type ScheduleDescription, type ScheduleView } from '../index.js';

/** Ticks as a reader in `timezone` sees them, `2026-03-29 03:00:00 Europe/Berlin`: ISO-like, sortable, zone named. */
export function tickFormatter(timezone: string): (tick: number | string | Date) => string {
  const format = new Intl.DateTimeFormat('sv-SE', { timeZone: timezone, dateStyle: 'short', timeStyle: 'medium' });
  return (tick) => `${format.format(new Date(tick))} ${timezone}`;
}

/** Rows under a header, each column as wide as its widest cell. */
export function alignColumns(header: string[], rows: string[][]): string[] {
  const widths = header.map((title, i) => Math.max(title.length, ...rows.map((row) => (row[i] ?? '').length)));
  const line = (cells: string[]): string => cells.map((cell, i) => cell.padEnd(widths[i]!)).join('  ').trimEnd();
  return [line(header), ...rows.map(line)];
}

function pausedText(view: ScheduleView): string {
  if (!view.paused) return 'no';
  return view.pauseNote ? `yes: ${view.pauseNote}` : 'yes';
}

/** `leasebeat schedules ls`: one row per schedule. */
export function formatScheduleTable(schedules: readonly ScheduleView[]): string[] {
  return alignColumns(
    ['ID', 'JOB', 'TRIGGER', 'PAUSED', 'VERSION', 'UPDATED', 'PROBLEM'],
    schedules.map((s) => [s.id, s.spec.job, s.trigger, pausedText(s), String(s.version), s.updatedAt, s.problem?.kind ?? '-']),
  );
}

/** `leasebeat schedules describe`: the schedule, its next ticks in its own time zone, its newest runs and counts. */
export function formatScheduleDescription(d: ScheduleDescription): string[] {
  const inZone = tickFormatter(d.timezone);
  const lines = [
    `${d.id}: job ${d.spec.job}, ${d.trigger} (${d.timezone}), version ${d.version}, updated ${d.updatedAt} by ${d.updatedBy}`,
    `paused: ${pausedText(d)}`,
  ];
  if (d.spec.note) lines.push(`note: ${d.spec.note}`);
  if (d.problem) lines.push(`problem: ${d.problem.kind}: ${d.problem.detail}`);
  lines.push(d.next.length > 0 ? `next ${d.next.length}:` : 'next: (no further ticks)', ...d.next.map((tick) => `  ${inZone(tick)}`));
  // `runs` is what `Admin.runs` answers for the schedule's id.
  lines.push('runs, newest first:', ...formatRuns(d.id, d.runs).map((line) => `  ${line}`));
  lines.push(`enqueued ${d.enqueued}  skipped ${JSON.stringify(d.skipped)}`);
  return lines;
}
