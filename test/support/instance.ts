import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';

/** One log line of a leasebeat process (pino JSON). */
export interface LogLine {
  level: number;
  time: number;
  msg: string;
  [field: string]: unknown;
}

/** A real `leasebeat start` process, its parsed log, and helpers to wait on it. */
export interface Instance {
  identity: string;
  child: ChildProcess;
  logs: LogLine[];
  /** What the process wrote to stderr, line by line (a crash before the logger exists lands here). */
  stderr: string[];
  waitForLog(predicate: (line: LogLine) => boolean, timeoutMs?: number): Promise<LogLine>;
  exited(): Promise<number | null>;
}

const binary = new URL('../../bin/leasebeat.js', import.meta.url).pathname;

/** Fast election timings for multi-process tests: a crash fails over in about 2.5 s. */
export const FAST_ELECTION = { LEASEBEAT_LEASE_DURATION: '2s', LEASEBEAT_RENEW_DEADLINE: '1500ms', LEASEBEAT_RETRY_PERIOD: '250ms' };

/** Starts `leasebeat start` with the given environment (on top of this process's). */
export function startInstance(identity: string, env: Record<string, string>): Instance {
  const child = spawn(process.execPath, [binary, 'start'], {
    env: { ...process.env, LEASEBEAT_IDENTITY: identity, LEASEBEAT_HTTP_PORT: '0', LEASEBEAT_LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const logs: LogLine[] = [];
  const waiters = new Set<{ predicate: (line: LogLine) => boolean; resolve: (line: LogLine) => void }>();
  createInterface({ input: child.stdout }).on('line', (text) => {
    let line: LogLine;
    try {
      line = JSON.parse(text) as LogLine;
    } catch {
      return;
    }
    logs.push(line);
    for (const waiter of waiters) {
      if (waiter.predicate(line)) {
        waiters.delete(waiter);
        waiter.resolve(line);
      }
    }
  });
  const stderr: string[] = [];
  createInterface({ input: child.stderr }).on('line', (text) => stderr.push(text));
  const exit = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return {
    identity,
    child,
    logs,
    stderr,
    exited: () => exit,
    waitForLog(predicate, timeoutMs = 20_000) {
      const seen = logs.find(predicate);
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        const waiter = { predicate, resolve };
        waiters.add(waiter);
        setTimeout(() => {
          if (!waiters.delete(waiter)) return;
          reject(new Error(`${identity}: no matching log line within ${timeoutMs} ms; stderr: ${stderr.slice(-5).join(' | ')}`));
        }, timeoutMs).unref();
      });
    },
  };
}

/** Ends every instance at once, as a suite's cleanup: SIGKILL, after a SIGCONT for one a test froze. */
export function killAll(instances: Instance[]): void {
  for (const instance of instances) {
    instance.child.kill('SIGCONT');
    instance.child.kill('SIGKILL');
  }
}

/**
 * The last `count` log lines (and stderr lines) of each instance, compact: for the message of a failed
 * wait, so that a failure in CI shows what the instances did.
 */
export function recentOutput(instances: Instance[], count = 15): string {
  return instances
    .map(({ identity, logs, stderr }) => {
      const lines = logs.slice(-count).map(({ time, level, msg, pid: _pid, hostname: _hostname, name: _name, ...fields }) => {
        const rest = Object.keys(fields).length > 0 ? ` ${JSON.stringify(fields)}` : '';
        return `  ${new Date(time).toISOString()} ${level} ${msg}${rest}`;
      });
      const errors = stderr.slice(-5).map((line) => `  stderr: ${line}`);
      return [`${identity} (last ${lines.length} of ${logs.length} log lines):`, ...lines, ...errors].join('\n');
    })
    .join('\n');
}

/**
 * `wait` (an `until`, say), with what the test can read of the state (`describe`: ledger records, job
 * states) and the instances' recent output added to its error when it fails.
 */
export async function explainFailure<T>(wait: Promise<T>, instances: Instance[], describe?: () => Promise<string>): Promise<T> {
  try {
    return await wait;
  } catch (error) {
    const state = describe ? await describe().catch((reason: unknown) => `(could not read the state: ${String(reason)})`) : '';
    if (error instanceof Error) error.message = [error.message, state, recentOutput(instances)].filter(Boolean).join('\n');
    throw error;
  }
}
