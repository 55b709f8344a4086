import { UnrecoverableError } from 'bullmq';
import type { Logger } from 'pino';
import { formatDuration } from '../scheduling/duration.js';
import type { Clock } from '../util/clock.js';
import type { RunStopRequest } from '../ledger/run-stops.js';

/**
 * A run outlived its definition's `timeout`: the reason its `ctx.signal` aborts with at the deadline and,
 * with `stoppedAfterMs` (how long after the deadline its handler stopped), the error the run fails with
 * once the handler has stopped. Retried per `attempts`: no attempt of the run is running any more.
 */
export class RunTimeoutError extends Error {
  override readonly name = 'RunTimeoutError';
  constructor(
    readonly runId: string,
    readonly timeoutMs: number,
    readonly stoppedAfterMs?: number,
  ) {
    super(
      stoppedAfterMs === undefined
        ? `run ${runId} timed out after ${formatDuration(timeoutMs)}`
        : `run ${runId} timed out after ${formatDuration(timeoutMs)}; its handler stopped ${Math.round(stoppedAfterMs)} ms after the deadline`,
    );
  }
}

/**
 * A run outlived its `timeout` and its handler did not stop within `timeoutGrace`: the run fails for good
 * (an UnrecoverableError, so BullMQ does not retry it: a retry would run beside the handler, which is let
 * go and may still be running in its process).
 */
export class RunTimeoutFinalError extends UnrecoverableError {
  override readonly name = 'RunTimeoutFinalError';
  constructor(
    readonly runId: string,
    readonly timeoutMs: number,
    readonly graceMs: number,
  ) {
    super(
      `run ${runId} timed out after ${formatDuration(timeoutMs)}; its handler did not stop within its ${formatDuration(graceMs)} grace (it ignores ctx.signal): ` +
        'the run is made final, not retried, and the handler is let go (it may still be running)',
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

/** The error a run stopped by a newer tick fails with. */
export function stopError(request: RunStopRequest): RunStopError {
  return request.how === 'cancel' ? new RunCancelledError(request.jobId, request.byTick) : new RunTerminatedError(request.jobId, request.byTick);
}

export function stoppedByTick(error: unknown): error is RunCancelledError | RunTerminatedError {
  return error instanceof RunCancelledError || error instanceof RunTerminatedError;
}

/** How an error that stops a run (the reason its signal aborts with) decides the run's end. */
interface RunStop {
  /** The error the run fails with once its handler has stopped, `afterMs` after the stop. */
  stopped(afterMs: number): Error;
  /**
   * Set when the run waits for its handler to stop, up to the grace period: the error the run fails with
   * when the handler is still running then, and how that is logged. Unset: the run fails at once.
   */
  unstopped?: { error: Error; level: 'error' | 'warn'; message: string };
}

/** Why a run stops before its handler is done: its deadline, or a newer tick of its job. */
export type RunStopError = RunTimeoutError | RunCancelledError | RunTerminatedError;

/** How `reason`, the reason a run's signal aborted with, ends the run; undefined when it is no stop (a shutdown's). */
function stopOf(reason: unknown, graceMs: number): RunStop | undefined {
  if (reason instanceof RunTimeoutError) {
    return {
      stopped: (afterMs) => new RunTimeoutError(reason.runId, reason.timeoutMs, afterMs),
      // Final, not retried: a retry, here or on another instance, would run beside the handler let go.
      unstopped: {
        error: new RunTimeoutFinalError(reason.runId, reason.timeoutMs, graceMs),
        level: 'error',
        message: 'a handler past its timeout did not stop within its grace (it ignores its signal): its run is made final, not retried, and the handler is let go, still running in this process',
      },
    };
  }
  if (reason instanceof RunCancelledError) {
    return {
      stopped: () => reason,
      unstopped: {
        error: new RunCancelledError(reason.runId, reason.byTick, true),
        level: 'warn',
        message: 'a handler whose run was cancelled by a newer tick ignored its signal; the run is failed without it',
      },
    };
  }
  return reason instanceof RunTerminatedError ? { stopped: () => reason } : undefined;
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
  /** Times the deadline and the grace (monotonic). */
  clock: Clock;
  letGo?: LetGo;
}

/** Told of a handler let go (its run ended without it) while it still runs, and of its end. */
export interface LetGo {
  started(): void;
  stopped(): void;
}

/**
 * Runs `handler` under the run's deadline (Kubernetes' `activeDeadlineSeconds`), and lets the run be
 * stopped (overlap `cancelOther`, `terminateOther`): at the deadline, or when stopped, the signal aborts,
 * and the run fails with the stop's error once the handler has stopped, whatever it returns then. Until
 * then the run stays pending, so its worker keeps its slot and renews its lock: no retry of it can start
 * anywhere. A handler that has not stopped when the grace period ends (at once for a termination) is let
 * go, not waited on for ever: the run fails then (for good, for a timeout), this is logged, and so is the
 * handler's eventual end.
 */
export async function runWithDeadline(handler: () => Promise<unknown>, deadline: Deadline): Promise<unknown> {
  const { timeoutMs, abort, clock } = deadline;
  let stopped: { how: RunStop; at: number } | undefined;
  // Aborted when the run ends: cancels the deadline's and the grace's sleeps.
  const timers = new AbortController();
  const after = (ms: number, then: () => void): void => void clock.sleep(ms, timers.signal).then(then, () => undefined);
  const started = handler();
  // Once stopped, a result or an error of the handler's (often the abort it was told of) is the stop's error.
  const stoppedError = (): Error | undefined => stopped && stopped.how.stopped(clock.monotonic() - stopped.at);
  const running = started.then(
    (value) => {
      const error = stoppedError();
      if (error) throw error;
      return value;
    },
    (error: unknown) => {
      throw stoppedError() ?? error;
    },
  );
  let onAbort: (() => void) | undefined;
  const cutOff = new Promise<never>((_, reject) => {
    // The run ends now; its handler's end, whenever it comes, is logged, so a leaked one is seen to stop.
    const letGo = (error: Error): void => {
      const at = clock.monotonic();
      deadline.letGo?.started();
      const ended = (): void => {
        deadline.letGo?.stopped();
        deadline.log.warn({ jobId: deadline.runId, letGoMs: Math.round(clock.monotonic() - at) }, 'a handler that was let go has stopped');
      };
      started.then(ended, ended);
      reject(error);
    };
    onAbort = () => {
      const how = stopOf(abort.signal.reason, deadline.graceMs);
      if (!how || stopped) return;
      stopped = { how, at: clock.monotonic() };
      const { unstopped } = how;
      if (!unstopped) return letGo(how.stopped(0));
      after(deadline.graceMs, () => {
        deadline.log[unstopped.level]({ jobId: deadline.runId, err: unstopped.error, graceMs: deadline.graceMs }, unstopped.message);
        letGo(unstopped.error);
      });
    };
    if (abort.signal.aborted) onAbort();
    else abort.signal.addEventListener('abort', onAbort, { once: true });
    if (timeoutMs !== undefined && !stopped) after(timeoutMs, () => abort.abort(new RunTimeoutError(deadline.runId, timeoutMs)));
  });
  try {
    return await Promise.race([running, cutOff]);
  } finally {
    timers.abort();
    if (onAbort) abort.signal.removeEventListener('abort', onAbort);
  }
}
