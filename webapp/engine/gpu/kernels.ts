// The kernel table: op -> shader module, entry point, override constants, workgroup counts, and
// the facts the graph plans with: bytes per element, whether the op can split its reduction.
// The backend builds one pipeline per op from it. A faster variant (f16 storage, subgroups,
// matrix units, ...) replaces an entry after passing the numerics gate and must keep the op's
// bindings and params (each shaders/ file documents them at its top); its own fields tell the
// graph how large its buffers are and how its work divides.

// The modules as tinygpt/site_build/wgsl.py composes them (prelude and #include resolved): every
// bundle writes them to .cache/wgsl/ first.
import matmul from "../../../.cache/wgsl/matmul.wgsl";
import matmulVec4 from "../../../.cache/wgsl/matmul_vec4.wgsl";
import matvec from "../../../.cache/wgsl/matvec.wgsl";
import layernorm from "../../../.cache/wgsl/layernorm.wgsl";
import embedding from "../../../.cache/wgsl/embedding.wgsl";
import gelu from "../../../.cache/wgsl/gelu.wgsl";
import attention from "../../../.cache/wgsl/attention.wgsl";
import decode from "../../../.cache/wgsl/decode.wgsl";
import crossentropy from "../../../.cache/wgsl/crossentropy.wgsl";
import sample from "../../../.cache/wgsl/sample.wgsl";
import optimizer from "../../../.cache/wgsl/optimizer.wgsl";
import facts from "../../../tinygpt/facts.json";

const SOURCES = { matmul, matmul_vec4: matmulVec4, matvec, layernorm, embedding, gelu, attention, decode, crossentropy, optimizer, sample };
type Module = keyof typeof SOURCES;

/** The widest head the attention kernels take: their registers are sized by this constant of their prelude. */
export const MAX_HEAD_DIM = facts.wgsl.consts.MAX_HEAD_DIM;
/** Params.flags bits, as the shaders' prelude declares them. */
export const BIAS = facts.wgsl.consts.BIAS;
export const ACCUMULATE = facts.wgsl.consts.ACCUMULATE;
export const GRAD_A = facts.wgsl.consts.GRAD_A;
export const GRAD_B = facts.wgsl.consts.GRAD_B;

export type Workgroups = [number, number, number];
export type Sizes = Record<string, number>;

export interface Kernel {
  source: string;
  entry: string;
  /** The uniform Params (binding 0) in order, from facts.json wgsl.params: ":f32" marks a float, others are u32. */
  params: string[];
  /** Pipeline-override constants the module is specialised with: a matmul's tile, BLOCK; a matvec's outputs per workgroup, OUTS (`workgroups` sizes the grid by the same). */
  constants: Record<string, number>;
  /** Its constants are already written into its source as module constants (the older subgroup-matrix spelling: levers/coop-matrix/spelling.ts), so its pipeline is given none. */
  baked?: boolean;
  /** Bytes per element of the activations and gradients it reads and writes (4: f32). */
  elementBytes: number;
  /**
   * Whether it takes a dispatch size `splits` > 1 and cuts its reduction (a matmul's K, a column
   * sum's rows) into that many runs, their partial results for colsum to add (see its shader).
   */
  split: boolean;
  /**
   * A matmul whose B (binding 2) is a weight (nn: y = x·W, dln = dlogits·wte; nt: dx = dy·Wᵀ,
   * logits = x·wteᵀ) reads it from the parameters' packed-half mirror instead of the f32
   * parameters: the graph binds the mirror's slice there (storage-f16).
   */
  weightsFromMirror: boolean;
  /** AdamW that also rewrites the mirror from the parameters it updated (binding 9: the whole mirror). */
  refreshesMirror: boolean;
  /** A matvec that reads its weight's int8 copy (gpu/int8.ts) at binding 5 in place of B (the int8 sampling lever). */
  weightsInt8?: boolean;
  workgroups: (s: Sizes) => Workgroups;
  /**
   * The 128-block weight gradient's (matmul_vec4_tn) K from which the graph runs it, split along
   * K, in place of the 64 block matmulOp picks for a small grid: where each split's run is long
   * enough to pay for the larger block's fewer workgroups (the coop-matrix lever's; see its lever.ts).
   */
  fromK?: number;
}

const ceil = (a: number, b: number) => Math.ceil(a / b);

function kernel(module: Module, entry: string, workgroups: Kernel["workgroups"], split = false): Kernel {
  return { source: SOURCES[module], entry, params: facts.wgsl.params[module], constants: {}, elementBytes: 4, split, weightsFromMirror: false, refreshesMirror: false, workgroups };
}

export type Orientation = "nn" | "nt" | "tn";

/**
 * The grid of a matmul on BLOCK x BLOCK blocks of C; dispatch sizes, not params: `products`
 * stacked ones along grid y (lib/matmul_block.wgsl), `splits` of K along grid z.
 */
