// The shader-f16 lever (facts.levers "shader-f16"): the linear layers' forward
// product, y = x·W (+ b), computed in f16 (shaders/levers/shader-f16/matmul_vec4.wgsl:
// f32 in memory, f16 tiles and products, f32 sums per k-tile). It replaces the
// vec4 matmul_nn ops only: tests/test_lever_shader_f16.py measures nt and tn,
// whose operands include gradients (~1e-5, subnormal in f16), failing the gate
// with this kernel, so the backward products stay f32. Its gate is the GPU
// framework's kernelTableAgrees, on shapes that run both block sizes.

import matmulVec4 from "../../../.cache/wgsl/levers/shader-f16/matmul_vec4.wgsl";
import { F32_KERNELS, type Kernel, type KernelTable, type Op } from "../../engine/gpu/kernels";
import type { GpuLever } from "../gpu";
import type { GateShape } from "../shapes";

export const ID = "shader-f16";

/** The plain op's kernel (entry, BLOCK, workgroups, f32 buffers) with the f16 module. */
const f16 = (op: Op): Kernel => ({ ...F32_KERNELS[op], source: matmulVec4 });

export const KERNELS: Partial<KernelTable> = {
  matmul_vec4_nn: f16("matmul_vec4_nn"),
  matmul_vec4_nn_64: f16("matmul_vec4_nn_64"),
};

/**
 * A small model (64-wide blocks: grids under 128 blocks of 128x128) and one whose
 * 4096 rows against fc_in's 512 columns make 128 blocks, the 128-wide kernel.
 * Not GATE_SHAPES: the unaligned one runs no vec4 op.
 */
export const SHAPES: GateShape[] = [
  { model: { vocab_size: 256, n_layer: 1, n_embd: 32, n_head: 2, block_size: 9 }, batch: 3 },
  { model: { vocab_size: 256, n_layer: 1, n_embd: 128, n_head: 2, block_size: 64 }, batch: 64 },
];

export const SHADER_F16 = { id: ID, feature: "shader-f16", kernels: KERNELS, shapes: SHAPES, f16: true } satisfies GpuLever;
