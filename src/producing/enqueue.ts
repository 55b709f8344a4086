import type { FlowJobNode, JobsOptions } from 'bullmq';
import type { ScheduledJob, TickFlow, TickFlowChild } from '../scheduling/define-job.js';
import type { TickJobData } from '../ledger/job-data.js';
import type { QueueSet } from '../redis/queue-set.js';

/**
 * Adds one run of `job` to BullMQ: a plain job, or for a job with a `flow` the flow its builder returns
 * for the tick (the parent named after the job, children on the job's queue unless they name another).
 * Scheduled ticks and manual triggers both go through here, so a trigger runs exactly what a tick runs.
 *
 * A repeated add with the same `opts.jobId` adds nothing while the run exists: the parent keeps the id,
 * and each child without an id of its own gets one derived from it (`<jobId>/<index>`, nested
 * `<jobId>/<index>/<index>`), so a retried add does not add its children twice. BullMQ refuses
 * `deduplication` on a flow node with children, so it is kept only for a run without children, and every
 * node of a flow is kept (not removed on completion or failure) for as long as the key would have lived:
 * a term that finishes a flow's pending claim after the flow ran must find its jobs, or it adds them again.
 */
export async function addRun(queues: QueueSet, job: ScheduledJob, data: TickJobData, opts: JobsOptions): Promise<string | undefined> {
  if (!job.flow) {
    const added = await queues.get(job.queue).add(job.name, data, opts);
    return added.id;
  }
  const flow: TickFlow = await job.flow({ tick: new Date(data.tick), data: job.data });
  const hasChildren = (flow.children?.length ?? 0) > 0;
  const { deduplication, ...rest } = opts;
  // With no deduplication key, only the jobs themselves make a repeated add of the flow a no-op: each node
  // is kept at least as long as the key would have lived (the ledger's memory of the tick).
  const keptSeconds = Math.ceil((deduplication?.ttl ?? 0) / 1000);
  const parentOpts = { ...flow.opts, ...rest, ...(hasChildren || !deduplication ? {} : { deduplication }) };
  const added = await queues.flows().add({
    ...flow,
    name: job.name,
    queueName: job.queue,
    data: { ...data, flow: flow.data as unknown },
    opts: keptAtLeast(parentOpts, keptSeconds),
    children: flow.children?.map((child, index) => withQueue(child, job.queue, opts.jobId && `${opts.jobId}/${index}`, keptSeconds)),
  });
  return added.job.id;
}

/**
 * `opts` with finished jobs kept at least `seconds`: a retention that would remove them sooner (at once,
 * or past a count) becomes that age. Keeping them for ever (the default) is kept.
 */
function keptAtLeast<T extends Pick<JobsOptions, 'removeOnComplete' | 'removeOnFail'>>(opts: T | undefined, seconds: number): T {
  if (seconds <= 0) return opts ?? ({} as T);
  const keep = (retention: JobsOptions['removeOnComplete']): JobsOptions['removeOnComplete'] => {
    if (retention === undefined || retention === false) return retention;
    // A count (alone or beside an age) removes by count whatever the age: only an age is safe.
    const age = typeof retention === 'object' && 'age' in retention ? (retention.age ?? 0) : 0;
    return { age: Math.max(age, seconds) };
  };
  const result = { ...(opts ?? ({} as T)) };
  if (result.removeOnComplete !== undefined) result.removeOnComplete = keep(result.removeOnComplete);
  if (result.removeOnFail !== undefined) result.removeOnFail = keep(result.removeOnFail);
  return result;
}

/** One run to add: the job, its data and its BullMQ options (with the run's deterministic `jobId`). */
export interface Run {
  job: ScheduledJob;
  data: TickJobData;
  opts: JobsOptions;
}

/**
 * Adds several runs at once: those without a flow with one `addBulk` per queue (one pipelined round
 * trip for each), flows one by one through {@link addRun}. The same job ids and options as `addRun`, so
 * a repeated call adds nothing twice. Answers per run: undefined once added, or the error of its add
 * (a failed `addBulk` fails every run of its queue; a flow fails alone), so one job that cannot be
 * added does not hold back the others.
 */
export async function addRuns(queues: QueueSet, runs: Run[]): Promise<Array<Error | undefined>> {
  const results: Array<Error | undefined> = runs.map(() => undefined);
  const byQueue = new Map<string, number[]>();
  const adds: Array<Promise<unknown>> = [];
  runs.forEach((run, index) => {
    if (run.job.flow) {
      adds.push(addRun(queues, run.job, run.data, run.opts).catch((error: unknown) => (results[index] = asError(error))));
      return;
    }
    let plain = byQueue.get(run.job.queue);
    if (!plain) byQueue.set(run.job.queue, (plain = []));
    plain.push(index);
  });
  for (const [queue, indexes] of byQueue) {
    const bulk = indexes.map((i) => ({ name: runs[i]!.job.name, data: runs[i]!.data, opts: runs[i]!.opts }));
    adds.push(
      queues
        .get(queue)
        .addBulk(bulk)
        .catch((error: unknown) => {
          for (const i of indexes) results[i] = asError(error);
        }),
    );
  }
  await Promise.all(adds);
  return results;
}

const asError = (error: unknown): Error => (error instanceof Error ? error : new Error(String(error)));

/**
 * Gives every node of a tick's flow a queue (its own, or the job's), an id (its own, or one derived from
 * the run's), and a retention of at least `keptSeconds` (see addRun).
 */
function withQueue(child: TickFlowChild, queue: string, jobId: string | undefined, keptSeconds: number): FlowJobNode {
  return {
    ...child,
    queueName: child.queueName ?? queue,
    opts: keptAtLeast(child.opts?.jobId || !jobId ? child.opts : { ...child.opts, jobId }, keptSeconds),
    children: child.children?.map((c, index) => withQueue(c, queue, jobId && `${jobId}/${index}`, keptSeconds)),
  };
}
