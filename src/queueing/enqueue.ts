import type { FlowJobNode, JobsOptions } from 'bullmq';
import type { ScheduledJob, TickFlow, TickFlowChild } from '../scheduling/define-job.js';
import type { TickJobData } from './job-data.js';
import type { QueueSet } from './queue-set.js';

/**
 * Adds one run of `job` to BullMQ: a plain job, or for a job with a `flow` the flow its builder returns
 * for the tick (the parent named after the job, children on the job's queue unless they name another).
 * Scheduled ticks and manual triggers both go through here, so a trigger runs exactly what a tick runs.
 */
export async function addRun(queues: QueueSet, job: ScheduledJob, data: TickJobData, opts: JobsOptions): Promise<string | undefined> {
  if (!job.flow) {
    const added = await queues.get(job.queue).add(job.name, data, opts);
    return added.id;
  }
  const flow: TickFlow = await job.flow({ tick: new Date(data.tick), data: job.data });
  const added = await queues.flows().add({
    ...flow,
    name: job.name,
    queueName: job.queue,
    data: { ...data, flow: flow.data as unknown },
    opts: { ...flow.opts, ...opts },
    children: flow.children?.map((child) => withQueue(child, job.queue)),
  });
  return added.job.id;
}

function withQueue(child: TickFlowChild, queue: string): FlowJobNode {
  return { ...child, queueName: child.queueName ?? queue, children: child.children?.map((c) => withQueue(c, queue)) };
}
