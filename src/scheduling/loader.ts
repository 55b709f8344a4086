import { createHash } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { watch, type FSWatcher } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { spawnSync } from 'node:child_process';
import { createRequire, register } from 'node:module';
import path from 'node:path';
import { setImmediate } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import type { Logger } from 'pino';
import { silentLogger } from '../util/logger.js';
import type { ScheduledJob } from './define-job.js';
import { validateJobDefinition } from './schema.js';

/** One problem with one job file. `message` is complete on its own and starts with the file. */
export interface LoadError {
  /** Absolute path of the file. */
  file: string;
  message: string;
}

export interface LoadResult {
  jobs: Map<string, ScheduledJob>;
  errors: LoadError[];
  /** What loads but is likely a mistake (an `endAt` in the past, `?` read as `*`). */
  warnings: LoadError[];
}

/** How long a job file may take to import (top-level await included) before it counts as broken. */
const IMPORT_TIMEOUT_MS = 10_000;
const DEFAULT_DEBOUNCE_MS = 100;
/** Definitions validated between two yields to the event loop: a few tens of milliseconds of work. */
const ENTRIES_PER_SLICE = 500;
/** Files a scan imports at once: enough to overlap reads and transforms, few enough to bound memory. */
const PARALLEL_FILE_LOADS = 16;

/**
 * Job files are the `.ts`, `.js` and `.mjs` files directly in the folder. Names starting with `_` or
 * `.` are left alone, so helpers shared by several jobs can live next to them.
 */
function isJobFile(name: string): boolean {
  return /\.(?:ts|js|mjs)$/.test(name) && !name.endsWith('.d.ts') && !name.startsWith('_') && !name.startsWith('.');
}

async function listJobFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true });
  return entries
    .filter((entry) => entry.isFile() && isJobFile(entry.name))
    .map((entry) => entry.name)
    .sort()
    .map((name) => path.join(dir, name));
}

/** The path as users see it in messages: relative to the working directory when inside it. */
function shownPath(file: string): string {
  const relative = path.relative(process.cwd(), file);
  return relative.startsWith('..') || path.isAbsolute(relative) ? file : relative;
}

const requireForCache = createRequire(import.meta.url);
let importVersion = 0;

/** One definition a file produced: its index when the file exports several, so messages can name the entry. */
interface Entry {
  job: ScheduledJob;
  /** Undefined for a file that exports one definition. */
  index: number | undefined;
}

/** A definition the file exported that was refused; `name` when a previous version of it may run in its place. */
interface FailedEntry {
  name: string | undefined;
  errors: string[];
}

/** What one job file gave: a file that could not be read at all is `broken`, with nothing else. */
type FileOutcome =
  | { broken: true; errors: string[] }
  | { broken: false; entries: Entry[]; failed: FailedEntry[]; warnings: string[] };

/**
 * Imports a job file afresh and validates what it default-exports: one definition, an array of them, or a
 * function (sync or async) returning either. ES modules are cached by URL, so a query makes every import a
 * new module; files in a CommonJS package scope are cached by path, so their cache entry goes first. A
 * module once imported stays in memory: each reload costs a little. Only the job file is re-imported;
 * modules it imports are cached until restart.
 */
