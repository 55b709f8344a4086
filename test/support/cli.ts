import { execFile } from 'node:child_process';

/** What a finished CLI process printed and how it ended. */
export interface CliResult {
  /** The exit code; null when the process was killed (by `timeoutMs`, say). */
  code: number | null;
  stdout: string;
  stderr: string;
  /** How long it ran, in ms. */
  elapsedMs: number;
}

const binary = new URL('../../bin/leasebeat.js', import.meta.url).pathname;

/**
 * Runs `leasebeat <args>` as a real process with `env` on top of this process's environment. A process
 * still running after `timeoutMs` is killed and reported with code null, so a hang fails the test rather
 * than the run.
 */
export function runCli(args: string[], options: { env?: Record<string, string>; cwd?: string; timeoutMs?: number } = {}): Promise<CliResult> {
  const started = Date.now();
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [binary, ...args],
      { env: { ...process.env, ...options.env }, cwd: options.cwd, timeout: options.timeoutMs ?? 60_000, killSignal: 'SIGKILL' },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : null) : 0;
        resolve({ code, stdout, stderr, elapsedMs: Date.now() - started });
      },
    );
  });
}

/** The stderr of a configuration failure: exactly one line, which is returned. */
export function oneLine(result: CliResult): string {
  const lines = result.stderr.trim().split('\n');
  if (lines.length !== 1) throw new Error(`expected one line on stderr, got ${lines.length}:\n${result.stderr}`);
  return lines[0]!;
}
