/** What a member's BullMQ workers are doing. */
export type WorkerState =
  /** Taking and running jobs. */
  | 'running'
  /** Told to stop taking jobs (cordon or shutdown); active jobs are still finishing. */
  | 'draining'
  /** Cordoned and drained: no job runs and none is taken. */
  | 'paused'
  /** Closed, or a worker stopped on its own. */
  | 'stopped'
  /** This instance runs no workers (`workers: false`). */
  | 'disabled';
