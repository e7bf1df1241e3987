// The backend conformance suite: what every Backend, and every lever's kernel
// table, must reproduce of the numpy reference, with one tolerance policy
// (facts.conformance). A test file calls conformance() once per subject:
// webapp/engine/test/gpu.test.ts for WebGPU and each GPU lever's table,
// webapp/cpu/test/backend.test.ts for WebAssembly in both SIMD builds and on
// two threads. The cases:
// - golden replay (tests/fixtures/golden_tiny.json, `python -m tests.oracles.golden`):
//   the initial logits, 20 pipelined steps, the final weights, Adam moments and
//   loss, and a greedy sample;
// - resume: ten steps, a .tinygpt file, a fresh backend from it through the
//   Trainer; the next ten steps and the validation loss repeat exactly;
// - other shapes (tests/oracles/conformance.py, written by the Python harness into
//   TINYGPT_CONFORMANCE): odd sizes, sizes no multiple of 4 and a batch long
//   enough to split reductions; a backend may refuse a shape at creation, with
//   the message it declares (Subject.refuses), and otherwise must match;
// - a gallery model's greedy sample and its validation metric (Trainer.validationLoss)
//   on a corpus whose last batch is short, against the reference's (the same folder);
// - LoRA fine-tuning (tests/fixtures/golden_lora_tiny.json, `python -m tests.oracles.golden_lora`):
//   a frozen base and an adapter on every projection through the reference's 20 steps, the base
//   alone with the adapter off, the merged model's logits, and a greedy sample of base + adapter.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import facts from "../../../tinygpt/facts.json";
import { readCheckpoint, writeCheckpoint } from "../checkpoint";
import { tensorLayout } from "../model";
import { adapterLayout, initAdapter, mergeAdapter, type LoraSettings, weightsSha256 } from "../lora";
import { loadTrainer } from "../index";
import { GPTTrainer, resumeTrainer, startTrainer } from "../trainer";
import type { Backend, ModelConfig, TrainConfig } from "../types";
import { ROOT, f32, fixture, l2, readJson, rel } from "./fixtures";

/** The tolerances a subject is held to (facts.conformance). */
export interface Policy { first_loss_rel: number; loss_rel: number; logits_of_max: number; l2_rel: number; lora_l2_rel: number; noise_steps_of_lr: number }
export const F32_POLICY: Policy = facts.conformance;
/** For kernel tables that round operands to f16 (facts.conformance.f16 says why and by how much). */
export const F16_POLICY: Policy = { ...facts.conformance, ...facts.conformance.f16 };

export interface Subject {
  /** Names the subject in every test title. */
  name: string;
  /** A fresh backend for the model (subjects may share one device underneath); one that fine-tunes with `lora`. */
  make(model: ModelConfig, train: TrainConfig, lora?: LoraSettings): Promise<Backend>;
  /** Skip the LoRA case, saying why (a backend without adapters yet). */
  loraSkip?: string;
  /** The message with which this backend refuses the shapes it does not support, if any. */
  refuses?: RegExp;
  /** Skip the whole subject, saying why (no adapter here, no relaxed SIMD in this engine). */
  skip?: string | false;
  /** Its tolerances: F32_POLICY unless given. */
  policy?: Policy;
  /** Gets the golden run's trained file and its final loss (tests/test_engine_node.py reads them back in Python). */
  trained?(file: Uint8Array, finalLoss: number): void;
}

interface Golden {
  config: ModelConfig;
  train: TrainConfig;
  init_params: string;
  steps: { lr: number; x: number[]; y: number[]; loss_f32: number }[];
  logits_step0: string;
  final: { params: Record<string, { l2: number }>; noise_tensors: string[]; m_l2: number; v_l2: number; loss_f32: number };
  sample: { prompt: number[]; max_new_tokens: number; tokens: number[]; min_margin: number };
}

export interface Reference {
  config: ModelConfig;
  train: TrainConfig;
  init_params: number[];
  steps: { x: number[]; y: number[]; lr: number; loss: number }[];
  prompt: number[];
  logits: number[];
  l2: Record<string, number>;
}

export const REFERENCES = ["odd", "unaligned", "split"];

/**
 * An adapter whose rank is no multiple of 4 and the same adapter zero-padded to rank 4, each
 * trained from the golden fixture's start through its first 5 batches on a backend `make` gives:
 * each step's loss and the adapter after, the rank-3 one widened (a backend that pads the rank
 * must give the same; one that does not, the same within tolerances).
 */
