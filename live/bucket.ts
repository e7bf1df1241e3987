// A token bucket: `burst` messages at once, then `perS` a second.
export class Bucket {
  private tokens: number;
  private last: number;

  constructor(
    private readonly burst: number,
    private readonly perS: number,
    now: number,
  ) {
    this.tokens = burst;
    this.last = now;
  }

  /** True, and one token spent, when one is left at `now` (ms). */
  take(now: number): boolean {
    this.refill(now);
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }

  /** Whether it has refilled to its burst by `now`: it then holds nothing a new bucket would not. */
  full(now: number): boolean {
    this.refill(now);
    return this.tokens >= this.burst;
  }

  /** How long an empty bucket takes to refill, ms. */
  get refillMs(): number {
    return (this.burst / this.perS) * 1000;
  }

  private refill(now: number): void {
    this.tokens = Math.min(this.burst, this.tokens + (Math.max(0, now - this.last) / 1000) * this.perS);
    this.last = now;
  }
}
