/**
 * An exponential backoff: `initialMs` doubled for each attempt before this one (`attempt` counts from 0),
 * at most `maxMs`. Retries of a failing Redis call back off so, so that a down server is not hammered.
 */
export function backoffMs(attempt: number, initialMs: number, maxMs: number): number {
  return Math.min(initialMs * 2 ** attempt, maxMs);
}
