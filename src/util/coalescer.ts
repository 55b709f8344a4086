/** The most items one batch call carries: a Lua script or a pipeline of this size holds Redis for a few ms. */
export const MAX_BATCH = 500;
/**
 * Batches of one kind on the wire at once. More would queue in Redis ahead of the next stage's work:
 * with every claim of a 10,000-tick burst sent at once, no add could run before all of them had.
 */
export const MAX_IN_FLIGHT = 2;

interface Waiting<I, O> {
  item: I;
  resolve: (output: O) => void;
  reject: (error: unknown) => void;
}

/**
 * Gathers the calls made during one turn of the event loop and runs them as batches of at most
 * `maxBatch`, at most {@link MAX_IN_FLIGHT} at a time (calls made meanwhile wait for the next batch),
 * answering each caller with its own result. A batch that throws rejects every call in it. Callers
 * stay one-at-a-time code; only the round trips are shared.
 */
export class Coalescer<I, O> {
  private waiting: Array<Waiting<I, O>> = [];
  private inFlight = 0;
  private scheduled = false;

  constructor(
    private readonly runBatch: (items: I[]) => Promise<O[]>,
    private readonly maxBatch = MAX_BATCH,
  ) {}

  call(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.waiting.push({ item, resolve, reject });
      this.schedule();
    });
  }

  /** Sends on a later turn, so that the calls of this turn (and of callers resumed by a reply) join. */
  private schedule(): void {
    if (this.scheduled || this.waiting.length === 0 || this.inFlight >= MAX_IN_FLIGHT) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      while (this.inFlight < MAX_IN_FLIGHT && this.waiting.length > 0) void this.send(this.waiting.splice(0, this.maxBatch));
    });
  }

  private async send(batch: Array<Waiting<I, O>>): Promise<void> {
    this.inFlight++;
    try {
      const outputs = await this.runBatch(batch.map((w) => w.item));
      batch.forEach((w, i) => w.resolve(outputs[i]!));
    } catch (error) {
      for (const w of batch) w.reject(error);
    } finally {
      this.inFlight--;
      this.schedule();
    }
  }
}
