// The WebGPU backend against the numpy reference at a batch of 1040 positions and a
// context of 80 (TINYGPT_SPLIT_REF, written by tests/test_engine_node.py): the sizes at
// which the engine splits its long reductions (weight gradients along K, LayerNorm's
// parameter sums along the rows) and attention spans more than one block of keys.
import { test } from "node:test";
import assert from "node:assert/strict";
import { gpu, noGpu } from "./dawn";
import { l2, readJson, rel } from "./fixtures";
import { createGpuBackend } from "../gpu/backend";
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

test("WebGPU backend matches the reference where it splits its reductions", { skip: noGpu ?? (path ? false : "TINYGPT_SPLIT_REF not set (tests/test_engine_node.py sets it)") }, async () => {
  const ref = readJson<SplitReference>(path!);
  const backend = await createGpuBackend(ref.config, ref.train, { gpu });
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
  } finally {
    backend.dispose();
  }
});
