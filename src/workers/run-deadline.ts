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

/** What {@link runWithDeadline} needs of the run. */
export interface Deadline {
  runId: string;
  /** Undefined: no deadline; the handler's own outcome stands. */
  timeoutMs: number | undefined;
  graceMs: number;
  /** Aborted at the deadline, with the RunTimeoutError as its reason. */
  abort: AbortController;
  log: Logger;
}

/**
 * Runs `handler` under the run's deadline (Kubernetes' `activeDeadlineSeconds`): at the deadline the
 * signal aborts; whatever the handler then does, the run fails with a RunTimeoutError, as soon as the
 * handler stops or when the grace period ends, whichever comes first. A handler that ignores its signal is
 * reported and let go, not waited on for ever. Timers are monotonic (setTimeout), so a stepped wall clock
 * neither shortens nor lengthens a deadline.
 */
export async function runWithDeadline(handler: () => Promise<unknown>, deadline: Deadline): Promise<unknown> {
  const { timeoutMs } = deadline;
  if (timeoutMs === undefined) return handler();
  let timedOut: RunTimeoutError | undefined;
  let timer: NodeJS.Timeout | undefined;
  // Past the deadline, a result or an error of the handler's (often the abort it was told of) is the timeout.
  const running = handler().then(
    (value) => {
      if (timedOut) throw timedOut;
      return value;
    },
    (error: unknown) => {
      throw timedOut ?? error;
    },
  );
  const overdue = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      timedOut = new RunTimeoutError(deadline.runId, timeoutMs, false);
      deadline.abort.abort(timedOut);
      timer = setTimeout(() => {
        const ignored = new RunTimeoutError(deadline.runId, timeoutMs, true);
        deadline.log.warn({ jobId: deadline.runId, err: ignored, graceMs: deadline.graceMs }, 'a handler past its deadline ignored its signal; the run is failed without it');
        reject(ignored);
      }, deadline.graceMs);
    }, timeoutMs);
  });
  try {
    return await Promise.race([running, overdue]);
  } finally {
    clearTimeout(timer);
  }
}
