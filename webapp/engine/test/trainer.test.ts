// The Trainer's host-side parts: the split, the batches, the schedule (against
// the reference's recorded learning rates) and token picking.
import { test } from "node:test";
import assert from "node:assert/strict";
import { splitCorpus, trainBatch, valBatch, valStarts, validationStarts } from "../data";
import { learningRate, paramCount } from "../model";
import { pickToken } from "../sample";
import { sampleUniform } from "../rng";
import { join } from "node:path";
import { fixture, readJson } from "./fixtures";
import type { Backend, ParamState, TrainConfig } from "../types";
import { resumeTrainer } from "../trainer";
import { Interrupted } from "../interrupt";

const text = new TextEncoder().encode("It was the best of times, it was the worst of times. ".repeat(20));

test("the last tenth of the corpus is validation; batches are next-byte pairs, fixed by (seed, step)", () => {
  const split = splitCorpus(text, 8);
  assert.equal(split.val.length, Math.floor(text.length * 0.1));
  assert.equal(split.train.length + split.val.length, text.length);
  assert.deepEqual(split.val, text.subarray(text.length - split.val.length));
  const a = trainBatch(split, 4, 8, 1, 5);
  assert.deepEqual(a, trainBatch(split, 4, 8, 1, 5));
  assert.notDeepEqual(a.x, trainBatch(split, 4, 8, 1, 6).x);
  for (let b = 0; b < 4; b++) for (let t = 0; t < 7; t++) assert.equal(a.y[b * 8 + t], a.x[b * 8 + t + 1]);
});

test("validation windows are evenly spaced over the validation bytes, whatever the seed", () => {
  const split = splitCorpus(text, 8);
  const n = split.val.length;
  assert.deepEqual(valStarts(n, 8, 4), [0, 1, 2, 3].map((j) => Math.floor((j * (n - 8)) / 4)));
  const starts = valStarts(n, 8, 6);
  assert.ok(starts.every((s, j) => s >= 0 && s + 8 < n && (j === 0 || s > starts[j - 1])));
  const second = valBatch(split, 2, 8, 1, 3); // windows 2 and 3 of 6
  for (const [b, s] of [starts[2], starts[3]].entries()) {
    assert.deepEqual([...second.x.subarray(b * 8, b * 8 + 8)], [...split.val.subarray(s, s + 8)]);
    assert.deepEqual([...second.y.subarray(b * 8, b * 8 + 8)], [...split.val.subarray(s + 1, s + 9)]);
  }
});

test("the validation metric's windows do not overlap, spread over the whole split, and are capped", () => {
  assert.deepEqual(validationStarts(100, 8, 4), [0, 25, 50, 75]);
  assert.deepEqual(validationStarts(100, 8), [0, 9, 18, 27, 36, 45, 54, 63, 72, 81, 90]); // all 11 whole windows
  for (const [n, T, cap] of [[5053, 64, 1024], [50531, 64, 700], [9, 8, 5]]) {
    const starts = validationStarts(n, T, cap);
    assert.equal(starts.length, Math.min(Math.floor(n / (T + 1)), cap));
    assert.ok(starts.every((s, j) => (j === 0 ? s === 0 : s - starts[j - 1] >= T + 1)));
    assert.ok(starts[starts.length - 1] + T + 1 > n - n / starts.length, "the last window ends within one spacing of the end");
  }
  assert.throws(() => validationStarts(8, 8), /cannot hold one window of 8\+1/);
});

test("the validation metric weighs every window once, though the backend takes whole batches only", async () => {
  const model = { vocab_size: 256, n_layer: 1, n_embd: 8, n_head: 2, block_size: 4 };
  const train: TrainConfig = { batch_size: 4, lr: 1e-3, beta1: 0.9, beta2: 0.95, eps: 1e-8, weight_decay: 0.1, grad_clip: 1, warmup_steps: 10, seed: 7 };
  // A window's "loss" is its first byte; a batch's, the mean over its windows, as a backend's.
  const backend = {
    kind: "wasm",
    device: "stub",
    setState: async () => {},
    loss: async (x: Int32Array) => {
      assert.equal(x.length, train.batch_size * model.block_size);
      let sum = 0;
      for (let b = 0; b < train.batch_size; b++) sum += x[b * model.block_size];
      return sum / train.batch_size;
    },
    dispose() {},
  } as unknown as Backend;
  const t = await resumeTrainer(backend, { model, params: new Float32Array(paramCount(model)), step: 0, train, history: [], dataset: null, provenance: {} }, train);
  const corpus = Uint8Array.from({ length: 700 }, (_, i) => (i * 37) % 251);
  await t.setCorpus("bytes", corpus);
  const val = splitCorpus(corpus, model.block_size).val;
  const starts = validationStarts(val.length, model.block_size);
  assert.equal(starts.length % train.batch_size, 2, "a short last batch");
  const want = starts.reduce((a, s) => a + val[s], 0) / starts.length;
  assert.ok(Math.abs((await t.validationLoss()) - want) < 1e-9 * want);
});

test("corpora that are empty, too small or too large are refused with a reason", () => {
  assert.throws(() => splitCorpus(new Uint8Array(0), 8), /the corpus is empty/);
  assert.throws(() => splitCorpus(text.subarray(0, 50), 64), /needs at least \d+ bytes/);
  assert.throws(() => splitCorpus(new Uint8Array(64 * 2 ** 20 + 1), 8), /over the \d+-byte limit/);
});

const golden = fixture("golden_tiny.json");
test("the learning-rate schedule matches the reference's recorded rates", { skip: golden ? false : "no golden fixture" }, () => {
  const g = readJson<{ train: TrainConfig; steps: { lr: number }[] }>(golden!);
  g.steps.forEach((s, i) => assert.ok(Math.abs(learningRate(g.train, i) - s.lr) <= 1e-12 * s.lr, `step ${i}: ${learningRate(g.train, i)} vs ${s.lr}`));
});

