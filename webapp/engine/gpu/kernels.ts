// The kernel table: op -> shader module, entry point and workgroup counts. The backend builds
// one pipeline per op from it. A faster variant (f16 storage, subgroups, ...) replaces an entry
// after passing the numerics gate and must keep the op's bindings and params (each shaders/
// file documents them at its top).

// The modules as tinygpt/build/wgsl.py composes them (prelude and #include resolved): every
// bundle writes them to .cache/wgsl/ first.
import matmul from "../../../.cache/wgsl/matmul.wgsl";
import matmulVec4 from "../../../.cache/wgsl/matmul_vec4.wgsl";
import layernorm from "../../../.cache/wgsl/layernorm.wgsl";
import embedding from "../../../.cache/wgsl/embedding.wgsl";
import gelu from "../../../.cache/wgsl/gelu.wgsl";
import residual from "../../../.cache/wgsl/residual.wgsl";
import attention from "../../../.cache/wgsl/attention.wgsl";
import crossentropy from "../../../.cache/wgsl/crossentropy.wgsl";
import optimizer from "../../../.cache/wgsl/optimizer.wgsl";
import facts from "../../../tinygpt/facts.json";

const SOURCES = { matmul, matmul_vec4: matmulVec4, layernorm, embedding, gelu, residual, attention, crossentropy, optimizer };
type Module = keyof typeof SOURCES;

/** The widest head the attention kernels take: their registers are sized by this constant of their prelude. */
export const MAX_HEAD_DIM = facts.wgsl.consts.MAX_HEAD_DIM;
/** Params.flags bits, as the shaders' prelude declares them. */
export const BIAS = facts.wgsl.consts.BIAS;
export const ACCUMULATE = facts.wgsl.consts.ACCUMULATE;

export type Workgroups = [number, number, number];
export type Sizes = Record<string, number>;

export interface Kernel {
  source: string;
  entry: string;
  /** The uniform Params (binding 0) in order, from facts.json wgsl.params: ":f32" marks a float, others are u32. */
  params: string[];
  workgroups: (s: Sizes) => Workgroups;
}

const ceil = (a: number, b: number) => Math.ceil(a / b);

function kernel(module: Module, entry: string, workgroups: Kernel["workgroups"]): Kernel {
  return { source: SOURCES[module], entry, params: facts.wgsl.params[module], workgroups };
}

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
  matmul_nn: kernel("matmul", "matmul_nn", matmulTiles),
  matmul_nt: kernel("matmul", "matmul_nt", matmulTiles),
  matmul_tn: kernel("matmul", "matmul_tn", matmulTiles),
  matmul_vec4_nn: kernel("matmul_vec4", "matmul_vec4_nn", vec4Tiles),
  matmul_vec4_nt: kernel("matmul_vec4", "matmul_vec4_nt", vec4Tiles),
  matmul_vec4_tn: kernel("matmul_vec4", "matmul_vec4_tn", vec4Tiles),
  matmul_vec4_nn_64: kernel("matmul_vec4", "matmul_vec4_nn_64", vec4Tiles64),
  matmul_vec4_nt_64: kernel("matmul_vec4", "matmul_vec4_nt_64", vec4Tiles64),
  matmul_vec4_tn_64: kernel("matmul_vec4", "matmul_vec4_tn_64", vec4Tiles64),
  matmul_colsum: kernel("matmul", "matmul_colsum", (s) => [ceil(s.N, 64), s.splits ?? 1, 1]),
  layernorm_forward: kernel("layernorm", "layernorm_forward", perRow),
  layernorm_backward_dx: kernel("layernorm", "layernorm_backward_dx", perRow),
  layernorm_backward_params: kernel("layernorm", "layernorm_backward_params", (s) => [ceil(s.C, 32), s.splits ?? 1, 1]),
  embedding_forward: kernel("embedding", "embedding_forward", (s) => elementwise(s.B * s.T * s.C)),
  embedding_backward_wte: kernel("embedding", "embedding_backward_wte", (s) => [ceil(s.C, 64), s.V, 1]),
  embedding_backward_wpe: kernel("embedding", "embedding_backward_wpe", (s) => elementwise(s.T * s.C)),
  gelu_forward: kernel("gelu", "gelu_forward", (s) => elementwise(s.n)),
  gelu_backward: kernel("gelu", "gelu_backward", (s) => elementwise(s.n)),
  residual_add: kernel("residual", "residual_add", (s) => elementwise(s.n)),
  residual_accumulate: kernel("residual", "residual_accumulate", (s) => elementwise(s.n)),
  attention_forward: kernel("attention", "attention_forward", perHeadBlock),
  attention_backward_delta: kernel("attention", "attention_backward_delta", perHeadBlock),
  attention_backward_dq: kernel("attention", "attention_backward_dq", perHeadBlock),
  attention_backward_dkdv: kernel("attention", "attention_backward_dkdv", perHeadBlock),
  crossentropy_forward: kernel("crossentropy", "crossentropy_forward", perRow),
  crossentropy_backward: kernel("crossentropy", "crossentropy_backward", perRow),
  crossentropy_mean: kernel("crossentropy", "crossentropy_mean", () => [1, 1, 1]),
  grad_norm_partial: kernel("optimizer", "grad_norm_partial", (s) => [s.n_partials, 1, 1]),
  grad_norm_final: kernel("optimizer", "grad_norm_final", () => [1, 1, 1]),
  adamw: kernel("optimizer", "adamw", (s) => elementwise(s.n)),
} satisfies Record<string, Kernel>;

export type Op = keyof typeof F32_KERNELS;
export type KernelTable = Record<Op, Kernel>;

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
