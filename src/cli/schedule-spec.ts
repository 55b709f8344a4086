import { readFileSync } from 'node:fs';
import { extname } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { ConfigError } from '../config/cli-support.js';
import type { ScheduleSpec } from '../index.js';
import { durationOf, jsonOf, wholeNumber } from './flags.js';

/** The flags of `leasebeat schedules upsert`, as commander gives them. */
export interface SpecFlags {
  file?: string;
  job?: string;
  schedule?: string;
  every?: string;
  at?: string;
  timezone?: string;
  data?: string;
  overlap?: string;
  bufferMax?: string;
  catchupWindow?: string;
  catchupMode?: string;
  catchupMax?: string;
  jitter?: string;
  startAt?: string;
  endAt?: string;
  limit?: string;
  /** `--paused` true, `--no-paused` false (to override a file's), neither undefined. */
  paused?: boolean;
  note?: string;
}

/** The one spec a `--file` holds: JSON for `.json`, YAML (a superset of JSON) for anything else. */
export function readSpecFile(file: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new ConfigError(`--file ${file}: cannot be read (${(error as NodeJS.ErrnoException).code ?? (error as Error).message}): give the path of a spec in JSON or YAML`);
  }
  const json = extname(file).toLowerCase() === '.json';
  let parsed: unknown;
  try {
    parsed = json ? JSON.parse(text) : parseYaml(text);
  } catch (error) {
    // YAML's messages go on with a picture of the line; its first line says what and where.
    throw new ConfigError(`--file ${file}: not valid ${json ? 'JSON' : 'YAML'}: ${(error as Error).message.split('\n')[0]!.trim()}`);
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new ConfigError(`--file ${file}: holds ${Array.isArray(parsed) ? 'a list' : parsed === null ? 'nothing' : `a ${typeof parsed}`}, not one spec: write one mapping, like job: send-report and schedule: "0 9 * * *"`);
  }
  return parsed as Record<string, unknown>;
}

/**
 * The spec to upsert: the `--file`'s, with each flag given overriding its field. Only the form of the flags
 * is checked here (numbers, JSON); the spec itself is checked by `schedules.upsert`, with its own messages.
 */
export function specFromFlags(flags: SpecFlags): ScheduleSpec {
  const spec: Record<string, unknown> = flags.file === undefined ? {} : readSpecFile(flags.file);
  // When is one choice of three: a timing flag replaces the file's timing instead of adding a second one.
  if (flags.schedule !== undefined || flags.every !== undefined || flags.at !== undefined) {
    delete spec.schedule;
    delete spec.every;
    delete spec.at;
  }
  const set = (field: string, value: unknown): void => {
    if (value !== undefined) spec[field] = value;
  };
  set('job', flags.job);
  set('schedule', flags.schedule);
  set('every', flags.every === undefined ? undefined : durationOf(flags.every));
  // An instant: epoch ms when it is a bare number, else the ISO 8601 string the spec checks.
  set('at', flags.at === undefined ? undefined : /^\d+$/.test(flags.at) ? Number(flags.at) : flags.at);
  set('timezone', flags.timezone);
  set('data', flags.data === undefined ? undefined : jsonOf('--data', flags.data));
  set('overlap', flags.overlap);
  set('bufferMax', flags.bufferMax === undefined ? undefined : wholeNumber('--buffer-max', flags.bufferMax));
  set('jitter', flags.jitter === undefined ? undefined : durationOf(flags.jitter));
  set('startAt', flags.startAt);
  set('endAt', flags.endAt);
  set('limit', flags.limit === undefined ? undefined : wholeNumber('--limit', flags.limit));
  set('paused', flags.paused);
  set('note', flags.note);
  if (flags.catchupWindow !== undefined || flags.catchupMode !== undefined || flags.catchupMax !== undefined) {
    const base = spec.catchup;
    const catchup: Record<string, unknown> = base !== null && typeof base === 'object' && !Array.isArray(base) ? { ...(base as Record<string, unknown>) } : {};
    if (flags.catchupWindow !== undefined) catchup.window = durationOf(flags.catchupWindow);
    if (flags.catchupMode !== undefined) catchup.mode = flags.catchupMode;
    if (flags.catchupMax !== undefined) catchup.max = wholeNumber('--catchup-max', flags.catchupMax);
    spec.catchup = catchup;
  }
  // Unchecked on purpose: `upsert` validates every field and names each problem.
  return spec as unknown as ScheduleSpec;
}