export const blockGrid = (BLOCK: number) => (s: Sizes): Workgroups => [ceil(s.N, BLOCK), ceil(s.M, BLOCK) * (s.products ?? 1), s.splits ?? 1];

function tiled(module: "matmul" | "matmul_vec4", o: Orientation, BLOCK: number): Kernel {
  return { ...kernel(module, `matmul_${o}`, blockGrid(BLOCK), true), constants: { BLOCK } };
}

/**
 * A matvec.wgsl product: OUTS outputs a workgroup, `products` of nn's along grid y where `several`
 * (a decoding step's q, k and v in one dispatch); MAX_K, the widest row its _ln entry points
 * normalise: 8 KiB of workgroup memory (the graph reads it there).
 */
function rowProduct(entry: string, several = false): Kernel {
  const constants = { MAX_K: 2048, OUTS: 32 };
  return { ...kernel("matvec", entry, (s) => [ceil(s.N, constants.OUTS), several ? s.products : 1, 1]), constants };
}
const perRow = (s: Sizes): Workgroups => [s.rows, 1, 1];
// Attention: one workgroup per block of 64 positions of one (batch, head).
const perHeadBlock = (s: Sizes): Workgroups => [ceil(s.T, 64), s.B * s.n_head, 1];
const narrowHeads = (entry: string): Kernel => ({ ...kernel("attention", entry, perHeadBlock), constants: { HEAD: 64 } });
// One invocation per element in workgroups of 256, the grid folded into y past 65535.
export function elementwise(n: number): Workgroups {
  const groups = ceil(n, 256);
  const x = Math.max(1, Math.min(groups, 65535));
  return [x, ceil(groups, x), 1];
}

export const F32_KERNELS = {
  matmul_nn: tiled("matmul", "nn", 128),
  matmul_nt: tiled("matmul", "nt", 128),
  matmul_tn: tiled("matmul", "tn", 128),
  matmul_vec4_nn: tiled("matmul_vec4", "nn", 128),
  matmul_vec4_nt: tiled("matmul_vec4", "nt", 128),
  matmul_vec4_tn: tiled("matmul_vec4", "tn", 128),
  matmul_vec4_nn_64: tiled("matmul_vec4", "nn", 64),
  matmul_vec4_nt_64: tiled("matmul_vec4", "nt", 64),
  matmul_vec4_tn_64: tiled("matmul_vec4", "tn", 64),
  matvec_nn: rowProduct("matvec_nn", true),
  matvec_nt: rowProduct("matvec_nt"),
  matvec_nn_ln: rowProduct("matvec_nn_ln", true),
  matvec_nn_ln_gelu: rowProduct("matvec_nn_ln_gelu"),
  matvec_nt_ln: rowProduct("matvec_nt_ln"),
  // `splits` cuts the rows along grid y, here and in layernorm_backward_params; a colsum's grid z
  // walks its `products` stacked matrices.
  colsum: kernel("matmul", "colsum", (s) => [ceil(s.N, 64), s.splits ?? 1, s.products ?? 1], true),
  colsum_vec4: kernel("matmul_vec4", "colsum_vec4", (s) => [ceil(s.N, 64), s.splits ?? 1, s.products ?? 1], true),
  layernorm_forward: kernel("layernorm", "layernorm_forward", perRow),
  layernorm_forward_residual: kernel("layernorm", "layernorm_forward_residual", perRow),
  layernorm_backward_dx: kernel("layernorm", "layernorm_backward_dx", perRow),
  layernorm_backward_params: kernel("layernorm", "layernorm_backward_params", (s) => [ceil(s.C, 32), s.splits ?? 1, 1], true),
  embedding_forward: kernel("embedding", "embedding_forward", (s) => elementwise(s.B * s.T * s.C)),
  // `splits` cuts the positions along grid z.
  embedding_backward_wte: kernel("embedding", "embedding_backward_wte", (s) => [ceil(s.C, 256), s.V, s.splits ?? 1], true),
  embedding_backward_wpe: kernel("embedding", "embedding_backward_wpe", (s) => elementwise(s.T * s.C)),
  gelu_forward: kernel("gelu", "gelu_forward", (s) => elementwise(s.n)),
  gelu_backward: kernel("gelu", "gelu_backward", (s) => elementwise(s.n)),
  // The same for n a multiple of 4, an invocation per 4 elements (elementwiseOp).
  gelu_forward_vec4: kernel("gelu", "gelu_forward_vec4", (s) => elementwise(s.n / 4)),
  gelu_backward_vec4: kernel("gelu", "gelu_backward_vec4", (s) => elementwise(s.n / 4)),
  attention_forward: kernel("attention", "attention_forward", perHeadBlock),
  attention_backward_delta: kernel("attention", "attention_backward_delta", perHeadBlock),
  attention_backward_dq: kernel("attention", "attention_backward_dq", perHeadBlock),
  attention_backward_dkdv: kernel("attention", "attention_backward_dkdv", perHeadBlock),
  // The same for heads of at most 64 columns (attentionOp): with HEAD 64 the registers of the
  // output columns past 64 are gone.
  attention_forward_64: narrowHeads("attention_forward"),
  attention_backward_dq_64: narrowHeads("attention_backward_dq"),
  attention_backward_dkdv_64: narrowHeads("attention_backward_dkdv"),
  embedding_decode: kernel("decode", "embedding_decode", (s) => [ceil(s.C, 128), 1, 1]),
  attention_decode: kernel("decode", "attention_decode", (s) => [s.n_head, 1, 1]),
  sample_token: kernel("sample", "sample_token", () => [1, 1, 1]),
  crossentropy_forward: kernel("crossentropy", "crossentropy_forward", perRow),
  crossentropy_backward: kernel("crossentropy", "crossentropy_backward", perRow),
  crossentropy_mean: kernel("crossentropy", "crossentropy_mean", () => [1, 1, 1]),
  grad_norm_partial: kernel("optimizer", "grad_norm_partial", (s) => [s.n_partials, 1, 1]),
  grad_norm_final: kernel("optimizer", "grad_norm_final", () => [1, 1, 1]),
  adamw: kernel("optimizer", "adamw", (s) => elementwise(s.n)),
} satisfies Record<string, Kernel>;

