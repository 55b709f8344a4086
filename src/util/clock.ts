/**
 * The source of time for the elector and the scheduler. Injected so that state-machine tests can step
 * time deterministically instead of sleeping.
 */
export interface Clock {
  /**
   * Wall-clock milliseconds since the Unix epoch: for timestamps that are written down or shown. Never
   * for durations: NTP steps it, an operator sets it, a resumed VM jumps it, in either direction.
   */
  now(): number;
  /**
   * Milliseconds on a clock that only runs forward at a steady rate, from an arbitrary origin: for every
   * duration (how long since, how long until). Only differences of two readings mean anything. Like Go's
   * monotonic clock reading, which client-go's leader election relies on, it may stop while the host is
   * suspended.
   */
  monotonic(): number;
  /** Resolves after `ms` (of monotonic time), or rejects with the signal's reason once it aborts. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

/** The process clock, backed by `Date.now`, `performance.now` and `setTimeout` (itself monotonic). */
export const systemClock: Clock = {
  now: () => Date.now(),
  monotonic: () => performance.now(),
  sleep: (ms, signal) =>
    new Promise<void>((resolve, reject) => {
      if (signal?.aborted) {
        reject(abortReason(signal));
        return;
      }
      const onAbort = (): void => {
        clearTimeout(timer);
        reject(abortReason(signal!));
      };
      const timer = setTimeout(() => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      }, Math.max(0, ms));
      signal?.addEventListener('abort', onAbort, { once: true });
    }),
};

/** The reason an aborted signal carries, always as an Error. */
export function abortReason(signal: AbortSignal): Error {
  const reason: unknown = signal.reason;
  if (reason instanceof Error) return reason;
  return new Error(typeof reason === 'string' ? reason : 'aborted');
}
