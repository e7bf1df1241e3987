// Sampling's two rules: which tokens the window (the KV cache) holds, and
// picking the next byte from logits: greedy at temperature 0, otherwise
// softmax(logits / temperature) restricted to the top k and the top-p nucleus.

import { FACTS } from "./model";
import type { Draw } from "./types";

/**
 * Where the window of a `length`-token text begins, given where it began before (facts.json
 * sampling, tinygpt/model.py window_start): unchanged while it holds at most blockSize tokens,
 * else the last floor(blockSize * slide_keep), which the cache prefills again.
 */
export function windowStart(start: number, length: number, blockSize: number): number {
  if (length - start <= blockSize) return start;
  return length - Math.max(1, Math.floor(blockSize * FACTS.sampling.slide_keep));
}

/**
 * The next byte from `logits` (tinygpt/model.py pick_token; shaders/sample.wgsl on the GPU):
 * softmax(logits / temperature) over the top k, cut to the nucleus of top p (most likely first,
 * the lower id first on ties, at least one), drawn by `u`, uniform in [0, 1) (rng.ts
 * sampleUniform), against the kept tokens in id order.
 */
export function pickToken(logits: Float32Array, { temperature, topK, topP = 1 }: Draw, u: number): number {
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
  if (topP < 1) sum = nucleus(probs, sum * topP);
  let r = u * sum;
  for (let i = 0; i < logits.length; i++) {
    if (probs[i] === 0) continue;
    r -= probs[i];
    if (r <= 0) return i;
  }
  return best;
}

/** Zeroes all but the fewest most likely tokens whose weights reach `mass`; returns their sum. */
function nucleus(probs: Float64Array, mass: number): number {
  const order = Array.from(probs.keys()).filter((i) => probs[i] > 0).sort((a, b) => probs[b] - probs[a] || a - b);
  let kept = 0;
  let n = 0;
  while (n < order.length && (n === 0 || kept < mass)) kept += probs[order[n++]];
  for (const i of order.slice(n)) probs[i] = 0;
  return kept;
}

// Tokens chosen on the device arrive a submission at a time (Backend.sampleTokens): the page
// streams them as each batch ends and Stop is heard between batches, so a batch is sized to take
// about BATCH_MS, growing at most twofold from one to the next.
const BATCH_MS = 50;

/** The next batch's size, after `ran` tokens took `ms`. */
export function nextBatch(batch: number, ran: number, ms: number): number {
  const fits = Math.floor((BATCH_MS * ran) / Math.max(ms, 1e-3));
  return Math.max(1, Math.min(2 * batch, fits));
}