export async function oddRankRuns(make: (model: ModelConfig, train: TrainConfig, lora: LoraSettings) => Promise<Backend>) {
  const g = golden();
  const three: LoraSettings = { rank: 3, alpha: 3, targets: ["q", "fc_out"] };
  const start = initAdapter(g.config, three, 7);
  // B nonzero, so the first step already trains A too.
  for (const t of adapterLayout(g.config, three)) if (t.name.endsWith("lora_b")) start.fill(0.01, t.offset, t.offset + t.size);
  const tuned = async (lora: LoraSettings, adapter: Float32Array) => {
    const b = await make(g.config, g.train, lora);
    try {
      await b.setState({ params: f32(g.init_params), step: 0 });
      await b.adapter!.setState({ params: adapter, step: 0 });
      const losses = [];
      for (const st of g.steps.slice(0, 5)) losses.push(await b.trainStep(ids(st.x), ids(st.y), st.lr));
      return { losses, params: (await b.adapter!.getState()).params };
    } finally {
      b.dispose();
    }
  };
  const odd = await tuned(three, start);
  return { odd: { ...odd, params: widenRank(g.config, three, odd.params, 4) }, even: await tuned({ ...three, rank: 4, alpha: 4 }, widenRank(g.config, three, start, 4)) };
}

/** An adapter flat in adapterLayout order with its rank widened to `rank` by zero columns of A and rows of B: the same adapter. */
function widenRank(m: ModelConfig, s: LoraSettings, flat: Float32Array, rank: number): Float32Array {
  const out = new Float32Array(adapterLayout(m, { ...s, rank }).reduce((n, t) => n + t.size, 0));
  let o = 0;
  for (const t of adapterLayout(m, s)) {
    const [rows, cols] = t.shape;
    const wide = t.name.endsWith("lora_a") ? [rows, rank] : [rank, cols];
    for (let r = 0; r < rows; r++) out.set(flat.subarray(t.offset + r * cols, t.offset + (r + 1) * cols), o + r * wide[1]);
    o += wide[0] * wide[1];
  }
  return out;
}

interface GoldenLora {
  lora: LoraSettings;
  base_params: string;
  init_adapter: string;
  steps: { lr: number; loss_f32: number }[];
  logits_step0: string;
  final: { tensors: Record<string, number>; m_l2: number; v_l2: number; loss_f32: number };
  sample: Golden["sample"];
}

const goldenPath = fixture("golden_tiny.json");
const golden = (): Golden => readJson<Golden>(goldenPath ?? assert.fail("tests/fixtures/golden_tiny.json is missing (python -m tests.oracles.golden)"));

function conformanceFile<T>(name: string): T {
  const dir = process.env.TINYGPT_CONFORMANCE ?? assert.fail("TINYGPT_CONFORMANCE must name the folder tests/oracles/conformance.py wrote (the Python harness sets it)");
  return readJson<T>(join(dir, `${name}.json`));
}

export const reference = (name: string) => conformanceFile<Reference>(name);
const sampleReference = () => conformanceFile<{ model: string; prompt: number[]; max_new_tokens: number; tokens: number[]; min_margin: number }>("sample");
const validationReference = () => conformanceFile<{ model: string; corpus: string; windows: number; loss: number }>("validation");

/** Step i's loss against the reference: the first step is held closer (no update has compounded yet). */
function checkLosses(got: number[], want: number[], what: string, p: Policy): void {
  got.forEach((loss, i) => {
    const tol = i === 0 ? p.first_loss_rel : p.loss_rel;
    assert.ok(rel(loss, want[i]) < tol, `${what} step ${i}: loss ${loss} vs reference ${want[i]} (tolerance ${tol})`);
  });
}

function checkLogits(got: Float32Array, want: ArrayLike<number>, what: string, p: Policy): void {
  assert.equal(got.length, want.length, `${what}: logits length`);
  let scale = 0;
  for (let i = 0; i < want.length; i++) scale = Math.max(scale, Math.abs(want[i]));
  let worst = 0;
  for (let i = 0; i < got.length; i++) worst = Math.max(worst, Math.abs(got[i] - want[i]));
  assert.ok(worst < p.logits_of_max * scale, `${what}: logits differ by up to ${worst} (largest |logit| ${scale})`);
}


