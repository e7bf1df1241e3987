// The WebGPU backend on Dawn: the conformance suite (conformance.ts) for the
// plain kernels and for each GPU lever's table, then what only this backend
// does: splitting its reductions as its kernel table says, refusing heads
// wider than its attention kernels hold, fine-tuning an adapter of any rank,
// on a table that reads weights as halves and in micro-batches, and turning a lost device into
// DeviceLostError. Every backend here shares one device, so
// each kernel compiles once (SwiftShader takes about a minute for them all).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { gpu, noGpu } from "./dawn";
import { F16_POLICY, F32_POLICY, conformance, oddRankRuns, reference, replayReference } from "./conformance";
import { ROOT, f32, fixture, l2, readJson, rel } from "./fixtures";
import { createGpuBackend } from "../gpu/backend";
import { requestGpu } from "../gpu/device";
import { F32_KERNELS, type KernelTable } from "../gpu/kernels";
import { DeviceLostError, loadTrainer } from "../index";
import { paramCount, preset } from "../model";
import { gpuFit } from "../gpu/plan";
import type { Draw, ModelConfig, TrainConfig } from "../types";
import { GPU_LEVERS, leverFeatures, tableOn } from "../../levers/gpu";
import { STORAGE_F16 } from "../../levers/storage-f16/lever";
import type { LoraSettings } from "../lora";

const adapter = noGpu ? null : await gpu.requestAdapter();
const context = adapter ? await requestGpu(gpu, adapter) : null;

conformance({
  name: "webgpu",
  make: (model, train, lora) => createGpuBackend(model, train, { context: context!, lora }),
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
    make: async (model, train, lora) => createGpuBackend(model, train, { context: await own!, kernels: table!, lora }),
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
  const colsums = (list: string[]) => list.filter((op) => op.startsWith("colsum")).length;
  const [split, unsplit] = [colsums(await ops({})), colsums(await ops(whole))];
  assert.ok(unsplit < split, `colsum ran ${unsplit} times unsplit, ${split} split`);
});

