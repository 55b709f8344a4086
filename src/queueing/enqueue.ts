import type { FlowJobNode, JobsOptions } from 'bullmq';
import type { ScheduledJob, TickFlow, TickFlowChild } from '../scheduling/define-job.js';
import type { TickJobData } from './job-data.js';
import type { QueueSet } from './queue-set.js';

/**
 * Adds one run of `job` to BullMQ: a plain job, or for a job with a `flow` the flow its builder returns
 * for the tick (the parent named after the job, children on the job's queue unless they name another).
 * Scheduled ticks and manual triggers both go through here, so a trigger runs exactly what a tick runs.
 *
 * A repeated add with the same `opts.jobId` adds nothing while the run exists: the parent keeps the id,
 * and each child without an id of its own gets one derived from it (`<jobId>/<index>`, nested
 * `<jobId>/<index>/<index>`), so a retried add does not add its children twice. BullMQ refuses
 * `deduplication` on a flow node with children, so it is kept only for a run without children.
 */
export async function addRun(queues: QueueSet, job: ScheduledJob, data: TickJobData, opts: JobsOptions): Promise<string | undefined> {
  if (!job.flow) {
    const added = await queues.get(job.queue).add(job.name, data, opts);
    return added.id;
  }
  const flow: TickFlow = await job.flow({ tick: new Date(data.tick), data: job.data });
  const hasChildren = (flow.children?.length ?? 0) > 0;
  const { deduplication, ...rest } = opts;
  const added = await queues.flows().add({
    ...flow,
    name: job.name,
    queueName: job.queue,
    data: { ...data, flow: flow.data as unknown },
    opts: { ...flow.opts, ...rest, ...(hasChildren || !deduplication ? {} : { deduplication }) },
    children: flow.children?.map((child, index) => withQueue(child, job.queue, opts.jobId && `${opts.jobId}/${index}`)),
  });
  return added.job.id;
}

/** Gives every node of a tick's flow a queue (its own, or the job's) and an id (its own, or one derived from the run's). */
function withQueue(child: TickFlowChild, queue: string, jobId: string | undefined): FlowJobNode {
  return {
    ...child,
    queueName: child.queueName ?? queue,
    opts: child.opts?.jobId || !jobId ? child.opts : { ...child.opts, jobId },
    children: child.children?.map((c, index) => withQueue(c, queue, jobId && `${jobId}/${index}`)),
  };
}
