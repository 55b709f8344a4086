/**
 * The light entry point for job files (`import { defineJob } from 'leasebeat/job'`): definitions only, so
 * that loading `jobs/` does not pull in the Kubernetes client, the HTTP server or BullMQ's runtime.
 */
export {
  defineJob,
  type JobDefinition,
  type HandlerContext,
  type TickRunData,
  type FenceToken,
  type OverlapPolicy,
  type CatchupMode,
  type TickFlow,
  type TickFlowChild,
} from './scheduling/define-job.js';
