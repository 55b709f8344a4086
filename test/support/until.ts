import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Polls `probe` every `intervalMs` until it returns a value (not undefined/false) and returns that value;
 * throws after `timeoutMs`, naming `what` it waited for. The one polling helper of the tests.
 */
export async function until<T>(
  what: string,
  probe: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs = 20_000,
  intervalMs = 25,
): Promise<T> {
  // On the monotonic clock: a step of the wall clock must not end (or stretch) a wait.
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(intervalMs);
  }
}
