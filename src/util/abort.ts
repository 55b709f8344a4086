import { abortReason, type Clock } from './clock.js';

/** Thrown when a single request outlives its bound. */
export class RequestTimeoutError extends Error {
  override readonly name = 'RequestTimeoutError';
}

/** A signal that aborts when `parent` aborts, or with `reason()` after `ms` on `clock`; `dispose` stops the timer. */
export function deadline(clock: Clock, ms: number, reason: () => Error, parent?: AbortSignal): { signal: AbortSignal; dispose(): void } {
  const controller = new AbortController();
  const timer = new AbortController();
  const onParentAbort = (): void => controller.abort(abortReason(parent!));
  if (parent?.aborted) onParentAbort();
  else parent?.addEventListener('abort', onParentAbort, { once: true });
  clock.sleep(ms, timer.signal).then(
    () => controller.abort(reason()),
    () => undefined,
  );
  return {
    signal: controller.signal,
    dispose: () => {
      timer.abort();
      parent?.removeEventListener('abort', onParentAbort);
    },
  };
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
  const bound = deadline(clock, timeoutMs, () => new RequestTimeoutError(`${what} timed out after ${timeoutMs} ms`), parent);
  try {
    return await raceAbort(request(bound.signal), bound.signal);
  } finally {
    bound.dispose();
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
