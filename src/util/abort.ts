import { abortReason, type Clock } from './clock.js';

/** Thrown when a single request outlives its bound. */
export class RequestTimeoutError extends Error {
  override readonly name = 'RequestTimeoutError';
}

/**
 * Runs `request` with a signal that aborts when `parent` aborts or after `timeoutMs` on `clock`. The
 * returned promise settles no later than that abort, even if `request` ignores its signal: a hung
 * backend must never keep the caller waiting.
 */
export async function withTimeout<T>(
  clock: Clock,
  timeoutMs: number,
  parent: AbortSignal | undefined,
  what: string,
  request: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const controller = new AbortController();
  const timerControl = new AbortController();
  const onParentAbort = (): void => controller.abort(abortReason(parent!));
  if (parent?.aborted) onParentAbort();
  else parent?.addEventListener('abort', onParentAbort, { once: true });
  clock.sleep(timeoutMs, timerControl.signal).then(
    () => controller.abort(new RequestTimeoutError(`${what} timed out after ${timeoutMs} ms`)),
    () => undefined,
  );
  try {
    return await raceAbort(request(controller.signal), controller.signal);
  } finally {
    timerControl.abort();
    parent?.removeEventListener('abort', onParentAbort);
  }
}

/** Settles with `promise`, or rejects as soon as `signal` aborts. A late rejection of `promise` is absorbed. */
export function raceAbort<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) {
    promise.catch(() => undefined);
    return Promise.reject(abortReason(signal));
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(abortReason(signal));
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error instanceof Error ? error : new Error(String(error)));
      },
    );
  });
}
