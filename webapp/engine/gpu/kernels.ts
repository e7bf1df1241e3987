// The kernel table: op -> WGSL source, entry point and workgroup counts. The
// backend builds one pipeline per op from it. A faster variant (f16 storage,
// subgroups, ...) replaces an entry after passing the numerics gate and must
// keep the op's bindings and params (OP_PARAMS; each shaders/ file documents
// them at its top).

import matmul from "../../../shaders/matmul.wgsl";
import matmulVec4 from "../../../shaders/matmul_vec4.wgsl";
import layernorm from "../../../shaders/layernorm.wgsl";
import embedding from "../../../shaders/embedding.wgsl";
import gelu from "../../../shaders/gelu.wgsl";
import residual from "../../../shaders/residual.wgsl";
import attention from "../../../shaders/attention.wgsl";
import crossentropy from "../../../shaders/crossentropy.wgsl";
import optimizer from "../../../shaders/optimizer.wgsl";

/** The widest head the attention kernels take: their registers are sized by the shader's own MAX_D. */
export const MAX_HEAD_DIM = Number(/const MAX_D = (\d+)u;/.exec(attention)?.[1]);

export type Workgroups = [number, number, number];
export type Sizes = Record<string, number>;

export interface Kernel {
  source: string;
  entry: string;
  workgroups: (s: Sizes) => Workgroups;
}

const ceil = (a: number, b: number) => Math.ceil(a / b);

const matmulTiles = (s: Sizes): Workgroups => [ceil(s.N, 128), ceil(s.M, 128), 1];
// `splits` (a dispatch size, not a shader param): how many runs K or the rows are cut into,
// for the kernels that can split (see their shaders).
const vec4Tiles = (s: Sizes): Workgroups => [ceil(s.N, 128), ceil(s.M, 128), s.splits ?? 1];
const vec4Tiles64 = (s: Sizes): Workgroups => [ceil(s.N, 64), ceil(s.M, 64), s.splits ?? 1];
const perRow = (s: Sizes): Workgroups => [s.rows, 1, 1];
// Attention: one workgroup per block of 64 positions of one (batch, head).
const perHeadBlock = (s: Sizes): Workgroups => [ceil(s.T, 64), s.B * s.n_head, 1];
// One invocation per element in workgroups of 256, the grid folded into y past 65535.
export function elementwise(n: number): Workgroups {
  const groups = ceil(n, 256);
  const x = Math.max(1, Math.min(groups, 65535));
  return [x, ceil(groups, x), 1];
}

export const F32_KERNELS = {
  matmul_nn: { source: matmul, entry: "matmul_nn", workgroups: matmulTiles },
  matmul_nt: { source: matmul, entry: "matmul_nt", workgroups: matmulTiles },
  matmul_tn: { source: matmul, entry: "matmul_tn", workgroups: matmulTiles },
  matmul_vec4_nn: { source: matmulVec4, entry: "matmul_vec4_nn", workgroups: vec4Tiles },
  matmul_vec4_nt: { source: matmulVec4, entry: "matmul_vec4_nt", workgroups: vec4Tiles },
  matmul_vec4_tn: { source: matmulVec4, entry: "matmul_vec4_tn", workgroups: vec4Tiles },
  matmul_vec4_nn_64: { source: matmulVec4, entry: "matmul_vec4_nn_64", workgroups: vec4Tiles64 },
  matmul_vec4_nt_64: { source: matmulVec4, entry: "matmul_vec4_nt_64", workgroups: vec4Tiles64 },
  matmul_vec4_tn_64: { source: matmulVec4, entry: "matmul_vec4_tn_64", workgroups: vec4Tiles64 },
  matmul_colsum: { source: matmul, entry: "matmul_colsum", workgroups: (s) => [ceil(s.N, 64), s.splits ?? 1, 1] },
  layernorm_forward: { source: layernorm, entry: "layernorm_forward", workgroups: perRow },
  layernorm_backward_dx: { source: layernorm, entry: "layernorm_backward_dx", workgroups: perRow },
  layernorm_backward_params: { source: layernorm, entry: "layernorm_backward_params", workgroups: (s) => [ceil(s.C, 32), s.splits ?? 1, 1] },
  embedding_forward: { source: embedding, entry: "embedding_forward", workgroups: (s) => elementwise(s.B * s.T * s.C) },
  embedding_backward_wte: { source: embedding, entry: "embedding_backward_wte", workgroups: (s) => [ceil(s.C, 64), s.V, 1] },
  embedding_backward_wpe: { source: embedding, entry: "embedding_backward_wpe", workgroups: (s) => elementwise(s.T * s.C) },
  gelu_forward: { source: gelu, entry: "gelu_forward", workgroups: (s) => elementwise(s.n) },
  gelu_backward: { source: gelu, entry: "gelu_backward", workgroups: (s) => elementwise(s.n) },
  residual_add: { source: residual, entry: "residual_add", workgroups: (s) => elementwise(s.n) },
  residual_accumulate: { source: residual, entry: "residual_accumulate", workgroups: (s) => elementwise(s.n) },
  attention_forward: { source: attention, entry: "attention_forward", workgroups: perHeadBlock },
  attention_backward_delta: { source: attention, entry: "attention_backward_delta", workgroups: perHeadBlock },
  attention_backward_dq: { source: attention, entry: "attention_backward_dq", workgroups: perHeadBlock },
  attention_backward_dkdv: { source: attention, entry: "attention_backward_dkdv", workgroups: perHeadBlock },
  crossentropy_forward: { source: crossentropy, entry: "crossentropy_forward", workgroups: perRow },
  crossentropy_backward: { source: crossentropy, entry: "crossentropy_backward", workgroups: perRow },
  crossentropy_mean: { source: crossentropy, entry: "crossentropy_mean", workgroups: () => [1, 1, 1] },
  grad_norm_partial: { source: optimizer, entry: "grad_norm_partial", workgroups: (s) => [s.n_partials, 1, 1] },
  grad_norm_final: { source: optimizer, entry: "grad_norm_final", workgroups: () => [1, 1, 1] },
  adamw: { source: optimizer, entry: "adamw", workgroups: (s) => elementwise(s.n) },
} satisfies Record<string, Kernel>;