/** The ops the plain path runs: a lever's table replaces some of them. */
export type Op = keyof typeof F32_KERNELS;
/**
 * Ops no plain kernel runs, so no lever replaces them: a lever's table adds them. The int8 lever's
 * making of its weight copy from the f32 parameters (levers/int8; a [K, N] weight, nn, or [N, K], nt).
 * The coop-attention lever's attention on heads of at most its constants.HEAD columns, which the
 * graph runs in place of the plain op of the same name without "_matrix" (attentionOp); wider heads
 * keep the plain one.
 */
export interface AddedKernels {
  int8_quantize_nn?: Kernel;
  int8_quantize_nt?: Kernel;
  attention_forward_matrix?: Kernel;
  attention_backward_dq_matrix?: Kernel;
  attention_backward_dkdv_matrix?: Kernel;
}
/** Any op a table can hold: what recorders record and pipelines compile. */
export type AnyOp = Op | keyof AddedKernels;
export type KernelTable = Record<Op, Kernel> & AddedKernels;

/** The table's kernel for `op`, which an added op's lever must have put there. */
export function kernelFor(table: KernelTable, op: AnyOp): Kernel {
  const kernel = table[op];
  if (!kernel) throw new Error(`the kernel table has no ${op}: only its lever's table adds it`);
  return kernel;
}

/**
 * The matmul kernel for a shape: the vec4 kernels when the contiguous
 * dimensions allow 16-byte loads, with the 64-block variant for grids too
 * small to fill a large GPU, and matrix-vector products for one row (a decoding
 * step); the scalar kernel for any other shape.
 */
export function matmulOp(o: Orientation, M: number, N: number, K: number): Op {
  const vec4 = N % 4 === 0 && (o === "tn" ? M % 4 === 0 : K % 4 === 0);
  if (!vec4) return `matmul_${o}`;
  if (M === 1 && o !== "tn") return `matvec_${o}`;
  return ceil(M, 128) * ceil(N, 128) < 128 ? `matmul_vec4_${o}_64` : `matmul_vec4_${o}`;
}

/** An elementwise op for n elements: its vec4 kernel where n is a multiple of 4. */
export function elementwiseOp<O extends "gelu_forward" | "gelu_backward">(op: O, n: number): O | `${O}_vec4` {
  return n % 4 === 0 ? `${op}_vec4` : op;
}

/** The column-sum kernel for N columns: the vec4 one where N is a multiple of 4. */
export function colsumOp(N: number): "colsum" | "colsum_vec4" {
  return N % 4 === 0 ? "colsum_vec4" : "colsum";
}

type AttentionOp = "attention_forward" | "attention_backward_dq" | "attention_backward_dkdv";

/**
 * An attention op of a table for heads of D columns: its matrix-unit variant where the table has
 * one for D, else the plain op, for heads of at most 64 columns its _64 one.
 */
export function attentionOp(kernels: KernelTable, op: AttentionOp, D: number): AnyOp {
  const matrix = kernels[`${op}_matrix`];
  if (matrix && D <= matrix.constants.HEAD) return `${op}_matrix`;
  return D <= kernels[`${op}_64`].constants.HEAD ? `${op}_64` : op;
}

/** The weight-gradient kernel of a table for C[M,N] = Aᵀ·B over K rows: matmulOp's, or the 128 block from its `fromK` on. */
export function weightGradOp(kernels: KernelTable, M: number, N: number, K: number): Op {
  const op = matmulOp("tn", M, N, K);
  const from = kernels.matmul_vec4_tn.fromK;
  return op === "matmul_vec4_tn_64" && from !== undefined && K >= from ? "matmul_vec4_tn" : op;
}
