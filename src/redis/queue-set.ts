import { FlowProducer, Queue, type ConnectionOptions } from 'bullmq';

/**
 * What BullMQ's Queue and FlowProducer share here: both open their connection with a version check, and
 * both close.
 */
interface Opened {
  waitUntilReady(): Promise<void>;
  close(): Promise<void>;
}

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
      this.forgetIfFailed(queue, () => this.queues.get(name) === queue && this.queues.delete(name));
    }
    return queue;
  }

  flows(): FlowProducer {
    if (!this.flowProducer) {
      const flows = new FlowProducer({ connection: this.options.connection, prefix: this.options.prefix });
      if (this.options.onError) flows.on('error', this.options.onError);
      this.flowProducer = flows;
      this.forgetIfFailed(flows, () => this.flowProducer === flows && (this.flowProducer = undefined));
    }
    return this.flowProducer;
  }

  all(): Queue[] {
    return [...this.queues.values()];
  }

  async close(): Promise<void> {
    await Promise.all([...this.all().map((q) => q.close()), this.flowProducer?.close()]);
  }

  /**
   * BullMQ opens a connection with an INFO (its version check), and a refusal of it (BUSY, LOADING while a
   * restarted Redis reads its AOF, CLUSTERDOWN mid-failover, a connection cut) fails that connection for
   * good: every later command of the Queue is refused with the same error, though Redis is back. Such a
   * one is forgotten (and closed), so that the next use opens a new one.
   */
  private forgetIfFailed(opened: Opened, forget: () => unknown): void {
    opened.waitUntilReady().catch(() => {
      forget();
      opened.close().catch(() => undefined);
    });
  }
}
