// Symmetric int8 quantization, one f32 scale per row: a row x becomes q = round(x / s) in
// [-127, 127] with s = max|x| / 127 (s = 0 for a row of zeros, whose q are all 0), and
// dequantizes to q * s, within s / 2 of x. Weights are quantized per output channel (a row of
// the matrix as the product reads it, one output's weights), activations per row; the int8
// sampling lever's kernels (shaders/levers/int8/matvec.wgsl) quantize their input row the same
// way on the GPU, and the WebAssembly backend's (cpu/assembly/index.ts quantize_rows) on the CPU.
// Rounding is half to even, as WGSL's round() and WebAssembly's nearest.
//
// The int8 copy of the weights a decoding step multiplies, the same on both backends (int8Layout):
// every projection of every block and the tied head, each quantized per output channel into one
// block of u32 words, each block at an aligned offset: the channel scales (N f32 bits), then the N
// channels' K int8 values, 4 to a word (element k in byte k % 4: a channel's bytes lie in order).
// A [K, N] weight (y = x·W) is transposed first, so that every product reads a channel's weights
// along K. q, k and v lie one after another at equal strides, so that one GPU dispatch runs all
// three (gpu/graph.ts).

import type { ModelConfig } from "./types";

export const Q_MAX = 127;

/** Round half to even (WGSL round), in f32 as the GPU computes x * (127 / max). */
export function roundEven(x: number): number {
  const r = Math.round(x);
  return r - x === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/** Rows of int8 values and their scales. */
export interface QuantizedRows {
  q: Int8Array;
  scales: Float32Array;
  rows: number;
  cols: number;
}

/** `x` [rows, cols] (row-major) quantized per row. */
export function quantizeRows(x: Float32Array, rows: number, cols: number): QuantizedRows {
  if (x.length !== rows * cols) throw new Error(`quantizeRows: ${x.length} values are not ${rows} x ${cols}`);
  const q = new Int8Array(rows * cols);
  const scales = new Float32Array(rows);
  for (let r = 0; r < rows; r++) {
    const row = x.subarray(r * cols, (r + 1) * cols);
    const max = row.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
    if (!Number.isFinite(max)) throw new Error(`quantizeRows: row ${r} holds ${max}`);
    if (max === 0) continue;
    scales[r] = Math.fround(max / Q_MAX);
    const inv = Math.fround(Q_MAX / max);
    for (let c = 0; c < cols; c++) q[r * cols + c] = Math.max(-Q_MAX, Math.min(Q_MAX, roundEven(Math.fround(row[c] * inv))));
  }
  return { q, scales, rows, cols };
}

/** The values the quantized rows stand for: q * s. */
export function dequantizeRows({ q, scales, rows, cols }: QuantizedRows): Float32Array {
  const out = new Float32Array(rows * cols);
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) out[r * cols + c] = q[r * cols + c] * scales[r];
  return out;
}

/** `x` [rows, cols] transposed to [cols, rows]: a [K, N] weight's output channels as rows. */
export function transpose(x: Float32Array, rows: number, cols: number): Float32Array {
  const out = new Float32Array(rows * cols);
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) out[c * rows + r] = x[r * cols + c];
  return out;
}

export interface Int8Block {
  /** Offset of the block in words (u32) of the int8 copy. */
  offset: number;
  /** Output channels and their length. */
  N: number;
  K: number;
  /** Whether the f32 weight is [K, N] (nn; else [N, K], the tied head). */
  transposed: boolean;
}

export interface Int8Layout {
  blocks: Map<string, Int8Block>;
  /** Words of the copy. */
  words: number;
}

/** Words one block of N channels of K takes, before alignment. */
export const blockWords = (N: number, K: number) => N + (N * K) / 4;

/** The weights a decoding step reads through its products, in the copy's order: q, k, v, o, fc_in, fc_out of each block, then the head. */
export function int8Weights(model: ModelConfig): [name: string, N: number, K: number, transposed: boolean][] {
  const { n_layer: L, n_embd: C, vocab_size: V } = model;
  const out: [string, number, number, boolean][] = [];
  for (let l = 0; l < L; l++) {
    for (const p of ["q", "k", "v", "o"]) out.push([`blocks.${l}.attn.${p}_proj.weight`, C, C, true]);
    out.push([`blocks.${l}.mlp.fc_in.weight`, 4 * C, C, true], [`blocks.${l}.mlp.fc_out.weight`, C, 4 * C, true]);
  }
  out.push(["token_embedding.weight", V, C, false]);
  return out;
}

/** The copy's blocks for `model`, each starting on a multiple of `alignBytes`. */
export function int8Layout(model: ModelConfig, alignBytes: number): Int8Layout {
  if (model.n_embd % 4) throw new Error(`int8 weights pack 4 to a word along K: n_embd ${model.n_embd} is not a multiple of 4`);
  const align = Math.max(1, alignBytes / 4);
  const blocks = new Map<string, Int8Block>();
  let at = 0;
  for (const [name, N, K, transposed] of int8Weights(model)) {
    blocks.set(name, { offset: at, N, K, transposed });
    at += Math.ceil(blockWords(N, K) / align) * align;
  }
  return { blocks, words: at };
}

/**
 * The copy's words made on the CPU from each weight's f32 values as the model holds them
 * (`weight(name)`: [K, N] or, the head, [N, K]), into `words` (a view of the copy: the WebAssembly
 * backend's memory) or a new array. The WebAssembly backend's copy; the GPU's reference.
 */
export function packInt8<W extends Uint32Array>(int8: Int8Layout, weight: (name: string) => Float32Array, words?: W): W | Uint32Array<ArrayBuffer> {
  const out = words ?? new Uint32Array(int8.words);
  const bytes = new Int8Array(out.buffer, out.byteOffset, out.byteLength);
  for (const [name, { offset, N, K, transposed }] of int8.blocks) {
    const w = weight(name);
    const { q, scales } = quantizeRows(transposed ? transpose(w, K, N) : w, N, K);
    new Float32Array(out.buffer, out.byteOffset + offset * 4, N).set(scales);
    bytes.set(q, (offset + N) * 4); // little-endian: element k in byte k % 4 of word k / 4
  }
  return out;
}
