import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';

/** A child process of the bench, talking in lines on stdout. */
export interface BenchChild {
  child: ChildProcess;
  /** Resolves with the first stdout line that `predicate` accepts; rejects if the child exits first. */
  line(predicate: (line: string) => boolean, timeoutMs?: number): Promise<string>;
  /** What it last said, to name why it failed: its last error line on stderr (when piped), else its last line. */
  lastLine(): string | undefined;
  /** Its peak resident memory so far (the kernel's VmHWM), MiB; undefined once it exited. */
  peakRssMiB(): number | undefined;
  /** SIGTERM, then SIGKILL after 10 s. */
  stop(): Promise<void>;
}

/** A `node --import tsx` child running one of the bench's helper scripts; its stderr goes to the bench's. */
export function startChild(script: string, args: string[]): BenchChild {
  const path = new URL(script, import.meta.url).pathname;
  return watch(script, spawn(process.execPath, ['--import', 'tsx', path, ...args], { stdio: ['ignore', 'pipe', 'inherit'] }));
}

/** Any command as a child, both its outputs piped (kept for `lastLine`), e.g. a tree's `leasebeat start`. */
export function startProcess(name: string, command: string, args: string[], options: Omit<SpawnOptions, 'stdio'>): BenchChild {
  return watch(name, spawn(command, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] }));
}

function watch(name: string, child: ChildProcess): BenchChild {
  const lines: string[] = [];
  let last: string | undefined;
  let lastError: string | undefined;
  let lastStderr: string | undefined;
  const waiters = new Set<{ predicate: (line: string) => boolean; resolve: (line: string) => void; reject: (error: Error) => void }>();
  createInterface({ input: child.stdout! }).on('line', (text) => {
    lines.push(text);
    last = text;
    for (const waiter of waiters) {
      if (!waiter.predicate(text)) continue;
      waiters.delete(waiter);
      waiter.resolve(text);
    }
  });
  // A crash ends with its stack and Node's version: the line naming the error is the one worth showing.
  if (child.stderr) {
    createInterface({ input: child.stderr }).on('line', (text) => {
      if (text.trim() === '') return;
      lastStderr = text;
      if (/error/i.test(text)) lastError = text;
    });
  }
  child.once('error', (error) => void (lastError = error.message));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  // A child that died answers no more lines: its waiters learn it now, not at their timeout.
  child.once('close', (code, signal) => {
    for (const waiter of waiters) waiter.reject(new Error(`${name} exited (${signal ?? code}) before the expected line; last output: ${lastError ?? lastStderr ?? last ?? 'none'}`));
    waiters.clear();
  });
  const running = (): boolean => child.exitCode === null && child.signalCode === null;
  return {
    child,
    line: (predicate, timeoutMs = 120_000) => {
      const seen = lines.find(predicate);
      if (seen !== undefined) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        const waiter = { predicate, resolve, reject };
        waiters.add(waiter);
        setTimeout(() => {
          if (waiters.delete(waiter)) reject(new Error(`${name}: no expected line within ${timeoutMs} ms`));
        }, timeoutMs).unref();
      });
    },
    lastLine: () => lastError ?? lastStderr ?? last,
    peakRssMiB: () => (running() && child.pid !== undefined ? peakRssMiB(child.pid) : undefined),
    stop: async () => {
      if (!running()) return;
      child.kill('SIGTERM');
      const killer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(killer);
    },
  };
}

/** A process' high-water mark of resident memory, from /proc (Linux), MiB. */
function peakRssMiB(pid: number): number | undefined {
  try {
    const kib = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return kib === undefined ? undefined : Number(kib) / 1024;
  } catch {
    return undefined; // gone, or not Linux
  }
}
