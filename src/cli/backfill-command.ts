import { setTimeout as sleep } from 'node:timers/promises';
import type { Command } from 'commander';
import { BACKFILL_OVERLAPS, BackfillError, DEFAULT_BACKFILL_RATE, type Admin, type BackfillOverlap, type BackfillProgress } from '../index.js';
import { ConfigError, type ServiceConfig } from '../config/cli-support.js';

/** What the command needs from main.ts: the connection flags, and an admin on the configured cluster. */
export interface BackfillCommandHooks {
  /** Adds the connection settings' flags to a command (`withSettings(command, 'connection')`). */
  withSettings(command: Command): Command;
  /** Runs `run` with an admin, within the configured bounds (`withAdmin`). */
  withAdmin(command: Command, run: (admin: Admin, config: ServiceConfig) => Promise<void>): Promise<void>;
}

interface BackfillFlags {
  from: string;
  to: string;
  overlap: string;
  rate: string;
  includeSkipped?: boolean;
  yes?: boolean;
}

/** How often the progress is read while the command watches it. */
const PROGRESS_POLL_MS = 500;
/** Without a terminal (a log, a pipe), a progress line at most this often. */
const LOG_LINE_MS = 5_000;

/** The flag of each option a `BackfillError` names. */
const FLAGS: Record<BackfillError['option'], string> = { job: '<job>', from: '--from', to: '--to', overlap: '--overlap', rate: '--rate', yes: '--yes' };

/** Registers `leasebeat backfill` (docs/operations.md, "Backfilling a range"). */
export function registerBackfillCommand(program: Command, hooks: BackfillCommandHooks): Command {
  return hooks
    .withSettings(
      program
        .command('backfill')
        .description("ask the leader to run, once each, the ticks of a job in a past range that the ledger has no run of (paced; survives a leader change); prints its progress, then the ticks by fate")
        .argument('<job>', 'the job (defined in the jobs folder)'),
    )
    .requiredOption('--from <time>', 'the first instant of the range, included (ISO 8601, like 2026-01-01T00:00:00Z)')
    .requiredOption('--to <time>', 'the last instant of the range, included, not in the future')
    .option('--overlap <mode>', `how backfill runs may overlap: ${BACKFILL_OVERLAPS.join(', ')}`, 'allow')
    .option('--rate <N/s>', 'runs added per second at most', `${DEFAULT_BACKFILL_RATE}/s`)
    .option('--include-skipped', 'also run the ticks recorded skipped (each once)')
    .option('--yes', 'confirm a range of more than 100,000 ticks')
    .action((job: string, flags: BackfillFlags, command: Command) => backfill(job, flags, command, hooks));
}

/** `10/s` or `10`: runs a second; anything else is a one-line error naming the flag. */
function rateOf(text: string): number {
  const match = /^\s*(\d+(?:\.\d+)?)\s*(?:\/\s*s)?\s*$/.exec(text);
  if (!match) throw new ConfigError(`--rate "${text}": give runs a second, like 10/s`);
  return Number(match[1]);
}

function overlapOf(text: string): BackfillOverlap {
  const found = BACKFILL_OVERLAPS.find((mode) => mode === text);
  if (!found) throw new ConfigError(`--overlap "${text}": use one of ${BACKFILL_OVERLAPS.join(', ')}`);
  return found;
}

async function backfill(name: string, flags: BackfillFlags, command: Command, hooks: BackfillCommandHooks): Promise<void> {
  // The flags are checked before anything connects: bad input writes nothing.
  const rate = rateOf(flags.rate);
  const overlap = overlapOf(flags.overlap);
  await hooks.withAdmin(command, async (admin) => {
    let requested: BackfillProgress;
    try {
      requested = await admin.backfill(name, { from: flags.from, to: flags.to, overlap, rate, includeSkipped: flags.includeSkipped === true, yes: flags.yes === true });
    } catch (error) {
      if (error instanceof BackfillError) throw new ConfigError(`${FLAGS[error.option]}: ${error.problem}`);
      throw error;
    }
    console.log(`backfill ${requested.id} of ${name}: ${requested.total} ticks from ${requested.from} to ${requested.to} at ${rate}/s (overlap ${overlap}); the leader runs it (Ctrl-C stops watching, not the backfill)`);
    const ended = await watch(admin, name, requested.id);
    console.log(summaryOf(ended));
    if (ended.state === 'failed') process.exitCode = 1;
  });
}

/** Reads the backfill's progress until it ends, showing it: one line that updates on a terminal, a line now and then elsewhere. */
async function watch(admin: Admin, job: string, id: string): Promise<BackfillProgress> {
  const tty = process.stdout.isTTY;
  let lastLine = 0;
  for (;;) {
    const progress = (await admin.backfills(job)).find((b) => b.id === id);
    if (!progress) throw new Error(`backfill ${id} of ${job} is gone from Redis`);
    if (progress.state === 'done' || progress.state === 'failed') {
      if (tty) process.stdout.write('\r\x1b[K');
      return progress;
    }
    const line = progressLine(progress);
    if (tty) process.stdout.write(`\r\x1b[K${line}`);
    else if (performance.now() - lastLine >= LOG_LINE_MS) {
      console.log(line);
      lastLine = performance.now();
    }
    await sleep(PROGRESS_POLL_MS);
  }
}

function progressLine(progress: BackfillProgress): string {
  if (progress.state === 'queued') return `waiting for a leader to take backfill ${progress.id}`;
  const percent = progress.total === 0 ? 100 : Math.floor((100 * progress.done) / progress.total);
  return `${progress.done}/${progress.total} ticks (${percent}%), ${progress.enqueued} enqueued`;
}

/** The backfill's outcome: runs added, and the ticks listed by fate. */
export function summaryOf(progress: BackfillProgress): string {
  const { ran, skipped, pruned, later, overlapSkipped } = progress.listed;
  const listed = `listed, not run: ${ran} ran before, ${skipped} skipped${progress.includeSkipped ? '' : ' (--include-skipped runs them)'}, ${pruned} pruned from the ledger (may have run), ${later} left to the live schedule, ${overlapSkipped} skipped for overlap`;
  if (progress.state === 'failed') return `backfill ${progress.id} of ${progress.job} failed (${progress.error ?? 'no reason given'}) after ${progress.done}/${progress.total} ticks: ${progress.enqueued} enqueued; ${listed}`;
  return `backfill ${progress.id} of ${progress.job} done: ${progress.enqueued} of ${progress.total} ticks enqueued; ${listed}`;
}