/** Each tensor's L2 norm; noise tensors element by element, near their start (facts.conformance says why). */
function checkWeights(model: ModelConfig, params: Float32Array, init: Float32Array, l2s: Record<string, number>, lrs: number[], what: string, p: Policy): void {
  const drift = p.noise_steps_of_lr * lrs.reduce((a, b) => a + b, 0);
  for (const t of tensorLayout(model)) {
    const got = params.subarray(t.offset, t.offset + t.size);
    if (t.noiseGradient) {
      got.forEach((v, i) => assert.ok(Math.abs(v - init[t.offset + i]) <= drift, `${what} ${t.name}[${i}] moved ${v - init[t.offset + i]}, more than ${drift}`));
    } else {
      assert.ok(rel(l2(got), l2s[t.name]) < p.l2_rel, `${what} ${t.name}: L2 ${l2(got)} vs reference ${l2s[t.name]}`);
    }
  }
}

const ids = (a: number[]) => Int32Array.from(a);

/** Trains `b` through a reference's steps and checks each loss, the trained weights and the next logits. */
export async function replayReference(b: Backend, r: Reference, what: string, p: Policy = F32_POLICY): Promise<void> {
  const init = Float32Array.from(r.init_params);
  await b.setState({ params: init, step: 0 });
  const losses = [];
  for (const st of r.steps) losses.push(await b.trainStep(ids(st.x), ids(st.y), st.lr));
  checkLosses(losses, r.steps.map((st) => st.loss), what, p);
  checkWeights(r.config, (await b.getState()).params, init, r.l2, r.steps.map((st) => st.lr), what, p);
  checkLogits(await b.prefill(ids(r.prompt)), r.logits, `${what} next`, p);
  await checkCache(b, r.config, ids(r.steps[0].x.slice(0, r.config.block_size)), what, p);
}

/**
 * The KV cache: a window filled a token at a time by decode ends with the logits one prefill of
 * it gives, at every length checked; a full cache, and one the parameters changed under, refuse.
 */
async function checkCache(b: Backend, model: ModelConfig, x: Int32Array, what: string, p: Policy): Promise<void> {
  const T = model.block_size;
  const checks = new Map<number, Float32Array>();
  for (const n of new Set([2, Math.ceil(T / 2), T])) if (n <= T) checks.set(n, await b.prefill(x.subarray(0, n)));
  await b.prefill(x.subarray(0, 1));
  for (let n = 2; n <= T; n++) {
    const logits = await b.decode(x[n - 1]);
    const want = checks.get(n);
    if (want) checkLogits(logits, want, `${what} decode of ${n} tokens`, p);
  }
  await assert.rejects(b.decode(x[0]), /full/, `${what}: decode past block_size`);
  await b.prefill(x.subarray(0, 1));
  await b.setState(await b.getState());
  await assert.rejects(b.decode(x[1]), /prefill first/, `${what}: decode after setState`);
}

