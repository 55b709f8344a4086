import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';

/** A `node --import tsx` child running one of the bench's helper scripts, talking in lines on stdout. */
export interface BenchChild {
  child: ChildProcess;
  /** Resolves with the first stdout line that `predicate` accepts. */
  line(predicate: (line: string) => boolean, timeoutMs?: number): Promise<string>;
  /** SIGTERM, then SIGKILL after 10 s. */
  stop(): Promise<void>;
}

export function startChild(script: string, args: string[]): BenchChild {
  const child = spawn(process.execPath, ['--import', 'tsx', new URL(script, import.meta.url).pathname, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  const lines: string[] = [];
  const waiters = new Set<{ predicate: (line: string) => boolean; resolve: (line: string) => void }>();
  createInterface({ input: child.stdout }).on('line', (text) => {
    lines.push(text);
    for (const waiter of waiters) {
      if (!waiter.predicate(text)) continue;
      waiters.delete(waiter);
      waiter.resolve(text);
    }
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    child,
    line: (predicate, timeoutMs = 120_000) => {
      const seen = lines.find(predicate);
      if (seen !== undefined) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        const waiter = { predicate, resolve };
        waiters.add(waiter);
        setTimeout(() => {
          if (waiters.delete(waiter)) reject(new Error(`${script}: no expected line within ${timeoutMs} ms`));
        }, timeoutMs).unref();
      });
    },
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const killer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(killer);
    },
  };
}
