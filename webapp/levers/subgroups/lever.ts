// The subgroups lever (facts.levers "subgroups"): the kernels whose time goes
// into workgroup reductions (LayerNorm forward and backward, the cross-entropy
// loss and its mean, the gradient norm) with those reductions done by subgroup
// operations: shaders/levers/subgroups/, the plain modules composed over
// levers/subgroups/lib/reduce_subgroups.wgsl in place of lib/reduce_tree.wgsl.
// They need the adapter's `subgroups` feature and WGSL's `subgroup_id`
// language feature (the subgroup_id and num_subgroups builtins), which is how
// they combine subgroups without assuming which invocations share one or how
// many there are.

import { F32_KERNELS, type Op } from "../../engine/gpu/kernels";
import type { GpuLever } from "../gpu";
import layernorm from "../../../.cache/wgsl/levers/subgroups/layernorm.wgsl";
import crossentropy from "../../../.cache/wgsl/levers/subgroups/crossentropy.wgsl";
import optimizer from "../../../.cache/wgsl/levers/subgroups/optimizer.wgsl";

// A variant keeps everything of its plain kernel but the source: the same entry, params and dispatch.
const on = (source: string, ...ops: Op[]) => Object.fromEntries(ops.map((op) => [op, { ...F32_KERNELS[op], source }]));

export const SUBGROUPS = {
  id: "subgroups",
  feature: "subgroups",
  wgslFeatures: ["subgroup_id"],
  kernels: {
    ...on(layernorm, "layernorm_forward", "layernorm_forward_residual", "layernorm_backward_dx"),
    ...on(crossentropy, "crossentropy_forward", "crossentropy_mean"),
    ...on(optimizer, "grad_norm_partial", "grad_norm_final"),
  },
} satisfies GpuLever;
