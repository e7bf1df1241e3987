// The int8 copy of the weights a decoding step multiplies (the int8 sampling lever,
// content/docs/kernels.md): every projection of every block and the tied head, each quantized per
// output channel (quantize.ts) into one block of u32 words, each block at a bindable offset: the
// channel scales (N f32 bits), then the N channels' K int8 values, 4 to a word (pack4xI8 order:
// element k in byte k % 4). A [K, N] weight (y = x·W) is transposed first, so that both of
// matvec's orientations read a channel's weights along K. q, k and v lie one after another at
// equal strides, so that one dispatch runs all three (graph.ts). The GPU makes the copy from the
// f32 parameters whenever they changed (recordInt8Copy: one dispatch per weight of the int8
// lever's int8_quantize_nn or _nt, shaders/levers/int8/matvec.wgsl); packInt8 is the same copy
// made on the CPU, the tests' reference.

import { quantizeRows, transpose } from "../quantize";
import type { ModelConfig } from "../types";
import type { GpuLayout } from "./layout";
import type { Recorder } from "./recorder";

export interface Int8Block {
  /** Offset of the block in words (u32) of the int8 buffer. */
  offset: number;
  /** Output channels and their length. */
  N: number;
  K: number;
  /** Whether the f32 weight is [K, N] (nn; else [N, K], the tied head). */
  transposed: boolean;
}

export interface Int8Layout {
  blocks: Map<string, Int8Block>;
  /** Words of the buffer. */
  words: number;
}

/** Words one block of N channels of K takes, before alignment. */
export const blockWords = (N: number, K: number) => N + (N * K) / 4;

/** The weights a decoding step reads through matvec, in buffer order: q, k, v, o, fc_in, fc_out of each block, then the head. */
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

/** The int8 buffer's words for the parameters `params` (in the GPU layout `layout`), made on the CPU: recordInt8Copy's reference. */
export function packInt8(int8: Int8Layout, layout: GpuLayout, params: Float32Array): Uint32Array<ArrayBuffer> {
  const words = new Uint32Array(int8.words);
  const bytes = new Int8Array(words.buffer);
  for (const [name, { offset, N, K, transposed }] of int8.blocks) {
    const t = layout.byName.get(name)!;
    const w = params.subarray(t.gpuOffset, t.gpuOffset + t.size);
    const { q, scales } = quantizeRows(transposed ? transpose(w, K, N) : w, N, K);
    new Float32Array(words.buffer, offset * 4, N).set(scales);
    bytes.set(q, (offset + N) * 4); // little-endian: element k in byte k % 4 of word k / 4
  }
  return words;
}

/** The binding of the block `name` (a matvec's binding 5). */
export function int8Binding(buffer: GPUBuffer, int8: Int8Layout, name: string): GPUBufferBinding {
  const { offset, N, K } = int8.blocks.get(name)!;
  return { buffer, offset: offset * 4, size: blockWords(N, K) * 4 };
}

/** One binding over `names`' consecutive blocks of one shape, and their stride in words (matvec's b_stride). */
export function int8Span(buffer: GPUBuffer, int8: Int8Layout, names: string[]): { binding: GPUBufferBinding; stride: number } {
  const [first, second, last] = [names[0], names[1], names[names.length - 1]].map((n) => int8.blocks.get(n)!);
  const stride = second.offset - first.offset;
  return { binding: { buffer, offset: first.offset * 4, size: (last.offset - first.offset + blockWords(last.N, last.K)) * 4 }, stride };
}

/**
 * Records the making of the int8 copy `int8` from the f32 parameters `params` (in the GPU layout
 * `layout`) into `r`, whose table holds the int8 lever's kernels: one dispatch per weight, each
 * workgroup quantizing CHANNELS_Q of its channels (the lever's table sets it) straight from the
 * weight's f32 slice into its block.
 */
export function recordInt8Copy(r: Recorder, int8: { buffer: GPUBuffer; layout: Int8Layout }, layout: GpuLayout, params: GPUBuffer): void {
  for (const [name, { N, K, transposed }] of int8.layout.blocks) {
    const t = layout.byName.get(name)!;
    const sizes = { M: 1, N, K, flags: 0, eps: 0, b_stride: 0, bias_stride: 0, c_stride: 0 };
    r.op(transposed ? "int8_quantize_nn" : "int8_quantize_nt", sizes, { 2: { buffer: params, offset: t.gpuOffset * 4, size: t.size * 4 }, 5: int8Binding(int8.buffer, int8.layout, name) });
  }
}
