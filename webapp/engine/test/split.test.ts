// The WebGPU backend against the numpy reference at a batch of 1040 positions and a
// context of 80 (TINYGPT_SPLIT_REF, written by tests/test_engine_node.py): the sizes at
// which the engine splits its long reductions (weight gradients along K, LayerNorm's
// parameter sums along the rows) and attention spans more than one block of keys; and with
// a kernel table whose weight-gradient kernels say they cannot split.
import { test } from "node:test";
import assert from "node:assert/strict";
import { gpu, noGpu } from "./dawn";
import { l2, readJson, rel } from "./fixtures";
import { createGpuBackend } from "../gpu/backend";
import { F32_KERNELS, type KernelTable } from "../gpu/kernels";
import { tensorLayout } from "../model";
import type { ModelConfig, TrainConfig } from "../types";

interface SplitReference {
  config: ModelConfig;
  train: TrainConfig;
  init_params: number[];
  steps: { x: number[]; y: number[]; lr: number; loss: number }[];
  l2: Record<string, number>;
}

const path = process.env.TINYGPT_SPLIT_REF;
const skip = noGpu ?? (path ? false : "TINYGPT_SPLIT_REF not set (tests/test_engine_node.py sets it)");

/** Trains the reference's steps with `kernels` over the default table and checks every loss and weight; returns the ops of one more step. */
async function replay(kernels: Partial<KernelTable> = {}): Promise<string[]> {
  const ref = readJson<SplitReference>(path!);
  const backend = await createGpuBackend(ref.config, ref.train, { gpu, kernels });
  try {
    await backend.setState({ params: Float32Array.from(ref.init_params), step: 0 });
    for (const [i, s] of ref.steps.entries()) {
      const loss = await backend.trainStep(Int32Array.from(s.x), Int32Array.from(s.y), s.lr);
      assert.ok(rel(loss, s.loss) < 1e-4, `step ${i}: loss ${loss} vs reference ${s.loss}`);
    }
    const { params } = await backend.getState();
    // As in the golden test: the k_proj bias's true gradient is zero, its updates rounding noise.
    for (const t of tensorLayout(ref.config).filter((t) => !t.name.endsWith("attn.k_proj.bias"))) {
      const got = l2(params.subarray(t.offset, t.offset + t.size));
      assert.ok(rel(got, ref.l2[t.name]) < 1e-4, `${t.name}: L2 ${got} vs reference ${ref.l2[t.name]}`);
    }
    const last = ref.steps[ref.steps.length - 1];
    return (await backend.profileStep(Int32Array.from(last.x), Int32Array.from(last.y), last.lr)).map((d) => d.op);
  } finally {
    backend.dispose();
  }
}

test("WebGPU backend matches the reference where it splits its reductions, and where its table says it cannot", { skip }, async () => {
  const split = await replay();
  // The split policy is the kernel table's: weight-gradient matmuls marked unsplittable run whole,
  // so fewer partial sums are left for matmul_colsum to add.
  const whole = await replay(Object.fromEntries((["matmul_tn", "matmul_vec4_tn", "matmul_vec4_tn_64"] as const).map((op) => [op, { ...F32_KERNELS[op], split: false }])));
  const colsums = (ops: string[]) => ops.filter((op) => op === "matmul_colsum").length;
  assert.ok(colsums(whole) < colsums(split), `matmul_colsum ran ${colsums(whole)} times unsplit, ${colsums(split)} split`);
});
