import { UnrecoverableError } from 'bullmq';
import type { Logger } from 'pino';
import { formatDuration } from '../scheduling/duration.js';

/**
 * A run outlived its definition's `timeout`: its `ctx.signal` was aborted at the deadline (with this
 * error as the reason), and the run failed. `ignoredSignal`: the handler had not stopped when the grace
 * period ended, so the run was failed without it; it may still be running in its process.
 */
export class RunTimeoutError extends Error {
  override readonly name = 'RunTimeoutError';
  constructor(
    readonly runId: string,
    readonly timeoutMs: number,
    readonly ignoredSignal: boolean,
  ) {
    super(
      ignoredSignal
        ? `run ${runId} timed out after ${formatDuration(timeoutMs)} and its handler did not stop within the grace period (it ignores ctx.signal); failed without it, it may still be running`
        : `run ${runId} timed out after ${formatDuration(timeoutMs)}`,
    );
  }
}

/**
 * A run was cancelled because a newer tick of its job came due (overlap `cancelOther`): its `ctx.signal`
 * was aborted (with this error as the reason), and the run failed, for good (it is not retried), once its
 * handler stopped. `ignoredSignal`: the handler had not stopped when its `timeoutGrace` ended, so the run
 * was failed without it (the newer tick then starts); it may still be running in its process.
 */
export class RunCancelledError extends UnrecoverableError {
  override readonly name = 'RunCancelledError';
  constructor(
    readonly runId: string,
    readonly byTick: number,
    readonly ignoredSignal = false,
  ) {
    super(
      ignoredSignal
        ? `run ${runId} was cancelled by tick ${new Date(byTick).toISOString()} (overlap cancelOther) and its handler did not stop within the grace period (it ignores ctx.signal); failed without it, it may still be running`
        : `run ${runId} was cancelled by tick ${new Date(byTick).toISOString()} (overlap cancelOther)`,
    );
  }
}

/**
 * A run was terminated because a newer tick of its job came due (overlap `terminateOther`): it failed at
 * once, for good (it is not retried), and its handler's `ctx.signal` was aborted with this error as the
 * reason; the handler was let go and may still be running in its process.
 */
export class RunTerminatedError extends UnrecoverableError {
  override readonly name = 'RunTerminatedError';
  constructor(
    readonly runId: string,
    readonly byTick: number,
  ) {
    super(`run ${runId} was terminated by tick ${new Date(byTick).toISOString()} (overlap terminateOther); its handler was let go and may still be running`);
  }
}

/** How an error that stops a run (the reason its signal aborts with) decides the run's end. */
interface RunStop {
  /**
   * Set when the run waits for its handler to stop, up to the grace period: the error the run fails with
   * when the handler is still running then, and what is logged. Unset: the run fails at once.
   */
  ignored?: { error: Error; warning: string };
}

/** Why a run stops before its handler is done: its deadline, or a newer tick of its job. */
export type RunStopError = RunTimeoutError | RunCancelledError | RunTerminatedError;

/** How `reason`, the reason a run's signal aborted with, ends the run; undefined when it is no stop (a shutdown's). */
function stopOf(reason: unknown): RunStop | undefined {
  if (reason instanceof RunTimeoutError) {
    const error = new RunTimeoutError(reason.runId, reason.timeoutMs, true);
    return { ignored: { error, warning: 'a handler past its deadline ignored its signal; the run is failed without it' } };
  }
  if (reason instanceof RunCancelledError) {
    const error = new RunCancelledError(reason.runId, reason.byTick, true);
    return { ignored: { error, warning: 'a handler whose run was cancelled by a newer tick ignored its signal; the run is failed without it' } };
  }
  return reason instanceof RunTerminatedError ? {} : undefined;
}

/** What {@link runWithDeadline} needs of the run. */
export interface Deadline {
  runId: string;
  /** Undefined: no deadline; the handler's own outcome stands, unless the run is stopped. */
  timeoutMs: number | undefined;
  graceMs: number;
  /**
   * Aborted at the deadline, with the RunTimeoutError as its reason. Aborting it with another
   * {@link RunStopError} stops the run likewise; other reasons (a shutdown) leave the outcome to the handler.
   */
  abort: AbortController;
  log: Logger;
}

/**
 * Runs `handler` under the run's deadline (Kubernetes' `activeDeadlineSeconds`), and lets the run be
 * stopped (overlap `cancelOther`, `terminateOther`): at the deadline, or when stopped, the signal aborts;
 * whatever the handler then does, the run fails with the stop's error, as soon as the handler stops or when
 * the grace period ends, whichever comes first (at once for a termination). A handler that ignores its
 * signal is reported and let go, not waited on for ever. Timers are monotonic (setTimeout), so a stepped
 * wall clock neither shortens nor lengthens a deadline.
 */
export async function runWithDeadline(handler: () => Promise<unknown>, deadline: Deadline): Promise<unknown> {
  const { timeoutMs, abort } = deadline;
  let stoppedBy: Error | undefined;
  let timer: NodeJS.Timeout | undefined;
  let onAbort: (() => void) | undefined;
  // Once stopped, a result or an error of the handler's (often the abort it was told of) is the stop's error.
  const running = handler().then(
    (value) => {
      if (stoppedBy) throw stoppedBy;
      return value;
    },
    (error: unknown) => {
      throw stoppedBy ?? error;
    },
  );
  const cutOff = new Promise<never>((_, reject) => {
    onAbort = () => {
      const reason: unknown = abort.signal.reason;
      const stop = stopOf(reason);
      if (!stop || stoppedBy) return;
      stoppedBy = reason as Error;
      clearTimeout(timer);
      const { ignored } = stop;
      if (!ignored) return reject(stoppedBy);
      timer = setTimeout(() => {
        deadline.log.warn({ jobId: deadline.runId, err: ignored.error, graceMs: deadline.graceMs }, ignored.warning);
        reject(ignored.error);
      }, deadline.graceMs);
    };
    if (abort.signal.aborted) onAbort();
    else abort.signal.addEventListener('abort', onAbort, { once: true });
    if (timeoutMs !== undefined && !stoppedBy) timer = setTimeout(() => abort.abort(new RunTimeoutError(deadline.runId, timeoutMs, false)), timeoutMs);
  });
  try {
    return await Promise.race([running, cutOff]);
  } finally {
    clearTimeout(timer);
    if (onAbort) abort.signal.removeEventListener('abort', onAbort);
  }
}