test("webgpu: tokens chosen on the GPU are those pickToken chooses on the CPU from the same logits and seed, in batches of any size, across window slides", { skip: noGpu ?? false }, async () => {
  const r = readJson<{ model: string; prompt: number[] }>(join(process.env.TINYGPT_CONFORMANCE ?? assert.fail("TINYGPT_CONFORMANCE is not set"), "sample.json"));
  const trainer = await loadTrainer(readFileSync(join(ROOT, r.model)), (m, t) => createGpuBackend(m, t, { context: context! }));
  try {
    const prompt = Uint8Array.from(r.prompt);
    const T = trainer.model.block_size;
    const draws: Draw[] = [{ temperature: 0.8, topK: 40 }, { temperature: 1.3, topK: 0, topP: 0.9 }, { temperature: 1, topK: 12, topP: 0.7 }, { temperature: 0, topK: 0 }];
    for (const draw of draws) {
      const opts = { ...draw, maxTokens: T + 24, seed: 7 }; // the window slides on the way
      const gpuText = await trainer.sample(prompt, opts, () => {});
      const cpuText = await trainer.sample(prompt, { ...opts, drawOnHost: true }, () => {});
      assert.deepEqual([...gpuText], [...cpuText], JSON.stringify(draw));
    }
    // One submission of many, or many of one: the same tokens (each draws its own counter's uniform).
    const b = trainer.backend;
    const window = Int32Array.from(prompt.subarray(0, 20));
    const draw = { temperature: 1, topK: 0 };
    const whole = await b.sampleTokens!(window, 12, draw, 3, 100);
    const pieces = [...(await b.sampleTokens!(window, 1, draw, 3, 100))];
    for (let i = 1; i < 12; i += 5) pieces.push(...(await b.sampleTokens!(null, Math.min(5, 12 - i), draw, 3, 100 + i)));
    assert.deepEqual(pieces, [...whole]);
    // What the cache cannot hold is refused, as is going on from a token it did not pick.
    await assert.rejects(async () => b.sampleTokens!(window, T - window.length + 2, draw, 3, 0), /overflow the cache/);
    await b.prefill(window);
    await assert.rejects(async () => b.sampleTokens!(null, 1, draw, 3, 0), /give a window/);
  } finally {
    trainer.dispose();
  }
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

test("profilePrefill times each dispatch of a prefill and leaves its cache: a decode after it gives what a decode after prefill gives", { skip: noGpu ?? false }, async () => {
  const g = golden();
  const b = await createGpuBackend(g.config, g.train, { context: context! });
  try {
    await b.setState({ params: f32(g.init_params), step: 0 });
    const window = Int32Array.of(3, 1, 4, 1);
    const profile = await b.profilePrefill(window);
    assert.ok(profile.dispatches.some((d) => d.op === "embedding_forward") && profile.dispatches.some((d) => d.op.startsWith("attention_forward")), profile.dispatches.map((d) => d.op).join());
    assert.ok(profile.dispatches.every((d) => d.ms >= 0 && d.workgroups > 0));
    const profiled = await b.decode(5);
    await b.prefill(window);
    assert.deepEqual(profiled, await b.decode(5));
    await assert.rejects(b.profilePrefill(new Int32Array(0)), /prefill takes 1 to/);
  } finally {
    b.dispose();
  }
});

test("an adapter whose rank is no multiple of 4, on the scalar matmuls, trains as the same adapter zero-padded to rank 4 on the vec4 ones", { skip: noGpu ?? false }, async () => {
  const { odd, even } = await oddRankRuns((model, train, lora) => createGpuBackend(model, train, { context: context!, lora }));
  odd.losses.forEach((loss, i) => assert.ok(rel(loss, even.losses[i]) < F32_POLICY.loss_rel, `step ${i}: loss ${loss} at rank 3, ${even.losses[i]} at rank 4`));
  const apart = l2(odd.params.map((x, i) => x - even.params[i]));
  assert.ok(apart < F32_POLICY.l2_rel * l2(even.params), `the adapters trained ${apart} apart (L2 ${l2(even.params)})`);
});

test("fine-tuning on a table that reads weights as halves (storage-f16) keeps the adapter's halves in step with its f32 tensors", { skip: noGpu ?? false }, async () => {
  const g = golden();
  const L = readJson<{ lora: LoraSettings; base_params: string; init_adapter: string }>(fixture("golden_lora_tiny.json")!);
  const [plain, halves] = [await createGpuBackend(g.config, g.train, { context: context!, lora: L.lora }), await createGpuBackend(g.config, g.train, { context: context!, kernels: STORAGE_F16.kernels, lora: L.lora })];
  try {
    const window = Int32Array.from(g.steps[0].x.slice(0, g.config.block_size));
    for (const b of [plain, halves]) {
      await b.setState({ params: f32(L.base_params), step: 0 });
      await b.adapter!.setState({ params: f32(L.init_adapter), step: 0 });
    }
    // Steps large enough that an adapter read from halves of the start would give other logits.
    for (const st of g.steps.slice(0, 5)) await halves.trainStep(Int32Array.from(st.x), Int32Array.from(st.y), 0.05);
    await plain.adapter!.setState(await halves.adapter!.getState());
    const [want, got] = [await plain.prefill(window), await halves.prefill(window)];
    const scale = Math.max(...want.map(Math.abs));
    const worst = Math.max(...got.map((x, i) => Math.abs(x - want[i])));
    assert.ok(worst < F16_POLICY.logits_of_max * scale, `logits from the halves differ by up to ${worst} (largest |logit| ${scale})`);
  } finally {
    plain.dispose();
    halves.dispose();
  }
});

test("fine-tuning in micro-batches (one sequence each, by an activation budget of 1 byte) takes the whole batch's steps and losses, and holds less", { skip: noGpu ?? false }, async () => {
  const g = golden();
  const L = readJson<{ lora: LoraSettings; base_params: string; init_adapter: string }>(fixture("golden_lora_tiny.json")!);
  const ids = (a: number[]) => Int32Array.from(a);
  const tune = async (activationBudget?: number) => {
    const b = await createGpuBackend(g.config, g.train, { context: context!, lora: L.lora, activationBudget });
    try {
      await b.setState({ params: f32(L.base_params), step: 0 });
      await b.adapter!.setState({ params: f32(L.init_adapter), step: 0 });
      const losses = [];
      for (const st of g.steps.slice(0, 5)) losses.push(await b.trainStep(ids(st.x), ids(st.y), st.lr));
      const st = g.steps[5];
      losses.push(await b.loss(ids(st.x), ids(st.y)));
      const profile = await b.profileStep(ids(st.x), ids(st.y), st.lr);
      losses.push(await b.loss(ids(st.x), ids(st.y)));
      return { losses, state: await b.adapter!.getState(), bytes: b.residentBytes, forwards: profile.dispatches.filter((d) => d.op === "embedding_forward").length };
    } finally {
      b.dispose();
    }
  };
  const [whole, split] = [await tune(), await tune(1)];
  assert.equal(whole.forwards, 1);
  assert.equal(split.forwards, g.train.batch_size, "a profiled step runs every micro-batch");
  split.losses.forEach((loss, i) => assert.ok(rel(loss, whole.losses[i]) < F32_POLICY.loss_rel, `loss ${i}: ${loss} in micro-batches, ${whole.losses[i]} whole`));
  // The moments too: Adam's step barely moves if every gradient is scaled alike, m and v do.
  for (const key of ["params", "m", "v"] as const) {
    const [got, want] = [split.state[key]!, whole.state[key]!];
    const apart = l2(got.map((x, i) => x - want[i]));
    assert.ok(apart < F32_POLICY.l2_rel * l2(want), `the adapters' ${key} ended ${apart} apart (L2 ${l2(want)})`);
  }
  assert.ok(split.bytes < whole.bytes, `micro-batches hold ${split.bytes} bytes, the whole batch ${whole.bytes}`);
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
