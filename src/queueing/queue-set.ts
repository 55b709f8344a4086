import { FlowProducer, Queue, type ConnectionOptions } from 'bullmq';

/** The BullMQ queues (and one FlowProducer) leasebeat adds to, created on first use and closed together. */
export class QueueSet {
  private readonly queues = new Map<string, Queue>();
  private flowProducer: FlowProducer | undefined;

  constructor(private readonly options: { connection: ConnectionOptions; prefix?: string }) {}

  get(name: string): Queue {
    let queue = this.queues.get(name);
    if (!queue) {
      queue = new Queue(name, { connection: this.options.connection, prefix: this.options.prefix });
      this.queues.set(name, queue);
    }
    return queue;
  }

  flows(): FlowProducer {
    this.flowProducer ??= new FlowProducer({ connection: this.options.connection, prefix: this.options.prefix });
    return this.flowProducer;
  }

  all(): Queue[] {
    return [...this.queues.values()];
  }

  async close(): Promise<void> {
    await Promise.all([...this.all().map((q) => q.close()), this.flowProducer?.close()]);
  }
}
