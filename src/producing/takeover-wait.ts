/**
 * Counts the lanes of one batch still taking their job over: each lane made gets `expect()`'s callback
 * (its `onTakenOver`), and `done` resolves once the batch is sealed and every one has called it. A lane
 * calls it at most once; a second call is ignored. It is the producer's takeover tally and each batch of
 * a runtime-schedule takeover alike.
 */
export class TakeoverWait {
  private waiting = 0;
  private sealed = false;
  private counted = 0;
  private release: (() => void) | undefined;
  readonly done: Promise<void>;

  constructor() {
    this.done = new Promise<void>((resolve) => (this.release = resolve));
  }

  /** How many lanes were expected in all. */
  get expected(): number {
    return this.counted;
  }

  expect(): () => void {
    this.counted++;
    this.waiting++;
    let called = false;
    return () => {
      if (called) return;
      called = true;
      this.waiting--;
      this.releaseIfDone();
    };
  }

  /** No more lanes are expected: `done` resolves at once if none is waiting. */
  seal(): void {
    this.sealed = true;
    this.releaseIfDone();
  }

  // Not before the seal: a lane that takes over before the next is made must not end the wait.
  private releaseIfDone(): void {
    if (this.sealed && this.waiting === 0) this.release?.();
  }
}