test("greedy picks the argmax; top-k keeps sampling inside the k best", () => {
  const logits = Float32Array.from([0.1, 2.5, -1, 2.4, 0]);
  const u = (i: number) => sampleUniform(3, i);
  assert.equal(pickToken(logits, { temperature: 0, topK: 0 }, u(0)), 1);
  assert.equal(pickToken(logits, { temperature: 1, topK: 1 }, u(1)), 1);
  const seen = new Set<number>();
  for (let i = 0; i < 200; i++) seen.add(pickToken(logits, { temperature: 5, topK: 2 }, u(i)));
  assert.deepEqual([...seen].sort(), [1, 3]);
  const wide = new Set<number>();
  for (let i = 0; i < 500; i++) wide.add(pickToken(logits, { temperature: 5, topK: 0 }, u(i)));
  assert.equal(wide.size, 5);
});

test("top-p keeps the fewest most likely tokens whose probabilities reach p, at least one, as the reference does", () => {
  // Probabilities 0.5, 0.25, 0.125, 0.125 (ids 0..3): p = 0.5 keeps id 0 alone, 0.6 adds id 1,
  // 0.8 adds one of the tied 2 and 3 (the lower id), 1 keeps all; a tiny p still keeps the argmax.
  const logits = Float32Array.from([Math.log(4), Math.log(2), 0, 0]);
  const kept = (topP: number) => {
    const seen = new Set<number>();
    for (let i = 0; i < 400; i++) seen.add(pickToken(logits, { temperature: 1, topK: 0, topP }, sampleUniform(11, i)));
    return [...seen].sort();
  };
  assert.deepEqual(kept(1e-6), [0]);
  assert.deepEqual(kept(0.5), [0]);
  assert.deepEqual(kept(0.6), [0, 1]);
  assert.deepEqual(kept(0.8), [0, 1, 2]);
  assert.deepEqual(kept(1), [0, 1, 2, 3]);
  // After top-k: of the top 2 (0.67, 0.33), p = 0.6 keeps id 0 alone.
  for (let i = 0; i < 100; i++) assert.equal(pickToken(logits, { temperature: 1, topK: 2, topP: 0.6 }, sampleUniform(5, i)), 0);
  // The reference's own nucleus on 256 seeded logits (tests/oracles/conformance.py TOP_P).
  const dir = process.env.TINYGPT_CONFORMANCE ?? assert.fail("TINYGPT_CONFORMANCE must name the folder tests/oracles/conformance.py wrote");
  const fixture = readJson<{ logits: number[]; temperature: number; top_k: number; top_p: number; kept: number[] }>(join(dir, "top_p.json"));
  const draws = new Set<number>();
  for (let i = 0; i < 2000; i++) draws.add(pickToken(Float32Array.from(fixture.logits), { temperature: fixture.temperature, topK: fixture.top_k, topP: fixture.top_p }, sampleUniform(1, i)));
  assert.deepEqual([...draws].sort((a, b) => a - b), fixture.kept);
});

test("resuming gives the backend Adam's own step count, which trails the model's after training continued from a file without moments", async () => {
  const model = { vocab_size: 256, n_layer: 1, n_embd: 8, n_head: 2, block_size: 4 };
  const train: TrainConfig = { batch_size: 2, lr: 1e-3, beta1: 0.9, beta2: 0.95, eps: 1e-8, weight_decay: 0.1, grad_clip: 1, warmup_steps: 10, seed: 7 };
  const n = paramCount(model);
  const seen: number[] = [];
  const backend = { kind: "wasm", device: "recording stub", setState: async (s: ParamState) => { seen.push(s.step); }, dispose() {} } as unknown as Backend;
  const base = { model, params: new Float32Array(n), m: new Float32Array(n), v: new Float32Array(n), step: 3004, train, history: [], dataset: null, provenance: {} };
  await resumeTrainer(backend, { ...base, adamStep: 4 }, train);
  await resumeTrainer(backend, base, train);
  await resumeTrainer(backend, { ...base, m: undefined, v: undefined }, train);
  assert.deepEqual(seen, [4, 3004, 0]);
});

test("a step the backend abandons (Interrupted) is not counted: the next one is the same step, on the same batch and learning rate", async () => {
  const model = { vocab_size: 256, n_layer: 1, n_embd: 8, n_head: 2, block_size: 4 };
  const train: TrainConfig = { batch_size: 2, lr: 1e-3, beta1: 0.9, beta2: 0.95, eps: 1e-8, weight_decay: 0.1, grad_clip: 1, warmup_steps: 10, seed: 7 };
  const calls: { x: number[]; lr: number }[] = [];
  let refuse = true;
  const backend = {
    kind: "wasm",
    device: "recording stub",
    setState: async () => {},
    trainStep: async (x: Int32Array, _y: Int32Array, lr: number) => {
      calls.push({ x: [...x], lr });
      if (refuse) throw new Interrupted();
      return 5;
    },
    dispose() {},
  } as unknown as Backend;
  const n = paramCount(model);
  const t = await resumeTrainer(backend, { model, params: new Float32Array(n), step: 3, train, history: [], dataset: null, provenance: {} }, train);
  await t.setCorpus("text", text);
  await assert.rejects(t.trainStep(), Interrupted);
  assert.equal(t.step, 3);
  assert.deepEqual(t.history, []);
  refuse = false;
  assert.equal(await t.trainStep(), 5);
  assert.equal(t.step, 4);
  assert.deepEqual(calls[1], calls[0]);
  assert.deepEqual(t.history, [{ step: 4, train: 5 }]);
});
