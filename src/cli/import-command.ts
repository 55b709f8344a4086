import { Queue } from 'bullmq';
import type { Command } from 'commander';
import { BullmqImportError, importBullmqSchedulers, type Admin, type BullmqImportReport, type BullmqImportRow, type ScheduleSpec } from '../index.js';
import { ConfigError, RedisConnections, type ServiceConfig } from '../config/cli-support.js';
import { alignColumns } from './format.js';

/** What the command needs from main.ts: the connection flags, and an admin on the configured cluster. */
export interface ImportCommandHooks {
  /** Adds the connection settings' flags to a command (`withSettings(command, 'connection')`). */
  withSettings(command: Command): Command;
  /** Runs `run` with an admin, within the configured bounds (`withAdmin`). */
  withAdmin(command: Command, run: (admin: Admin, config: ServiceConfig) => Promise<void>): Promise<void>;
}

interface ImportFlags {
  queue: string;
  job: string;
  bullmqPrefix: string;
  idPrefix: string;
  name?: string;
  remove?: boolean;
  dryRun?: boolean;
  json?: boolean;
}

/** The flag of each library option a `BullmqImportError` names. */
const FLAGS: Record<BullmqImportError['option'], string> = { job: '--job', idPrefix: '--id-prefix', queue: '--queue' };

/** Registers `leasebeat import bullmq`: a queue's Job Schedulers become runtime schedules (docs/migrating-from-bullmq.md). */
export function registerImportCommand(program: Command, hooks: ImportCommandHooks): Command {
  const group = program.command('import').description('move schedules into leasebeat from another scheduler');
  hooks
    .withSettings(group.command('bullmq').description("import a BullMQ queue's Job Schedulers as runtime schedules of one job type; prints what it mapped and what it could not"))
    .requiredOption('--queue <name>', 'the BullMQ queue whose Job Schedulers are imported')
    .requiredOption('--job <type>', 'the job type (a definition in jobs/ without schedule or every) that runs them')
    // Not --prefix: that is LEASEBEAT_PREFIX, leasebeat's own keys, among the connection flags.
    .option('--bullmq-prefix <prefix>', "the key prefix of the queue imported (its Queue's `prefix` option; --bull-prefix is leasebeat's own queues')", 'bull')
    .option('--id-prefix <prefix>', 'put before each scheduler id to make the schedule id, e.g. bull.', '')
    .option('--name <job name>', 'only the schedulers whose jobs have this BullMQ job name')
    .option('--remove', 'remove each BullMQ scheduler once its schedule is written (never one that could not be mapped)')
    .option('--dry-run', 'check and show what would be written; write and remove nothing')
    .option('--json', 'print the report as JSON')
    .action((flags: ImportFlags, command: Command) => importBullmq(flags, command, hooks));
  return group;
}

async function importBullmq(flags: ImportFlags, command: Command, hooks: ImportCommandHooks): Promise<void> {
  await hooks.withAdmin(command, async (admin, config) => {
    const connection = RedisConnections.fromUrl(config.redisUrl).open('control', { commandTimeout: config.commandTimeoutMs });
    // A lost connection fails the command that needed it; the event itself would only print a warning.
    connection.on('error', () => undefined);
    // Read only: BullMQ would otherwise write the queue's meta on open (a stray queue under a mistyped name
    // or prefix, and the real queue's event-stream bound reset to its default).
    const queue = new Queue(flags.queue, { connection, prefix: flags.bullmqPrefix, skipMetasUpdate: true });
    queue.on('error', () => undefined);
    let report: BullmqImportReport;
    try {
      report = await importBullmqSchedulers(admin.schedules, queue, {
        job: flags.job,
        idPrefix: flags.idPrefix,
        remove: flags.remove === true,
        dryRun: flags.dryRun === true,
        ...(flags.name !== undefined ? { name: flags.name } : {}),
      });
    } catch (error) {
      if (error instanceof BullmqImportError) throw new ConfigError(`${FLAGS[error.option]} ${JSON.stringify(error.value)}: ${error.problem}`);
      throw error;
    } finally {
      await queue.close();
      connection.disconnect();
    }
    if (flags.json) console.log(JSON.stringify(report, null, 2));
    else for (const line of formatImportReport(report, { prefix: flags.bullmqPrefix, remove: flags.remove === true })) console.log(line);
    process.exitCode = importExitCode(report);
  });
}