export type Op = keyof typeof F32_KERNELS;
export type KernelTable = Record<Op, Kernel>;

// Each op's uniform params (binding 0) in order; ":f32" marks a float, others are u32.
const MATMUL = ["M", "N", "K", "flags"];
const LAYERNORM = ["rows", "C", "eps:f32", "flags"];
const EMBEDDING = ["B", "T", "C", "V", "flags"];
const ATTENTION = ["B", "T", "C", "n_head"];
const CROSSENTROPY = ["rows", "V"];
const OPTIMIZER = ["n", "n_partials", "offset", "grad_clip:f32", "lr:f32", "beta1:f32", "beta2:f32", "eps:f32", "weight_decay:f32", "bc1:f32", "bc2:f32"];
export const OP_PARAMS: Record<Op, string[]> = {
  matmul_nn: MATMUL,
  matmul_nt: MATMUL,
  matmul_tn: MATMUL,
  matmul_vec4_nn: MATMUL,
  matmul_vec4_nt: MATMUL,
  matmul_vec4_tn: MATMUL,
  matmul_vec4_nn_64: MATMUL,
  matmul_vec4_nt_64: MATMUL,
  matmul_vec4_tn_64: MATMUL,
  matmul_colsum: MATMUL,
  layernorm_forward: LAYERNORM,
  layernorm_backward_dx: LAYERNORM,
  layernorm_backward_params: LAYERNORM,
  embedding_forward: EMBEDDING,
  embedding_backward_wte: EMBEDDING,
  embedding_backward_wpe: EMBEDDING,
  gelu_forward: ["n"],
  gelu_backward: ["n"],
  residual_add: ["n"],
  residual_accumulate: ["n"],
  attention_forward: ATTENTION,
  attention_backward_delta: ATTENTION,
  attention_backward_dq: ATTENTION,
  attention_backward_dkdv: ATTENTION,
  crossentropy_forward: CROSSENTROPY,
  crossentropy_backward: CROSSENTROPY,
  crossentropy_mean: CROSSENTROPY,
  grad_norm_partial: OPTIMIZER,
  grad_norm_final: OPTIMIZER,
  adamw: OPTIMIZER,
};

export const BIAS = 1;
export const ACCUMULATE = 2;

export type Orientation = "nn" | "nt" | "tn";

/**
 * The matmul kernel for a shape: the vec4 kernels when the contiguous
 * dimensions allow 16-byte loads, with the 64-block variant for grids too
 * small to fill a large GPU; the scalar kernel for any other shape.
 */
export function matmulOp(o: Orientation, M: number, N: number, K: number): Op {
  const vec4 = N % 4 === 0 && (o === "tn" ? M % 4 === 0 : K % 4 === 0);
  if (!vec4) return `matmul_${o}`;
  return ceil(M, 128) * ceil(N, 128) < 128 ? `matmul_vec4_${o}_64` : `matmul_vec4_${o}`;
}
