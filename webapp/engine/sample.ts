// Sampling's two rules: which tokens the window (the KV cache) holds, and
// picking the next byte from logits: greedy at temperature 0, otherwise
// softmax(logits / temperature) restricted to the top k.

import { FACTS } from "./model";
import type { Rng } from "./rng";

/**
 * Where the window of a `length`-token text begins, given where it began before (facts.json
 * sampling, tinygpt/model.py window_start): unchanged while it holds at most blockSize tokens,
 * else the last floor(blockSize * slide_keep), which the cache prefills again.
 */
export function windowStart(start: number, length: number, blockSize: number): number {
  if (length - start <= blockSize) return start;
  return length - Math.max(1, Math.floor(blockSize * FACTS.sampling.slide_keep));
}

export function pickToken(logits: Float32Array, temperature: number, topK: number, rng: Rng): number {
  let best = 0;
  for (let i = 1; i < logits.length; i++) if (logits[i] > logits[best]) best = i;
  if (temperature <= 0) return best;
  let cut = -Infinity;
  if (topK > 0 && topK < logits.length) cut = Array.from(logits).sort((a, b) => b - a)[topK - 1];
  const probs = new Float64Array(logits.length);
  let sum = 0;
  for (let i = 0; i < logits.length; i++) {
    if (logits[i] < cut) continue;
    probs[i] = Math.exp((logits[i] - logits[best]) / temperature);
    sum += probs[i];
  }
  let r = rng.uniform() * sum;
  for (let i = 0; i < logits.length; i++) {
    if (probs[i] === 0) continue;
    r -= probs[i];
    if (r <= 0) return i;
  }
  return best;
}
