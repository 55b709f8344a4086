/**
 * Counts the lanes of one batch still taking their job over: each lane made gets `expect()`'s callback
 * (its `onTakenOver`), and `done` resolves once every one has called it. A lane calls it at most once;
 * a second call is ignored.
 */
export class TakeoverWait {
  private waiting = 0;
  private release: (() => void) | undefined;
  readonly done: Promise<void>;

  constructor() {
    this.done = new Promise<void>((resolve) => (this.release = resolve));
  }

  expect(): () => void {
    this.waiting++;
    let called = false;
    return () => {
      if (called) return;
      called = true;
      if (--this.waiting === 0) this.release?.();
    };
  }

  /** No more lanes are expected: `done` resolves at once if none is waiting. */
  seal(): void {
    if (this.waiting === 0) this.release?.();
  }
}
