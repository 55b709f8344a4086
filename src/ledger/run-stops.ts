/**
 * The stop requests a leader makes of a run when a newer tick of its job comes due (overlap `cancelOther`:
 * `cancel`, `terminateOther`: `terminate`), as written by requestRunStop.lua and read by the worker pools:
 * kept under the run's key for a worker that has not started it yet, and published to every instance.
 */

/** How a run is asked to stop: `cancel` waits for its handler to honour its signal (up to its grace); `terminate` fails it at once. */
export type RunStopHow = 'cancel' | 'terminate';

export interface RunStopRequest {
  /** The BullMQ job id of the run to stop. */
  jobId: string;
  how: RunStopHow;
  /** The nominal tick (ms) whose coming due stops it. */
  byTick: number;
}

/**
 * How long a stop request is kept for a run that has not started: a run waiting this long has lost its
 * worth, and the key does not outlive it by much (it is no longer the job's previous run by then, or it is
 * one that no worker could take for a day).
 */
export const RUN_STOP_KEEP_MS = 24 * 3_600_000;

/** The request a stored or published text holds; undefined for anything else (another version's, a stray message). */
export function parseRunStop(text: string | null | undefined): RunStopRequest | undefined {
  if (!text) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (value === null || typeof value !== 'object') return undefined;
  const { jobId, how, byTick } = value as Record<string, unknown>;
  if (typeof jobId !== 'string' || (how !== 'cancel' && how !== 'terminate') || typeof byTick !== 'number') return undefined;
  return { jobId, how, byTick };
}
