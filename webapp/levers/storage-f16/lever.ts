// The storage-f16 lever (facts.levers "storage-f16"): the matmuls whose B operand is a weight
// read it as packed halves (pack2x16float/unpack2x16float, core WGSL, so every WebGPU device
// has it), half the bytes of the f32 weights; the maths, the activations, the gradients and the
// f32 master weights the optimizer updates and checkpoints hold stay as they are. The mirror of
// halves is written by setState and refreshed by the lever's AdamW in the same dispatch that
// updates the weights, so each step's forward reads the weights of the step before.
// Ops: the linear forward y = x·W and dln = dlogits·wte (nn), dx = dy·Wᵀ and logits = x·wteᵀ
// (nt), in the scalar and vec4 modules and both vec4 tiles, and adamw. The weight gradients
// (tn) read no weight and keep the plain kernels.

import matmulHalves from "../../../.cache/wgsl/levers/storage-f16/matmul.wgsl";
import matmulVec4Halves from "../../../.cache/wgsl/levers/storage-f16/matmul_vec4.wgsl";
import optimizerHalves from "../../../.cache/wgsl/levers/storage-f16/optimizer.wgsl";
import { F32_KERNELS, type Kernel, type KernelTable, elementwise } from "../../engine/gpu/kernels";
import type { GpuLever } from "../gpu";
import { GATE_SHAPES, WIDE_SHAPE } from "../shapes";

export const ID = "storage-f16";

const WEIGHT_OPS = ["matmul_nn", "matmul_nt", "matmul_vec4_nn", "matmul_vec4_nt", "matmul_vec4_nn_64", "matmul_vec4_nt_64"] as const;

/** The plain op's kernel, from `source`, its B read from the mirror. */
const fromMirror = (op: (typeof WEIGHT_OPS)[number], source: string): Kernel => ({ ...F32_KERNELS[op], source, weightsFromMirror: true });

/** Its composed modules, by the plain module each varies. */
export const MODULES = { matmul: matmulHalves, matmul_vec4: matmulVec4Halves, optimizer: optimizerHalves };

/** The lever's table from its modules (the tests pass modules broken on purpose). */
export function storageF16Kernels(modules = MODULES): Partial<KernelTable> {
  const table: Partial<KernelTable> = Object.fromEntries(WEIGHT_OPS.map((op) => [op, fromMirror(op, op.startsWith("matmul_vec4") ? modules.matmul_vec4 : modules.matmul)]));
  table.adamw = {
    ...F32_KERNELS.adamw,
    source: modules.optimizer,
    entry: "adamw_halves",
    refreshesMirror: true,
    // One invocation per u32 of the mirror holding an element of [offset, offset + n).
    workgroups: (s) => elementwise(Math.ceil((s.offset + s.n) / 2) - Math.floor(s.offset / 2)),
  };
  return table;
}

export const STORAGE_F16 = { id: ID, feature: null, kernels: storageF16Kernels(), shapes: [...GATE_SHAPES, WIDE_SHAPE], f16: true } satisfies GpuLever;
