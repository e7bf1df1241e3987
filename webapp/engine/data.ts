// The corpus split and batches. The last val_fraction of the bytes is
// validation; training batches at step s come from a PRNG seeded by (seed, s),
// so a resumed run draws exactly the batches the original would have.
// Validation uses fixed windows, evenly spaced over the validation bytes and
// the same whatever the seed, in every engine and in the reference
// (tinygpt/train.py evaluate): two validations of the same weights agree.
// The validation metric (facts.json data.validation_metric) has windows of its
// own, non-overlapping and spread over the whole split (validationStarts).

import { FACTS } from "./model";
import { Rng, deriveSeed } from "./rng";

export interface Split {
  train: Uint8Array;
  val: Uint8Array;
}

export function splitCorpus(bytes: Uint8Array, blockSize: number): Split {
  if (bytes.length === 0) throw new Error("the corpus is empty");
  if (bytes.length > FACTS.data.max_upload_bytes) throw new Error(`the corpus is ${bytes.length} bytes, over the ${FACTS.data.max_upload_bytes}-byte limit`);
  const nVal = Math.floor(bytes.length * FACTS.data.val_fraction);
  const train = bytes.subarray(0, bytes.length - nVal);
  const val = bytes.subarray(bytes.length - nVal);
  const need = blockSize + 1;
  if (train.length < need || val.length < need) {
    const min = Math.ceil(need / FACTS.data.val_fraction) + 1;
    throw new Error(`the corpus is ${bytes.length} bytes; a block size of ${blockSize} needs at least ${min} bytes so both the training and validation parts hold one block`);
  }
  return { train, val };
}

/** The windows of T+1 bytes at `starts`: inputs x and next-byte targets y. */
export function windows(data: Uint8Array, starts: number[], blockSize: number): { x: Int32Array; y: Int32Array } {
  const x = new Int32Array(starts.length * blockSize);
  const y = new Int32Array(starts.length * blockSize);
  starts.forEach((s, b) => {
    for (let t = 0; t < blockSize; t++) {
      x[b * blockSize + t] = data[s + t];
      y[b * blockSize + t] = data[s + t + 1];
    }
  });
  return { x, y };
}

/** B windows of T+1 bytes at random starts. */
export function batch(data: Uint8Array, batchSize: number, blockSize: number, rng: Rng): { x: Int32Array; y: Int32Array } {
  return windows(data, Array.from({ length: batchSize }, () => rng.int(data.length - blockSize)), blockSize);
}

export const trainBatch = (split: Split, batchSize: number, blockSize: number, seed: number, step: number) =>
  batch(split.train, batchSize, blockSize, new Rng(deriveSeed(seed, step)));

/** Where the `count` validation windows start: window j at floor(j (n - T) / count), n the validation bytes. */
export function valStarts(n: number, blockSize: number, count: number): number[] {
  return Array.from({ length: count }, (_, j) => Math.floor((j * (n - blockSize)) / count));
}

/** Batch `index` of `batches` over the validation windows (batches x batchSize of them). */
export const valBatch = (split: Split, batchSize: number, blockSize: number, index: number, batches: number) =>
  windows(split.val, valStarts(split.val.length, blockSize, batches * batchSize).slice(index * batchSize, (index + 1) * batchSize), blockSize);

/**
 * Where the validation metric's windows of T+1 bytes start in n validation bytes (tinygpt/validation.py
 * validation_starts): k of them, the whole windows the split holds or max_windows if fewer, window j at
 * floor(j n / k). j n < n^2 / (T + 1) stays far below 2^53 for any corpus the app takes (max_upload_bytes),
 * and then floor of the double quotient is the integer quotient, as Python computes it.
 */
export function validationStarts(n: number, blockSize: number, maxWindows: number = FACTS.data.validation_metric.max_windows): number[] {
  const k = Math.min(Math.floor(n / (blockSize + 1)), maxWindows);
  if (k < 1) throw new Error(`${n} validation bytes cannot hold one window of ${blockSize}+1`);
  return Array.from({ length: k }, (_, j) => Math.floor((j * n) / k));
}

export async function sha256Hex(bytes: Uint8Array): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>);
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}