export function conformance(s: Subject): void {
  const skip = s.skip ?? false;
  const p = s.policy ?? F32_POLICY;

  test(`${s.name}: LoRA golden replay: a frozen base, an adapter on every projection, the reference's 20 steps`, { skip: skip || s.loraSkip || false }, async () => {
    const g = golden();
    const L = readJson<GoldenLora>(fixture("golden_lora_tiny.json") ?? assert.fail("tests/fixtures/golden_lora_tiny.json is missing (python -m tests.oracles.golden_lora)"));
    const [b, plain] = [await s.make(g.config, g.train, L.lora), await s.make(g.config, g.train)];
    try {
      const slot = b.adapter ?? assert.fail("made with lora, the backend has no adapter");
      const base = f32(L.base_params), start = f32(L.init_adapter);
      await b.setState({ params: base, step: 0 });
      await slot.setState({ params: start, step: 0 });
      const window = ids(g.steps[0].x.slice(0, g.config.block_size));
      checkLogits(await b.prefill(window), f32(L.logits_step0), "LoRA initial", p);
      const losses = await Promise.all(g.steps.map((st, i) => b.trainStep(ids(st.x), ids(st.y), L.steps[i].lr)));
      checkLosses(losses, L.steps.map((st) => st.loss_f32), "LoRA", p);
      const [x0, y0] = [ids(g.steps[0].x), ids(g.steps[0].y)];
      const finalLoss = await b.loss(x0, y0);
      assert.ok(rel(finalLoss, L.final.loss_f32) < p.loss_rel, `LoRA loss after 20 steps ${finalLoss} vs ${L.final.loss_f32}`);
      const a = await slot.getState();
      assert.equal(a.step, g.steps.length);
      for (const t of adapterLayout(g.config, L.lora)) {
        const got = l2(a.params.subarray(t.offset, t.offset + t.size));
        assert.ok(rel(got, L.final.tensors[t.name]) < p.lora_l2_rel, `LoRA ${t.name}: L2 ${got} vs reference ${L.final.tensors[t.name]}`);
      }
      assert.ok(rel(l2(a.m!), L.final.m_l2) < p.lora_l2_rel, `LoRA Adam m L2 ${l2(a.m!)} vs ${L.final.m_l2}`);
      assert.ok(rel(l2(a.v!), L.final.v_l2) < p.lora_l2_rel, `LoRA Adam v L2 ${l2(a.v!)} vs ${L.final.v_l2}`);
      const after = await b.getState();
      assert.deepEqual(after.params, base, "the base is frozen");
      assert.equal(after.m, undefined, "a frozen base has no moments");
      // The adapter's own state round-trips, and a frozen base takes no moments.
      await slot.setState(a);
      assert.deepEqual(await slot.getState(), a);
      await assert.rejects(b.setState({ params: base, m: base, v: base, step: 0 }), /frozen/);
      // Off, the base alone: a plain backend's logits; on, the merged model's.
      await plain.setState({ params: base, step: 0 });
      const baseLogits = await plain.prefill(window);
      slot.enabled = false;
      checkLogits(await b.prefill(window), baseLogits, "LoRA off", p);
      assert.ok(rel(await b.loss(x0, y0), await plain.loss(x0, y0)) < p.first_loss_rel, "LoRA off: the base's loss");
      slot.enabled = true;
      const adapted = await b.prefill(window);
      await plain.setState({ params: mergeAdapter(g.config, base, L.lora, a.params), step: 0 });
      checkLogits(adapted, await plain.prefill(window), "LoRA against the merged model", p);
      // Only the adapter trains: less memory than the plain backend, which has trained a step too.
      await plain.trainStep(x0, y0, g.train.lr);
      assert.ok(b.residentBytes < plain.residentBytes, `fine-tuning holds ${b.residentBytes} bytes, full training ${plain.residentBytes}`);
      const trainer = new GPTTrainer(b, g.config, g.train, { step: 0, baseSha256: await weightsSha256(base) });
      const sample = await trainer.sample(Uint8Array.from(L.sample.prompt), { temperature: 0, topK: 0, maxTokens: L.sample.max_new_tokens }, () => {});
      assert.ok(L.sample.min_margin > 1e-3);
      assert.deepEqual([...sample], L.sample.tokens, "greedy sample of base + adapter");
    } finally {
      b.dispose();
      plain.dispose();
    }
  });

  test(`${s.name}: golden replay of the reference's 20 steps`, { skip }, async () => {
    const g = golden();
    const b = await s.make(g.config, g.train);
    try {
      const init = f32(g.init_params);
      await b.setState({ params: init, step: 0 });
      checkLogits(await b.prefill(ids(g.steps[0].x.slice(0, g.config.block_size))), f32(g.logits_step0), "initial", p);
      // Every step issued before any loss is read: the pipelined path the app runs.
      const losses = await Promise.all(g.steps.map((st) => b.trainStep(ids(st.x), ids(st.y), st.lr)));
      checkLosses(losses, g.steps.map((st) => st.loss_f32), "golden", p);
      const finalLoss = await b.loss(ids(g.steps[0].x), ids(g.steps[0].y));
      assert.ok(rel(finalLoss, g.final.loss_f32) < p.loss_rel, `loss after 20 steps ${finalLoss} vs ${g.final.loss_f32}`);
      const state = await b.getState();
      assert.equal(state.step, g.steps.length);
      // Its own count of what it holds covers at least parameters, gradients and both moments.
      assert.ok(b.residentBytes >= 16 * state.params.length, `residentBytes ${b.residentBytes} for ${state.params.length} parameters`);
      assert.deepEqual(tensorLayout(g.config).filter((t) => t.noiseGradient).map((t) => t.name), g.final.noise_tensors);
      const l2s = Object.fromEntries(Object.entries(g.final.params).map(([k, v]) => [k, v.l2]));
      checkWeights(g.config, state.params, init, l2s, g.steps.map((st) => st.lr), "golden", p);
      assert.ok(rel(l2(state.m!), g.final.m_l2) < p.l2_rel, `Adam m L2 ${l2(state.m!)} vs ${g.final.m_l2}`);
      assert.ok(rel(l2(state.v!), g.final.v_l2) < p.l2_rel, `Adam v L2 ${l2(state.v!)} vs ${g.final.v_l2}`);
      // Greedy decoding is deterministic; the reference's choices are far from ties (min_margin).
      const trainer = new GPTTrainer(b, g.config, g.train, { step: g.steps.length });
      const opts = { temperature: 0, topK: 0, maxTokens: g.sample.max_new_tokens };
      const streamed: number[] = [];
      const sample = await trainer.sample(Uint8Array.from(g.sample.prompt), opts, (t) => streamed.push(t));
      assert.deepEqual([...sample], streamed);
      if (g.sample.min_margin > 1e-3) assert.deepEqual([...sample], g.sample.tokens);
      s.trained?.(await trainer.save(true), finalLoss);
    } finally {
      b.dispose();
    }
  });

  test(`${s.name}: a run resumed from its file repeats the uninterrupted run exactly`, { skip }, async () => {
    const g = golden();
    const corpus = new TextEncoder().encode("Shall I compare thee to a summer's day? Thou art more lovely and more temperate. ".repeat(8));
    const a = await startTrainer(await s.make(g.config, g.train), g.config, g.train);
    let b: GPTTrainer | null = null;
    try {
      await a.setCorpus("sonnet", corpus);
      for (let i = 0; i < 10; i++) await a.trainStep();
      await a.evaluate(2);
      const file = await a.save(true);
      const onward = await Promise.all(Array.from({ length: 10 }, () => a.trainStep()));
      const val = await a.evaluate(2);

      const resumed = (b = await loadTrainer(file, (m, t) => s.make(m, t)));
      assert.equal(resumed.step, 10);
      await resumed.setCorpus("sonnet", corpus);
      assert.deepEqual(await Promise.all(Array.from({ length: 10 }, () => resumed.trainStep())), onward);
      assert.equal(await resumed.evaluate(2), val, "validation of the same weights on the same windows");
      assert.deepEqual(resumed.history, a.history);
      const again = readCheckpoint(await resumed.save(false));
      assert.equal(again.step, 20);
      assert.equal(again.m, undefined);
      assert.deepEqual(again.history, a.history);
      assert.deepEqual(again.dataset, a.dataset);
      // And through getState/setState alone (a checkpoint's tensors are exactly these).
      const state = await resumed.backend.getState();
      const ck = readCheckpoint(writeCheckpoint({ ...(await a.checkpoint(true)) }, { producer: "test" }));
      assert.deepEqual(ck.params, state.params);
      await resumeTrainer(resumed.backend, ck, g.train);
      const [x, y] = [ids(g.steps[0].x), ids(g.steps[0].y)];
      assert.equal(await resumed.backend.trainStep(x, y, g.train.lr), await a.backend.trainStep(x, y, g.train.lr));
    } finally {
      a.dispose();
      b?.dispose();
    }
  });

  test(`${s.name}: greedy sampling of a gallery model repeats the reference's bytes while its window slides`, { skip }, async () => {
    const r = sampleReference();
    const trainer = await loadTrainer(readFileSync(join(ROOT, r.model)), (m, t) => s.make(m, t));
    try {
      assert.ok(r.min_margin > 1e-3, `the reference's choices come within ${r.min_margin} of a tie: choose another prompt`);
      const got = await trainer.sample(Uint8Array.from(r.prompt), { temperature: 0, topK: 0, maxTokens: r.max_new_tokens }, () => {});
      assert.equal(new TextDecoder().decode(got), new TextDecoder().decode(Uint8Array.from(r.tokens)));
    } finally {
      trainer.dispose();
    }
  });

  test(`${s.name}: the validation metric of a gallery model is the reference's`, { skip }, async () => {
    const r = validationReference();
    const trainer = await loadTrainer(readFileSync(join(ROOT, r.model)), (m, t) => s.make(m, t));
    try {
      await trainer.setCorpus("docs", Buffer.from(r.corpus, "base64"));
      const got = await trainer.validationLoss();
      assert.ok(rel(got, r.loss) < p.loss_rel, `validation metric ${got} vs reference ${r.loss} over ${r.windows} windows (tolerance ${p.loss_rel})`);
    } finally {
      trainer.dispose();
    }
  });

  for (const name of REFERENCES) {
    test(`${s.name}: the reference's steps on the ${name} shape`, { skip }, async () => {
      const r = reference(name);
      let b: Backend;
      try {
        b = await s.make(r.config, r.train);
      } catch (e) {
        // Refusing a shape is allowed, at creation and with the message the subject declares.
        if (s.refuses && s.refuses.test((e as Error).message)) return;
        throw e;
      }
      try {
        await replayReference(b, r, name, p);
      } finally {
        b.dispose();
      }
    });
  }
}
