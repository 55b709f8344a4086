import { FlowProducer, Queue, type ConnectionOptions } from 'bullmq';

/** The BullMQ queues (and one FlowProducer) leasebeat adds to, created on first use and closed together. */
export class QueueSet {
  private readonly queues = new Map<string, Queue>();
  private flowProducer: FlowProducer | undefined;

  /** `onError` receives connection errors, which BullMQ would otherwise print to stderr. */
  constructor(private readonly options: { connection: ConnectionOptions; prefix?: string; onError?: (error: Error) => void }) {}

  get(name: string): Queue {
    let queue = this.queues.get(name);
    if (!queue) {
      queue = new Queue(name, { connection: this.options.connection, prefix: this.options.prefix });
      if (this.options.onError) queue.on('error', this.options.onError);
      this.queues.set(name, queue);
    }
    return queue;
  }

  flows(): FlowProducer {
    if (!this.flowProducer) {
      this.flowProducer = new FlowProducer({ connection: this.options.connection, prefix: this.options.prefix });
      if (this.options.onError) this.flowProducer.on('error', this.options.onError);
    }
    return this.flowProducer;
  }

  all(): Queue[] {
    return [...this.queues.values()];
  }

  async close(): Promise<void> {
    await Promise.all([...this.all().map((q) => q.close()), this.flowProducer?.close()]);
  }
}
