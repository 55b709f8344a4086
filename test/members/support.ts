import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
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
