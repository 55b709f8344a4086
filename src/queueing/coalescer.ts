/** The most items one batch call carries: a Lua script or a pipeline of this size holds Redis for a few ms. */
export const MAX_BATCH = 500;

interface Waiting<I, O> {
  item: I;
  resolve: (output: O) => void;
  reject: (error: unknown) => void;
}

/**
 * Gathers the calls made during one turn of the event loop and runs them as batches of at most
 * `maxBatch` (sent together, without waiting for each other), answering each caller with its own
 * result. A batch that throws rejects every call in it. Callers stay one-at-a-time code; only the
 * round trips are shared.
 */
export class Coalescer<I, O> {
  private waiting: Array<Waiting<I, O>> = [];

  constructor(
    private readonly runBatch: (items: I[]) => Promise<O[]>,
    private readonly maxBatch = MAX_BATCH,
  ) {}

  call(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      if (this.waiting.length === 0) setImmediate(() => this.flush());
      this.waiting.push({ item, resolve, reject });
    });
  }

  private flush(): void {
    const all = this.waiting;
    this.waiting = [];
    for (let from = 0; from < all.length; from += this.maxBatch) void this.send(all.slice(from, from + this.maxBatch));
  }

  private async send(batch: Array<Waiting<I, O>>): Promise<void> {
    try {
      const outputs = await this.runBatch(batch.map((w) => w.item));
      batch.forEach((w, i) => w.resolve(outputs[i]!));
    } catch (error) {
      for (const w of batch) w.reject(error);
    }
  }
}