async function loadJobFile(file: string): Promise<FileOutcome> {
  const shown = shownPath(file);
  let exports: Record<string, unknown>;
  try {
    delete requireForCache.cache[file];
    exports = await withTimeout(import(await jobFileUrl(file)) as Promise<Record<string, unknown>>, 'importing');
  } catch (error) {
    return { broken: true, errors: [`${shown}: ${describeImportError(error, file)}`] };
  }
  let exported = exports.default;
  if (exported === undefined) {
    return { broken: true, errors: [`${shown}: has no default export; add \`export default defineJob({ ... })\``] };
  }
  if (typeof exported === 'function') {
    try {
      exported = await withTimeout(Promise.resolve((exported as () => unknown)()), 'building its definitions');
    } catch (error) {
      return { broken: true, errors: [`${shown}: threw while building its definitions: ${describeThrown(error)}`] };
    }
    if (typeof exported !== 'object' || exported === null) {
      return { broken: true, errors: [`${shown}: default export (a function) returned ${String(exported)}: must return a job definition or an array of them`] };
    }
  }
  if (Array.isArray(exported)) return validateEntries(exported, file, shown);
  // A file of one definition is broken as a whole when it is invalid, so its last good version keeps running.
  const result = validateJobDefinition(exported, file, shown);
  return result.ok ? { broken: false, entries: [{ job: result.job, index: undefined }], failed: [], warnings: result.warnings } : { broken: true, errors: result.errors };
}

/**
 * Validates each definition of an array on its own; within the file, a name belongs to its first entry.
 * Yields to the event loop between slices, so that a hot reload of a large file never holds up the
 * elector's renewals or the producer's ticks for long (100,000 entries take about 2 s in all).
 */
async function validateEntries(values: readonly unknown[], file: string, shown: string): Promise<FileOutcome> {
  const now = Date.now();
  const entries: Entry[] = [];
  const failed: FailedEntry[] = [];
  const warnings: string[] = [];
  const entryOf = new Map<string, number>();
  for (const [i, value] of values.entries()) {
    if (i > 0 && i % ENTRIES_PER_SLICE === 0) await setImmediate();
    const rawName = (value as { name?: unknown } | null)?.name;
    const name = typeof rawName === 'string' ? rawName : undefined;
    const label = `${shown}: entry ${i}${name === undefined ? '' : ` (${JSON.stringify(name)})`}`;
    const result = validateJobDefinition(value, file, label, now);
    if (!result.ok) {
      failed.push({ name, errors: result.errors });
      continue;
    }
    const first = entryOf.get(result.job.name);
    if (first !== undefined) {
      // No name: an earlier version of the name never runs in place of a duplicate; the first entry does.
      failed.push({ name: undefined, errors: [`${label}: name "${result.job.name}" is already defined by entry ${first} of this file; this entry is ignored until one of them is renamed`] });
      continue;
    }
    entryOf.set(result.job.name, i);
    entries.push({ job: result.job, index: i });
    warnings.push(...result.warnings);
  }
  return { broken: false, entries, failed, warnings };
}

/** Set by bin/leasebeat.js once it registered tsx itself, to run the CLI from its TypeScript sources. */
const TSX_REGISTERED = Symbol.for('leasebeat.tsx-registered');

/** Whether TypeScript already loads in this process: `node --import tsx`, tsx's CLI, or the bin from source. */
function tsxPresent(): boolean {
  return TSX_REGISTERED in globalThis || [...process.execArgv, process.env.NODE_OPTIONS ?? ''].some((arg) => arg.includes('tsx'));
}

/**
 * Registers tsx (unless present) and then the hooks that make a `.ts` job file a module. Only done once a
 * `.ts` job file is seen: module hooks run on a thread of their own, which costs about 30 MiB and 0.3 s,
 * so a process loading only `.js`/`.mjs` jobs never pays for it.
 */
async function registerTypeScriptHooks(): Promise<void> {
  if (!tsxPresent()) (await import('tsx/esm/api')).register();
  // After tsx, so that these run first and hand tsx the format.
  register(new URL('./esm-job-hooks.mjs', import.meta.url));
}

let esmHooks: Promise<void> | undefined;

/**
 * The URL a job file is imported by. A `.ts` job file is an ES module whatever package it sits in: tsx
 * would compile it as CommonJS outside a `"type": "module"` package (no top-level await, and with no
 * package.json at all not even TypeScript syntax), so a loader hook marks it as a module.
 */
