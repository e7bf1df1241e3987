// The WebGPU backend on Dawn: the conformance suite (conformance.ts) for the
// plain kernels and for each GPU lever's table, then what only this backend
// does: splitting its reductions as its kernel table says, refusing heads
// wider than its attention kernels hold, and turning a lost device into
// DeviceLostError. Every backend here shares one device, so
// each kernel compiles once (SwiftShader takes about a minute for them all).
import { test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { gpu, noGpu } from "./dawn";
import { F16_POLICY, F32_POLICY, conformance, reference, replayReference } from "./conformance";
import { f32, fixture, readJson } from "./fixtures";
import { createGpuBackend } from "../gpu/backend";
import { requestGpu } from "../gpu/device";
import { F32_KERNELS, type KernelTable } from "../gpu/kernels";
import { DeviceLostError } from "../index";
import { paramCount, preset } from "../model";
import { gpuFit } from "../gpu/plan";
import type { ModelConfig, TrainConfig } from "../types";
import { GPU_LEVERS, leverFeatures, tableOn } from "../../levers/gpu";

const adapter = noGpu ? null : await gpu.requestAdapter();
const context = adapter ? await requestGpu(gpu, adapter) : null;

conformance({
  name: "webgpu",
  make: (model, train) => createGpuBackend(model, train, { context: context! }),
  skip: noGpu ?? false,
  trained(file, loss) {
    // For tests/test_engine_node.py: the Python reader must get the same loss from this file.
    const out = process.env.TINYGPT_NODE_TRAINED_OUT;
    if (out) {
      writeFileSync(out, file);
      writeFileSync(`${out}.json`, JSON.stringify({ loss }));
    }
  },
});

// The shipped levers, held to the f32 numbers like the plain kernels, or to facts.conformance.f16
// where their kernels round operands to f16 (coop-matrix). An experimental one is held to its gate
// and its own tests only.
for (const lever of GPU_LEVERS) {
  const table = adapter ? tableOn(lever, adapter, gpu.wgslLanguageFeatures) : null;
  const own = table ? requestGpu(gpu, undefined, leverFeatures(lever)) : null;
  conformance({
    name: `webgpu + ${lever.id}`,
    make: async (model, train) => createGpuBackend(model, train, { context: await own!, kernels: table! }),
    policy: lever.f16 ? F16_POLICY : F32_POLICY,
    skip: noGpu ?? (table ? false : `the adapter lacks ${leverFeatures(lever).join(", ")} or WGSL lacks ${lever.wgslFeatures}, or the lever has no table for it`),
  });
}

test("webgpu: the split policy is the kernel table's: weight-gradient matmuls marked unsplittable run whole and still match the reference", { skip: noGpu ?? false }, async () => {
  const r = reference("split");
  const whole = Object.fromEntries((["matmul_tn", "matmul_vec4_tn", "matmul_vec4_tn_64"] as const).map((op) => [op, { ...F32_KERNELS[op], split: false }]));
  // The ops of a step (the same pipelines: only the plan differs); the table that runs them
  // whole must match the reference too (the plain one does in its conformance case).
  const ops = async (kernels: Partial<KernelTable>) => {
    const b = await createGpuBackend(r.config, r.train, { context: context!, kernels });
    try {
      if (Object.keys(kernels).length) await replayReference(b, r, "split, weight gradients whole");
      const last = r.steps[r.steps.length - 1];
      return (await b.profileStep(Int32Array.from(last.x), Int32Array.from(last.y), last.lr)).dispatches.map((d) => d.op);
    } finally {
      b.dispose();
    }
  };
  // Fewer partial sums are left for colsum to add.
  const colsums = (list: string[]) => list.filter((op) => op === "colsum").length;
  const [split, unsplit] = [colsums(await ops({})), colsums(await ops(whole))];
  assert.ok(unsplit < split, `colsum ran ${unsplit} times unsplit, ${split} split`);
});

const golden = () => readJson<{ config: ModelConfig; train: TrainConfig; init_params: string; steps: { x: number[]; y: number[]; lr: number }[] }>(fixture("golden_tiny.json")!);

test("heads wider than the attention kernels hold are refused before any GPU work", async () => {
  const model: ModelConfig = { vocab_size: 256, n_layer: 1, n_embd: 256, n_head: 1, block_size: 8 };
  await assert.rejects(createGpuBackend(model, golden().train, { gpu }), /heads up to 128 wide; 256 \/ 1 = 256/);
});

test("the memory shown before Start (plan.ts, on a stand-in device) is what a training backend holds but its uniforms and readback", { skip: noGpu ?? false }, async () => {
  const { model, train } = preset("tiny");
  const b = await createGpuBackend(model, train, { context: context! });
  try {
    const n = train.batch_size * model.block_size;
    await b.setState({ params: new Float32Array(paramCount(model)), step: 0 });
    await b.trainStep(new Int32Array(n), new Int32Array(n), train.lr);
    const planned = gpuFit(model, train.batch_size, context!.device.limits).bytes;
    const rest = b.residentBytes - planned;
    assert.ok(rest >= 0 && rest < 0.02 * b.residentBytes, `resident ${b.residentBytes}, planned ${planned}`);
  } finally {
    b.dispose();
  }
});

// Last: it destroys the shared device.
test("a lost device fails pending and later work with DeviceLostError", { skip: noGpu ?? false }, async () => {
  const g = golden();
  const backend = await createGpuBackend(g.config, g.train, { context: context! });
  await backend.setState({ params: f32(g.init_params), step: 0 });
  const [x, y] = [Int32Array.from(g.steps[0].x), Int32Array.from(g.steps[0].y)];
  // The worker turns this error into "resume from the last checkpoint".
  const pending = backend.trainStep(x, y, g.steps[0].lr).catch((e) => e);
  context!.device.destroy();
  assert.ok((await pending) instanceof DeviceLostError);
  await assert.rejects(backend.loss(x, y), DeviceLostError);
  assert.ok((await backend.lost) instanceof DeviceLostError);
  backend.dispose();
});
