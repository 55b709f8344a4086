/**
 * A token bucket on caller-supplied times (epoch ms), so tests step it with a manual clock. It starts full;
 * tokens accrue at `ratePerSecond` up to `burst`. A rate of 0 refuses everything, even a saved token: that
 * is the "stop entirely" setting, not merely "slow down".
 */
export class TokenBucket {
  private tokens: number;
  private last: number;

  constructor(
    private ratePerSecond: number,
    private readonly burst: number,
    now: number,
  ) {
    this.tokens = burst;
    this.last = now;
  }

  get rate(): number {
    return this.ratePerSecond;
  }

  /** Changes the rate from `now` on; tokens earned so far at the old rate are kept. */
  setRate(ratePerSecond: number, now: number): void {
    this.refill(now);
    this.ratePerSecond = ratePerSecond;
  }

  /** Takes one token if there is one. */
  tryTake(now: number): boolean {
    this.refill(now);
    // Tokens accrue in fractional steps; the tolerance keeps 20 × 0.05 from falling just short of 1.
    if (this.ratePerSecond <= 0 || this.tokens < 1 - 1e-9) return false;
    this.tokens -= 1;
    return true;
  }

  private refill(now: number): void {
    // A clock stepped backwards earns nothing, rather than a negative amount.
    const elapsedMs = Math.max(0, now - this.last);
    this.tokens = Math.min(this.burst, this.tokens + (elapsedMs / 1000) * this.ratePerSecond);
    this.last = now;
  }
}
