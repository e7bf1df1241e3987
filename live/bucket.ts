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
    this.tokens = Math.min(this.burst, this.tokens + (Math.max(0, now - this.last) / 1000) * this.perS);
    this.last = now;
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }
}
