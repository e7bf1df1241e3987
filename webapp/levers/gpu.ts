// The GPU half of the lever framework. A GPU lever is a kernel table: the ops
// it replaces (kernels.ts Op -> Kernel, keeping each op's bindings and params)
// and the adapter feature it needs. Its gate, kernelTableAgrees, runs a whole
// training step of small models twice on this adapter, once on the plain
// kernels and once with the lever's, and compares what the step computes: the
// logits, the loss, and the gradients (after one step from zero moments, Adam's
// m is (1 - beta1) times the clipped gradient and v (1 - beta2) times its
// square), each within facts.gate. Then, as a table may keep state of its own
// beside the parameters (storage-f16's packed mirror of them), the logits after
// that step, which moved every weight by about STEP_LR, must match the plain
// kernels' on the very parameters the variant's step left: a variant whose state
// fell behind its parameters is refused. The worker passes the tables that
// passed to the WebGPU backend (its `kernels` option) with the features they need.

import { createGpuBackend } from "../engine/gpu/backend";
import { type GpuContext, describeAdapter, requestGpu } from "../engine/gpu/device";
import { F32_KERNELS, type KernelTable, type Op } from "../engine/gpu/kernels";
import { defaultTrainConfig, paramCount } from "../engine/model";
import { Rng } from "../engine/rng";
import type { ModelConfig } from "../engine/types";
import { type Verdict, browserVersion, gate, shaderHash, withinGate } from "./gate";
import { storageF16 } from "./storage-f16/lever";

export interface GpuLever {
  /** Its facts.levers id. */
  id: string;
  /** The adapter feature its kernels need (facts.levers feature), or null. */
  feature: GPUFeatureName | null;
  kernels: Partial<KernelTable>;
  /** Models gated besides GATE_SHAPES, for ops of its that those never run (the gate refuses a table it cannot exercise). */
  shapes?: GateShape[];
}

export interface GateShape {
  model: ModelConfig;
  batch: number;
}

// The GPU levers, in facts.levers order; each lives in webapp/levers/<id>/.
export const GPU_LEVERS: GpuLever[] = [storageF16];

/**
 * A shape with aligned sizes (the vec4 matmuls, 64-wide tiles at this size),
 * and one with none (n_embd 18: the scalar matmuls; head size 6; a context of 7).
 */
export const GATE_SHAPES: GateShape[] = [
  { model: { vocab_size: 256, n_layer: 1, n_embd: 32, n_head: 2, block_size: 9 }, batch: 3 },
  { model: { vocab_size: 256, n_layer: 1, n_embd: 18, n_head: 3, block_size: 7 }, batch: 2 },
];

const LR = 1e-3;
// The gated step's learning rate: Adam's first step moves each weight by about this (m and v do
// not depend on it), far more than f16 rounding, so logits from stale weights cannot pass.
const STEP_LR = 0.05;

/**
 * Where a check runs: a fresh device from `gpu` (what the worker does, so a
 * broken variant cannot upset the next lever's check), or a device the caller
 * shares across checks (tests: the plain kernels compile once).
 */
export type GateDevice = { gpu: GPU } | { context: GpuContext };

/**
 * Null when the kernel table `kernels` computes a training step of every
 * shape like the plain kernels do on this adapter, else why not.
 */
export async function kernelTableAgrees(on: GateDevice, kernels: Partial<KernelTable>, features: GPUFeatureName[] = [], shapes = GATE_SHAPES): Promise<string | null> {
  const unexercised = new Set(Object.keys(kernels) as Op[]);
  // One device for both sides: the plain kernels compile once, the variants only what they replace.
  const context = "context" in on ? on.context : await requestGpu(on.gpu, undefined, features);
  try {
    for (const { model, batch } of shapes) {
      const train = defaultTrainConfig(batch, LR);
      const plain = await createGpuBackend(model, train, { context });
      const variant = await createGpuBackend(model, train, { context, kernels }).catch((e) => {
        plain.dispose();
        throw e;
      });
      try {
        for (const op of variant.ops) unexercised.delete(op);
        const rng = new Rng(20261201);
        const params = Float32Array.from({ length: paramCount(model) }, () => rng.normal() * 0.3);
        const n = batch * model.block_size;
        const x = Int32Array.from({ length: n }, () => rng.int(model.vocab_size));
        const y = Int32Array.from({ length: n }, () => rng.int(model.vocab_size));
        const run = async (b: typeof plain) => {
          await b.setState({ params, step: 0 });
          const logits = await b.nextLogits(x.subarray(0, model.block_size));
          const loss = await b.loss(x, y);
          const stepLoss = await b.trainStep(x, y, STEP_LR);
          const { m, v, params: after } = await b.getState();
          return { logits, loss: Float32Array.of(loss, stepLoss), m: m!, v: v!, after };
        };
        const [want, got] = [await run(plain), await run(variant)];
        const shape = `${model.n_layer}x${model.n_embd}x${model.n_head}, context ${model.block_size}, batch ${batch}`;
        for (const what of ["logits", "loss", "m", "v"] as const) {
          if (!withinGate(got[what], want[what])) return `its ${what === "m" || what === "v" ? `gradients (Adam ${what})` : what} differ from the plain kernels' (${shape})`;
        }
        const stepped = await variant.nextLogits(x.subarray(0, model.block_size));
        await plain.setState({ params: got.after, step: 1 });
        if (!withinGate(stepped, await plain.nextLogits(x.subarray(0, model.block_size)))) return `its logits after a step differ from the plain kernels' on the parameters it left (${shape})`;
      } finally {
        plain.dispose();
        variant.dispose();
      }
    }
  } finally {
    if (!("context" in on)) context.device.destroy();
  }
  return unexercised.size ? `the gate's shapes never run ${[...unexercised].join(", ")}` : null;
}

/** What the WebGPU backend runs on an adapter: every GPU lever's verdict, and the tables and features of those that passed. */
export interface GpuLevers {
  verdicts: Record<string, Verdict>;
  kernels: Partial<KernelTable>;
  features: GPUFeatureName[];
}

/**
 * The GPU levers gated on the adapter `on` offers, described by `adapter`
 * (levers whose feature it lacks get no verdict: they were never possible here).
 */
export async function gpuLevers(on: GateDevice, adapter: GPUAdapter, levers = GPU_LEVERS): Promise<GpuLevers> {
  const out: GpuLevers = { verdicts: {}, kernels: {}, features: [] };
  for (const lever of levers) {
    if (lever.feature && !adapter.features.has(lever.feature)) continue;
    const features = lever.feature ? [lever.feature] : [];
    // The variants and the plain kernels they are held to.
    const sources = Object.entries(lever.kernels).map(([op, k]) => `${op}\0${k!.entry}\0${JSON.stringify(k!.constants)}\0${k!.source}\0${F32_KERNELS[op as Op].source}`).sort();
    const key = { adapter: describeAdapter(adapter), browser: browserVersion(), shaders: await shaderHash(...sources) };
    const verdict = await gate(lever.id, key, () => kernelTableAgrees(on, lever.kernels, features, [...GATE_SHAPES, ...(lever.shapes ?? [])]));
    out.verdicts[lever.id] = verdict;
    if (verdict.pass) {
      Object.assign(out.kernels, lever.kernels);
      out.features.push(...features);
    }
  }
  return out;
}
