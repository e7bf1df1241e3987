// The coop-attention lever (facts.levers "coop-attention", experimental): attention's forward, dQ
// and dK/dV on the GPU's matrix units (shaders/levers/coop-attention/attention.wgsl), for heads of
// up to 64 columns (the graph keeps wider ones on the plain kernels: kernels.ts attentionOp), on
// the adapters the coop-matrix lever runs on (the same config and one subgroup size). Correct to
// f16 rounding, but slower than the plain kernels on the H200 (content/docs/kernels.md), so
// the app does not run it; the CLIs and benchmarks take it when named.

import attention from "../../../.cache/wgsl/levers/coop-attention/attention.wgsl";
import { type AddedKernels, F32_KERNELS, type KernelTable, type Op, type Sizes, type Workgroups } from "../../engine/gpu/kernels";
import { MATRIX_NEEDS, type MatrixAdapter, type MatrixInfo, matrixSubgroupSize } from "../coop-matrix/lever";
import { GATE_SHAPES, WIDE_SHAPE } from "../shapes";
import type { GpuLever } from "../gpu";

export const ID = "coop-attention";

// The widest head the kernels stage (their output products hold four results of 16 columns), and
// a workgroup of four subgroups owning 64 rows of a head. Its memory: 2 staged operands of 32 rows
// of HEAD + 8 halves, 8 f16 tiles of 16 x 40, 8 f32 slots of 16 x 36, 64 f32 statistics.
const HEAD = 64;
const ROWS = 64;
export const WORKGROUP_BYTES = (2 * 32 * (HEAD + 8) + 8 * 16 * 40) * 2 + 8 * 16 * 36 * 4 + 64 * 4;
const OPS: [added: keyof AddedKernels, plain: Op][] = [
  ["attention_forward_matrix", "attention_forward"],
  ["attention_backward_dq_matrix", "attention_backward_dq"],
  ["attention_backward_dkdv_matrix", "attention_backward_dkdv"],
];
const perHeadRows = (s: Sizes): Workgroups => [Math.ceil(s.T / ROWS), s.B * s.n_head, 1];

/** The table for an adapter, or null where it cannot run: no subgroup size for matrices, or too few invocations or too little memory a workgroup. */
export function attentionTable({ info, limits }: MatrixAdapter): Partial<KernelTable> | null {
  const size = matrixSubgroupSize(info);
  if (!size || (ROWS / 16) * size > limits.maxComputeInvocationsPerWorkgroup || WORKGROUP_BYTES > limits.maxComputeWorkgroupStorageSize) return null;
  const table: Partial<KernelTable> = {};
  for (const [added, plain] of OPS) table[added] = { ...F32_KERNELS[plain], source: attention, constants: { SUBGROUP: size, HEAD }, workgroups: perHeadRows };
  return table;
}

export const COOP_ATTENTION = {
  id: ID,
  ...MATRIX_NEEDS,
  forAdapter: (adapter) => attentionTable({ info: adapter.info as MatrixInfo, limits: adapter.limits }),
  // Heads of 32 columns over 64 positions, and of 16 over 9 (a context shorter than a workgroup's rows).
  shapes: [WIDE_SHAPE, GATE_SHAPES[0]],
} satisfies GpuLever;
