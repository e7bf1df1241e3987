// Small seeded PRNG (mulberry32) for init and batches, and the hash sampling draws from: the same
// seed gives the same run in every host. Not cryptographic, not numpy's stream.

import facts from "../../tinygpt/facts.json";

const RNG = facts.wgsl.consts;

export class Rng {
  private state: number;

  constructor(seed: number) {
    this.state = seed >>> 0;
  }

  u32(): number {
    let t = (this.state = (this.state + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  }

  /** Uniform in [0, 1). */
  uniform(): number {
    return this.u32() / 4294967296;
  }

  /** Uniform integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.uniform() * n);
  }

  /** Standard normal (Box-Muller). */
  normal(): number {
    const u = 1 - this.uniform(); // (0, 1]: log stays finite
    const v = this.uniform();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
  }
}

/**
 * A seed derived from a base seed and a stream index (step, purpose, a sampled token's number),
 * well mixed; shaders/sample.wgsl's derive_seed is the same hash (facts.json wgsl.consts RNG_*).
 */
export function deriveSeed(seed: number, stream: number): number {
  let h = Math.imul((seed >>> 0) ^ RNG.RNG_SEED_XOR, RNG.RNG_SEED_MUL) ^ Math.imul(stream >>> 0, RNG.RNG_STREAM_MUL);
  h ^= h >>> 16;
  h = Math.imul(h, RNG.RNG_MIX1);
  h ^= h >>> 15;
  h = Math.imul(h, RNG.RNG_MIX2);
  return (h ^ (h >>> 16)) >>> 0;
}

/**
 * Sampling's uniform in [0, 1) for the `counter`-th token drawn with `seed`: a hash, not a stream,
 * so the GPU (shaders/sample.wgsl), drawing many tokens a submission, draws the very same numbers.
 */
export function sampleUniform(seed: number, counter: number): number {
  return (deriveSeed(seed, counter) >>> 8) / 16777216;
}