/**
 * What a script can act on: 0 every scheduler found is a schedule now (or would be, in a dry run); 4 some
 * were not imported, the others were (each unmapped row says what to do); 1 none was found (the queue, its
 * prefix or --name is wrong). Not 2: that is a refused setting or argument, with nothing done.
 */
export const IMPORT_EXIT = { done: 0, noneFound: 1, partly: 4 } as const;

export function importExitCode(report: BullmqImportReport): number {
  if (report.rows.length === 0) return IMPORT_EXIT.noneFound;
  return report.counts.unmapped > 0 ? IMPORT_EXIT.partly : IMPORT_EXIT.done;
}

/** The table of an import, one row per scheduler, then the summary line. */
export function formatImportReport(report: BullmqImportReport, options: { prefix: string; remove: boolean }): string[] {
  const filtered = report.filteredOut.length > 0 ? ` (${report.filteredOut.length} of other job names left out)` : '';
  if (report.rows.length === 0) {
    return [`no Job Schedulers to import in BullMQ queue "${report.queue}" under prefix "${options.prefix}"${filtered}: check --queue, --bullmq-prefix and --name`];
  }
  const table = alignColumns(
    ['BULLMQ SCHEDULER', 'SCHEDULE', 'OUTCOME', 'RUNS', 'NOTES'],
    report.rows.map((row) => [row.key, row.outcome === 'unmapped' ? '-' : row.id, row.outcome, row.spec ? runsOf(row.spec) : '-', notesOf(row)]),
  );
  return [...table, summaryOf(report, options.remove) + filtered];
}

function runsOf(spec: ScheduleSpec): string {
  const parts = [spec.schedule !== undefined ? spec.schedule : `every ${String(spec.every)}`];
  if (spec.timezone !== undefined) parts.push(spec.timezone);
  if (spec.startAt !== undefined) parts.push(`from ${String(spec.startAt)}`);
  if (spec.endAt !== undefined) parts.push(`until ${String(spec.endAt)}`);
  if (spec.limit !== undefined) parts.push(`${spec.limit} left`);
  return parts.join(', ');
}

function notesOf(row: BullmqImportRow): string {
  const notes = [row.reason, row.dropped.length > 0 ? `dropped ${row.dropped.join('; ')}` : undefined, row.removedFromBullmq ? 'removed from BullMQ' : undefined];
  return notes.filter((note) => note !== undefined).join('; ');
}

function summaryOf(report: BullmqImportReport, remove: boolean): string {
  const { counts } = report;
  const mapped = report.rows.length - counts.unmapped;
  if (report.dryRun) {
    const would = `${counts['would-create']} would be created, ${counts['would-update']} updated, ${counts.unchanged} unchanged, ${counts.unmapped} cannot be imported`;
    return `dry run of queue "${report.queue}", nothing written: ${would}${remove ? `; --remove would remove ${mapped} from BullMQ` : ''}`;
  }
  const done = `${counts.created} created, ${counts.updated} updated, ${counts.unchanged} unchanged, ${counts.unmapped} not imported`;
  const removed = report.rows.filter((row) => row.removedFromBullmq).length;
  const next = remove ? `; ${removed} removed from BullMQ` : mapped > 0 ? '; both now run them: check with `leasebeat schedules ls`, then run again with --remove' : '';
  return `queue "${report.queue}" as job type ${report.job}: ${done}${next}`;
}