async function jobFileUrl(file: string): Promise<string> {
  const url = `${pathToFileURL(file).href}?v=${++importVersion}`;
  if (!file.endsWith('.ts')) return url;
  esmHooks ??= registerTypeScriptHooks();
  await esmHooks;
  return `${url}&leasebeat-esm=1`;
}

async function withTimeout<T>(work: Promise<T>, doing: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    // Not unref'd: a top-level await that never settles leaves nothing else keeping the process alive,
    // and `leasebeat validate` must report it rather than exit 13 silently.
    timer = setTimeout(
      () => reject(new Error(`did not finish ${doing} within ${IMPORT_TIMEOUT_MS / 1000}s (an await that never settles?)`)),
      IMPORT_TIMEOUT_MS,
    );
  });
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

function oneLine(text: string): string {
  return text
    .split('\n')
    .map((line) => line.trim())
    .filter(Boolean)
    .join(' ')
    .slice(0, 500);
}

function describeImportError(error: unknown, file: string): string {
  if (!(error instanceof Error)) return `threw while being imported: ${String(error)}`;
  // tsx reports TypeScript syntax errors as "Transform failed with N error(s):\n<file>:<line>:<column>: ERROR: <text>".
  if (error.message.startsWith('Transform failed')) {
    const first = /:(\d+):\d+: ERROR: (.*)/.exec(error.message);
    if (first) return `has a syntax error on line ${first[1]}: ${oneLine(first[2]!)}`;
  }
  // Node keeps the location of a JavaScript syntax error out of the error object; `node --check` prints it.
  if (error instanceof SyntaxError) {
    const line = syntaxErrorLine(file);
    return `has a syntax error${line === undefined ? '' : ` on line ${line}`}: ${oneLine(error.message)}`;
  }
  return `threw while being imported: ${describeThrown(error)}`;
}

