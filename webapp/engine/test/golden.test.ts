// Golden parity: the WebGPU backend on Dawn reproduces the numpy reference's
// 20 training steps (tests/fixtures/golden_tiny.json, from `python -m tinygpt.golden`).
import { test } from "node:test";
import assert from "node:assert/strict";
import { gpu, noGpu } from "./dawn";
import { f32, fixture, l2, readJson, rel } from "./fixtures";
import { createGpuBackend } from "../gpu/backend";
import { writeFileSync } from "node:fs";
import { GPTTrainer, resumeTrainer } from "../trainer";
import { readCheckpoint } from "../checkpoint";
import { DeviceLostError, loadTrainer } from "../index";
import { tensorLayout } from "../model";
import type { ModelConfig, TrainConfig } from "../types";

interface Golden {
  config: ModelConfig;
  train: TrainConfig;
  init_params: string;
  steps: { lr: number; x: number[]; y: number[]; loss_f32: number; loss_f64: number }[];
  logits_step0: string;
  final: { params: Record<string, { sum: number; l2: number }>; m_l2: number; v_l2: number; loss_f32: number };
  sample: { prompt: number[]; max_new_tokens: number; tokens: number[]; min_margin: number };
}

const path = fixture("golden_tiny.json");


test("WebGPU backend reproduces the golden 20-step run", { skip: noGpu ?? (path ? false : "tests/fixtures/golden_tiny.json is missing (python -m tinygpt.golden)") }, async () => {
  const g = readJson<Golden>(path!);
  const backend = await createGpuBackend(g.config, g.train, { gpu });
  try {
    await backend.setState({ params: f32(g.init_params), step: 0 });

    const first = Int32Array.from(g.steps[0].x.slice(0, g.config.block_size));
    const logits = await backend.nextLogits(first);
    const want = f32(g.logits_step0);
    const worst = Math.max(...want.map((w, i) => Math.abs(logits[i] - w)));
    assert.ok(worst < 1e-4, `initial logits differ from the reference by up to ${worst}`);

    // Issue all 20 steps before reading any loss: the pipelined path users run.
    const pending = g.steps.map((s) => backend.trainStep(Int32Array.from(s.x), Int32Array.from(s.y), s.lr));
    const losses = await Promise.all(pending);
    assert.ok(rel(losses[0], g.steps[0].loss_f32) < 1e-4, `first-step loss ${losses[0]} vs reference ${g.steps[0].loss_f32}`);
    losses.forEach((loss, i) => assert.ok(rel(loss, g.steps[i].loss_f32) < 1e-3, `step ${i}: loss ${loss} vs reference ${g.steps[i].loss_f32}`));

    const x0 = Int32Array.from(g.steps[0].x);
    const y0 = Int32Array.from(g.steps[0].y);
    const finalLoss = await backend.loss(x0, y0);
    assert.ok(rel(finalLoss, g.final.loss_f32) < 1e-3, `loss after 20 steps ${finalLoss} vs reference ${g.final.loss_f32}`);

    const state = await backend.getState();
    assert.equal(state.step, 20);
    // Softmax ignores a constant added to every key, so the k_proj bias gradient is
    // zero up to rounding and its Adam updates are rounding noise: not comparable.
    for (const t of tensorLayout(g.config).filter((t) => !t.name.endsWith("attn.k_proj.bias"))) {
      const got = l2(state.params.subarray(t.offset, t.offset + t.size));
      assert.ok(rel(got, g.final.params[t.name].l2) < 1e-3, `${t.name}: L2 ${got} vs reference ${g.final.params[t.name].l2}`);
    }
    assert.ok(rel(l2(state.m!), g.final.m_l2) < 1e-3, `Adam m L2 ${l2(state.m!)} vs ${g.final.m_l2}`);
    assert.ok(rel(l2(state.v!), g.final.v_l2) < 1e-3, `Adam v L2 ${l2(state.v!)} vs ${g.final.v_l2}`);

    // Greedy decoding is deterministic, and the reference's choices are far from ties (min_margin).
    const trainer = new GPTTrainer(backend, g.config, g.train, { step: g.steps.length });
    const opts = { temperature: 0, topK: 0, maxTokens: g.sample.max_new_tokens };
    const streamed: number[] = [];
    const a = await trainer.sample(Uint8Array.from(g.sample.prompt), opts, (b) => streamed.push(b));
    const b = await trainer.sample(Uint8Array.from(g.sample.prompt), opts, () => {});
    assert.deepEqual([...a], streamed);
    assert.deepEqual([...a], [...b]);
    if (g.sample.min_margin > 1e-3) assert.deepEqual([...a], g.sample.tokens);

    // A saved run resumes exactly: Adam moments and step counter included (the kernels are deterministic).
    const file = await trainer.save(true);
    const saved = readCheckpoint(file);
    assert.deepEqual(saved.params, state.params);
    assert.deepEqual(saved.v, state.v);
    const [x1, y1] = [Int32Array.from(g.steps[1].x), Int32Array.from(g.steps[1].y)];
    const onward = await backend.trainStep(x1, y1, g.train.lr);
    const after = await backend.loss(x0, y0);
    await resumeTrainer(backend, saved, g.train);
    assert.equal(await backend.trainStep(x1, y1, g.train.lr), onward);
    assert.equal(await backend.loss(x0, y0), after);

    // The whole Trainer on this backend: load from bytes, train on a corpus with
    // steps in flight, evaluate, save; the file carries the history and dataset.
    const resumed = await loadTrainer(file, async () => backend);
    assert.equal(resumed.step, g.steps.length);
    await resumed.setCorpus("sonnet", new TextEncoder().encode("Shall I compare thee to a summer's day? ".repeat(8)));
    const more = await Promise.all([resumed.trainStep(), resumed.trainStep(), resumed.trainStep()]);
    assert.ok(more.every(Number.isFinite));
    const val = await resumed.evaluate(2);
    assert.deepEqual(resumed.history.map((h) => h.step), [21, 22, 23]);
    assert.equal(resumed.history[2].val, val);
    const again = readCheckpoint(await resumed.save(false));
    assert.equal(again.step, 23);
    assert.equal(again.m, undefined);
    assert.deepEqual(again.history, resumed.history);
    assert.equal(again.dataset?.name, "sonnet");
    assert.equal(again.dataset?.bytes, 320);

    // For tests/test_engine_node.py: the Python reader must get the same loss from this file.
    const out = process.env.TINYGPT_NODE_TRAINED_OUT;
    if (out) {
      writeFileSync(out, file);
      writeFileSync(`${out}.json`, JSON.stringify({ loss: finalLoss }));
    }

    // Losing the device (here: destroying it) fails pending and later work with
    // DeviceLostError, which the worker turns into "resume from the last checkpoint".
    const pendingStep = backend.trainStep(x1, y1, g.train.lr).catch((e) => e);
    (backend as unknown as { gpu: GPUDevice }).gpu.destroy();
    assert.ok((await pendingStep) instanceof DeviceLostError);
    await assert.rejects(backend.loss(x0, y0), DeviceLostError);
    assert.ok((await backend.lost) instanceof DeviceLostError);
  } finally {
    backend.dispose();
  }
});

test("heads wider than the attention kernels hold are refused before any GPU work", async () => {
  const model: ModelConfig = { vocab_size: 256, n_layer: 1, n_embd: 256, n_head: 1, block_size: 8 };
  const g = readJson<Golden>(path!);
  await assert.rejects(createGpuBackend(model, g.train, { gpu }), /heads up to 128 wide; 256 \/ 1 = 256/);
});
