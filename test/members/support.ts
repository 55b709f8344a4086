import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Clock } from '../../src/util/clock.js';
import type { ManualClock } from '../support/manual-clock.js';

/**
 * A member's wall clock `offsetMs` away from the shared manual clock, with the same flow of time: the
 * realistic shape of clock skew. The offset may change mid-test, as a stepped clock would; the monotonic
 * clock is the shared one's, since a step never moves it.
 */
export class SkewedClock implements Clock {
  constructor(
    private readonly base: ManualClock,
    public offsetMs: number,
  ) {}

  now(): number {
    return this.base.now() + this.offsetMs;
  }

  monotonic(): number {
    return this.base.monotonic();
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return this.base.sleep(ms, signal);
  }
}

/** Polls `probe` every 25 ms until it returns a value (not undefined/false), or throws after `timeoutMs`. */
export async function until<T>(what: string, probe: () => Promise<T | undefined | false>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(25);
  }
}

const run = promisify(execFile);
const binary = new URL('../../bin/leasebeat.js', import.meta.url).pathname;

/** Runs a `leasebeat` CLI command as a real process. */
export async function leasebeatCli(args: string[], env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [binary, ...args], { env: { ...process.env, ...env }, timeout: 90_000 });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}
