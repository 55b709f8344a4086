/**
 * Hands out at most `perSecond` slots a second, evenly spaced on a monotonic clock: the n-th slot starts no
 * sooner than (n - 1) / perSecond s after the first. Time spent idle is not banked, so a pause (a wait
 * for the previous run, a paused job) is never followed by a burst.
 */
export class Pacer {
  private nextAt: number | undefined;
  private readonly spacingMs: number;

  constructor(
    perSecond: number,
    private readonly monotonic: () => number,
    /** Waits `ms` of the same monotonic clock (the term's timer, so that a test's clock drives it). */
    private readonly wait: (ms: number) => Promise<void>,
  ) {
    this.spacingMs = 1000 / perSecond;
  }

  /**
   * Resolves when the next slot starts, taking `count` slots from it: the slot after them starts
   * `count / perSecond` s later, so that a batch of that many spreads the rate over time as single slots do.
   */
  async next(count = 1): Promise<void> {
    const now = this.monotonic();
    const at = Math.max(this.nextAt ?? now, now);
    this.nextAt = at + count * this.spacingMs;
    if (at > now) await this.wait(at - now);
  }

  /** Hands back `count` slots taken and not used (ticks of a batch that needed no run): the next slot comes sooner. */
  giveBack(count: number): void {
    if (this.nextAt !== undefined) this.nextAt -= count * this.spacingMs;
  }
}
