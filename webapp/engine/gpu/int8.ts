// The int8 copy of the weights a decoding step multiplies (the int8 sampling lever,
// content/docs/kernels.md) on the GPU: its layout is quantize.ts int8Layout (blocks at the
// device's bindable offsets; pack4xI8 reads a word's bytes in the order the layout stores them).
// The GPU makes the copy from the f32 parameters whenever they changed (recordInt8Copy: one
// dispatch per weight of the int8 lever's int8_quantize_nn or _nt,
// shaders/levers/int8/matvec.wgsl); quantize.ts packInt8 is the same copy made on the CPU, the
// tests' reference.

import { type Int8Layout, blockWords } from "../quantize";
import type { GpuLayout } from "./layout";
import type { Recorder } from "./recorder";

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