function describeThrown(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${oneLine(error.message)}` : String(error);
}

/** The line of a JavaScript file's syntax error, from `node --check` (only run for a file that failed to parse). */
function syntaxErrorLine(file: string): number | undefined {
  if (file.endsWith('.ts')) return undefined;
  const check = spawnSync(process.execPath, ['--check', file], { encoding: 'utf8', timeout: 5_000 });
  const escaped = file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const match = new RegExp(`^(?:file://)?${escaped}:(\\d+)$`, 'm').exec(check.stderr ?? '');
  return match ? Number(match[1]) : undefined;
}

interface FileState {
  file: string;
  /** The jobs the file defines; while an entry or the whole file is broken, their last good versions. */
  entries: Entry[];
  errors: string[];
  warnings: string[];
}

/** How messages name a definition: the file alone when it exports one, else the file and the entry. */
function entryLabel(file: string, { job, index }: Entry): string {
  return index === undefined ? shownPath(file) : `${shownPath(file)}: entry ${index} (${JSON.stringify(job.name)})`;
}

/**
 * A file's state after a load, keeping last good versions from `previous`: all of its jobs when the file
 * no longer loads, and a broken entry's job when an entry of the same name ran before.
 */
function fileState(file: string, outcome: FileOutcome, previous: FileState | undefined): FileState {
  const before = new Map((previous?.entries ?? []).map((entry) => [entry.job.name, entry]));
  if (outcome.broken) {
    const kept = previous?.entries ?? [];
    const note =
      kept.length === 0 ? '' : kept.length === 1 ? ` (the previous version of job "${kept[0]!.job.name}" keeps running)` : ` (the previous versions of its ${kept.length} jobs keep running)`;
    return { file, entries: kept, errors: outcome.errors.map((message) => message + note), warnings: previous?.warnings ?? [] };
  }
  const entries = [...outcome.entries];
  const errors: string[] = [];
  const loaded = new Set(entries.map((entry) => entry.job.name));
  for (const { name, errors: messages } of outcome.failed) {
    const kept = name === undefined || loaded.has(name) ? undefined : before.get(name);
    if (kept) {
      entries.push(kept);
      loaded.add(name!);
    }
    errors.push(...messages.map((message) => (kept ? `${message} (the previous version of job "${name}" keeps running)` : message)));
  }
  return { file, entries, errors, warnings: outcome.warnings };
}

/**
 * Builds the job set from per-file states (sorted by file name). A name is owned by the file that
 * owned it before, else by the first file in name order; any other file using it gets an error.
 */
function assemble(states: FileState[], previousOwners: ReadonlyMap<string, string>): LoadResult {
  const owners = new Map<string, string>();
  for (const { file, entries } of states) for (const { job } of entries) if (previousOwners.get(job.name) === file) owners.set(job.name, file);
  for (const { file, entries } of states) for (const { job } of entries) if (!owners.has(job.name)) owners.set(job.name, file);

  const jobs = new Map<string, ScheduledJob>();
  const errors: LoadError[] = [];
  const warnings: LoadError[] = [];
  for (const { file, entries, errors: messages, warnings: notes } of states) {
    errors.push(...messages.map((message) => ({ file, message })));
    warnings.push(...notes.map((message) => ({ file, message })));
    for (const entry of entries) {
      const owner = owners.get(entry.job.name)!;
      if (owner === file) {
        jobs.set(entry.job.name, entry.job);
        continue;
      }
      errors.push({
        file,
        message:
          `${entryLabel(file, entry)}: name "${entry.job.name}" is already defined in ${shownPath(owner)}, which keeps running it; ` +
          `this ${entry.index === undefined ? 'file' : 'entry'} is ignored until one of them is renamed`,
      });
    }
  }
  return { jobs, errors, warnings };
}

/**
 * Imports and validates every job file in `dir`. A broken file or entry never stops the others: its
 * problems are returned in `errors`. When two files use one name, the first by file name wins.
 */
export async function loadJobs(dir: string): Promise<LoadResult> {
  const files = await listJobFiles(dir);
  const outcomes = await Promise.all(files.map((file) => loadJobFile(file)));
  return assemble(files.map((file, i) => fileState(file, outcomes[i]!, undefined)), new Map());
}

/** Names logged per kind of change: a file of 100,000 definitions would otherwise log a line of megabytes. */
const MAX_LOGGED_NAMES = 20;

function namesForLog(names: string[]): string[] {
  return names.length <= MAX_LOGGED_NAMES ? names : [...names.slice(0, MAX_LOGGED_NAMES), `… and ${names.length - MAX_LOGGED_NAMES} more`];
}

export interface RegistrySnapshot {
  jobs: ReadonlyMap<string, ScheduledJob>;
  errors: readonly LoadError[];
}

/** A change to the job set, with the names that appeared, changed or disappeared. */
export interface RegistryChange extends RegistrySnapshot {
  added: string[];
  updated: string[];
  removed: string[];
}

export interface JobRegistryOptions {
  logger?: Logger;
  /** How long the folder must be quiet before a change is loaded; default 100 ms. */
  debounceMs?: number;
}

/**
 * The job set of a folder, kept current while the process runs. Edits take effect without a restart;
 * a broken edit keeps the last good version of that file's job running and reports why; a deleted
 * file removes its job and a new file adds one. Emits `change` whenever the jobs or the errors change.
 * Files are compared by content, so saving a file unchanged does nothing.
 */
export class JobRegistry extends EventEmitter<{ change: [RegistryChange] }> {
  private readonly files = new Map<string, FileState & { hash: string }>();
  private current: LoadResult = { jobs: new Map(), errors: [], warnings: [] };
  private readonly log: Logger;
  private readonly debounceMs: number;
  private watcher: FSWatcher | undefined;
  private timer: NodeJS.Timeout | undefined;
  private scans: Promise<unknown> = Promise.resolve();
  private closed = false;

  constructor(
    readonly dir: string,
    options: JobRegistryOptions = {},
  ) {
    super();
    this.log = options.logger ?? silentLogger;
    this.debounceMs = options.debounceMs ?? DEFAULT_DEBOUNCE_MS;
  }

  get jobs(): ReadonlyMap<string, ScheduledJob> {
    return this.current.jobs;
  }

  get errors(): readonly LoadError[] {
    return this.current.errors;
  }

  /** Starts watching, then loads every file (emitting the first `change`). Throws if `dir` cannot be read. */
  async start(): Promise<RegistrySnapshot> {
    // Watch before the first scan so that an edit made during it is not lost.
    this.watcher = watch(this.dir, () => this.scheduleScan());
    this.watcher.on('error', (error) => this.log.error({ err: error, dir: this.dir }, 'watching the jobs folder failed'));
    try {
      return await this.reload();
    } catch (error) {
      await this.close();
      throw error;
    }
  }

  /** Rescans the folder now; scans never overlap. */
  reload(): Promise<RegistrySnapshot> {
    const scan = this.scans.then(() => this.scan());
    this.scans = scan.catch(() => undefined);
    return scan;
  }

  /** Stops watching and waits for a scan in progress. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    this.watcher?.close();
    await this.scans;
  }

  private scheduleScan(): void {
    if (this.closed) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.reload().catch((error: unknown) => this.log.error({ err: error, dir: this.dir }, 'reloading job definitions failed'));
    }, this.debounceMs);
  }

  private async scan(): Promise<RegistrySnapshot> {
    const files = await listJobFiles(this.dir);
    const present = new Set(files);
    for (const file of this.files.keys()) if (!present.has(file)) this.files.delete(file);
    // Several files at once: a folder of 10,000 files one after the other took 40 s.
    let taken = 0;
    const refreshing = async (): Promise<void> => {
      while (taken < files.length) await this.refresh(files[taken++]!);
    };
    await Promise.all(Array.from({ length: PARALLEL_FILE_LOADS }, refreshing));

    const previous = this.current;
    const owners = new Map([...previous.jobs.values()].map((job) => [job.name, job.file]));
    const states = files.map((file) => this.files.get(file)).filter((state) => state !== undefined);
    const next = assemble(states, owners);
    this.current = next;

    const change: RegistryChange = {
      ...next,
      added: [...next.jobs.keys()].filter((name) => !previous.jobs.has(name)),
      updated: [...next.jobs.keys()].filter((name) => previous.jobs.has(name) && previous.jobs.get(name) !== next.jobs.get(name)),
      removed: [...previous.jobs.keys()].filter((name) => !next.jobs.has(name)),
    };
    const previousMessages = new Set(previous.errors.map((error) => error.message));
    const newErrors = next.errors.filter((error) => !previousMessages.has(error.message));
    const errorsChanged = newErrors.length > 0 || next.errors.length !== previous.errors.length;
    for (const error of newErrors) this.log.warn({ file: error.file }, error.message);
    if (change.added.length + change.updated.length + change.removed.length > 0 || errorsChanged) {
      this.log.info(
        { added: namesForLog(change.added), updated: namesForLog(change.updated), removed: namesForLog(change.removed), errors: next.errors.length },
        'job definitions changed',
      );
      this.emit('change', change);
    }
    return next;
  }

  /** Re-imports a file if its content changed; a broken file or entry keeps its previous jobs. */
  private async refresh(file: string): Promise<void> {
    let content: Buffer;
    try {
      content = await readFile(file);
    } catch {
      this.files.delete(file); // deleted while scanning; the next event rescans
      return;
    }
    const hash = createHash('sha256').update(content).digest('hex');
    const previous = this.files.get(file);
    if (previous?.hash === hash) return;
    const outcome = await loadJobFile(file);
    if (!outcome.broken) for (const warning of outcome.warnings) this.log.warn({ file }, warning);
    this.files.set(file, { ...fileState(file, outcome, previous), hash });
  }
}
