// The WebNN lever, on fake-ml.ts (no browser here runs WebNN: content/docs/browser-notes.md),
// against the numpy reference's logits and the CPU backend's (tests/test_cpu_node.py compiles
// cpu.wasm and names it in TINYGPT_CPU_WASM): the prefill graph computes the model at every window
// length and the decode graph, on its caches, at every position after a prefill of any length;
// opSupportLimits() is held to what the two graphs use; detection turns the lever off without
// navigator.ml, when createContext throws and when the limits lack an op; the gate refuses a
// context with one op wrong; and a dispatch that fails mid-sample hands the rest to the backend.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { createCpuBackend } from "../../cpu/backend";
import { f32, fixture, readJson } from "../../engine/test/fixtures";
import { GPTTrainer } from "../../engine/trainer";
import { initParams } from "../../engine/model";
import type { Backend, ModelConfig, TrainConfig } from "../../engine/types";
import { configureGates } from "../gate";
import { FakeBuilder, FakeContext, everything, fakeBuilder, fakeMl } from "./fake-ml";
import { NEEDS, decodeGraph, prefillGraph } from "./graph";
import { GATE_MODEL, type Reference, WebnnSampler, gatedWebnn, webnnAgrees, webnnContext } from "./lever";

interface Golden {
  config: ModelConfig;
  train: TrainConfig;
  init_params: string;
  steps: { x: number[] }[];
  logits_step0: string;
}

const golden = readJson<Golden>(fixture("golden_tiny.json")!);
const wasmPath = process.env.TINYGPT_CPU_WASM;
if (!wasmPath) throw new Error("TINYGPT_CPU_WASM must name the compiled cpu.wasm (tests/test_cpu_node.py sets it)");
const wasm = readFileSync(wasmPath);

const cpu = async (model: ModelConfig, params: Float32Array): Promise<Backend> => {
  const b = await createCpuBackend(model, { wasm, threads: 1, optimizer: golden.train });
  await b.setState({ params, step: 0 });
  return b;
};
const cpuReference: Reference = async (model, params, windows) => {
  const b = await cpu(model, params);
  try {
    const out: Float32Array[] = [];
    for (const w of windows) out.push(await b.prefill(w));
    return out;
  } finally {
    b.dispose();
  }
};

/** max|got - want| as a share of max|want|. */
function offBy(got: Float32Array, want: Float32Array): number {
  assert.equal(got.length, want.length);
  let d = 0, scale = 0;
  for (let i = 0; i < want.length; i++) {
    d = Math.max(d, Math.abs(got[i] - want[i]));
    scale = Math.max(scale, Math.abs(want[i]));
  }
  return d / scale;
}

const sampler = (model: ModelConfig, params: Float32Array, context = new FakeContext()) => WebnnSampler.create(context, fakeBuilder, model, params);

test("the prefill graph gives the numpy reference's logits, and the CPU backend's at every window length", async () => {
  const params = f32(golden.init_params);
  const T = golden.config.block_size;
  const s = await sampler(golden.config, params);
  const window = Int32Array.from(golden.steps[0].x.slice(0, T));
  assert.ok(offBy(await s.prefill(window), f32(golden.logits_step0)) < 1e-5, "against the reference");
  const lengths = Array.from({ length: T }, (_, i) => i + 1);
  const want = await cpuReference(golden.config, params, lengths.map((n) => window.subarray(0, n)));
  for (const n of lengths) assert.ok(offBy(await s.prefill(window.subarray(0, n)), want[n - 1]) < 1e-5, `a window of ${n}`);
  await assert.rejects(s.prefill(new Int32Array(T + 1)), /a window of 17 tokens/);
  assert.ok(!s.broken, "a window refused before any dispatch breaks nothing");
});

test("the decode graph gives a full-window prefill's logits at every position, after prefills of several lengths", async () => {
  const params = f32(golden.init_params);
  const T = golden.config.block_size;
  const window = Int32Array.from(golden.steps[0].x.slice(0, T));
  const s = await sampler(golden.config, params);
  const full = await sampler(golden.config, params);
  await assert.rejects(s.decode(window[0]), /a decode at position 0/);
  for (const prefilled of [1, 5, T - 1]) {
    await s.prefill(window.subarray(0, prefilled));
    for (let n = prefilled + 1; n <= T; n++) {
      const want = await full.prefill(window.subarray(0, n));
      const got = await s.decode(window[n - 1]);
      assert.ok(offBy(got, want) < 1e-5, `prefilled ${prefilled}, decoded to ${n}: off by ${offBy(got, want)}`);
    }
    await assert.rejects(s.decode(0), new RegExp(`a decode at position ${T} `), "a full cache takes no more");
  }
});

test("opSupportLimits is asked for exactly the ops, data types and ranks the two graphs use", async () => {
  const builder = new FakeBuilder(new FakeContext());
  await builder.build(prefillGraph(builder, GATE_MODEL, initParams(GATE_MODEL, 1)));
  await builder.build(decodeGraph(builder, GATE_MODEL, initParams(GATE_MODEL, 1)));
  const needed = Object.entries(NEEDS).flatMap(([op, operands]) => Object.keys(operands).map((o) => `${op}.${o}`));
  assert.deepEqual([...builder.usage.keys()].sort(), needed.sort());
  for (const [key, { dataTypes, ranks }] of builder.usage) {
    const [op, operand] = key.split(".");
    const [types, min, max] = NEEDS[op][operand];
    assert.deepEqual([...dataTypes].sort(), [...types].sort(), key);
    assert.deepEqual([Math.min(...ranks), Math.max(...ranks)], [min, max], key);
  }
});

test("detection: off without navigator.ml, when createContext throws, when the limits lack an op, a type or a rank", async () => {
  const offWith = async (ml: Parameters<typeof webnnContext>[0]["ml"]) => (await webnnContext({ ml, newBuilder: fakeBuilder })).reason;
  assert.match((await offWith(undefined)) ?? "on", /no WebNN \(navigator.ml\)/);
  assert.match((await offWith(fakeMl(new DOMException("not supported", "NotSupportedError")))) ?? "on", /WebNN gave no context \(not supported\)/);
  const limited = (edit: (limits: Record<string, Record<string, unknown>>) => void) => {
    const context = new FakeContext();
    const limits = Object.fromEntries(Object.entries(NEEDS).map(([op, operands]) => [op, Object.fromEntries(Object.keys(operands).map((o) => [o, everything().input]))]));
    for (const op of ["input", "constant", "output"]) limits[op] = limits[op][op] as Record<string, unknown>;
    edit(limits);
    context.limits = limits;
    return fakeMl(context);
  };
  assert.equal(await offWith(limited(() => {})), null, "everything the graph needs");
  assert.match((await offWith(limited((l) => delete l.gelu))) ?? "on", /no float32 gelu input/);
  assert.match((await offWith(limited((l) => (l.input = { dataTypes: ["int32"], rankRange: { min: 0, max: 4 } })))) ?? "on", /no float32 input/);
  assert.match((await offWith(limited((l) => (l.gather.indices = { dataTypes: ["int64"], rankRange: { min: 0, max: 4 } })))) ?? "on", /no int32 gather indices/);
  assert.match((await offWith(limited((l) => (l.matmul.a = { dataTypes: ["float32"], rankRange: { min: 2, max: 2 } })))) ?? "on", /no matmul a of rank 2 to 3/);
});

test("the gate passes the graph against the CPU backend, refuses one op 5% off, and turns the lever off when forced", async () => {
  const good = await webnnAgrees(new FakeContext(), fakeBuilder, cpuReference);
  assert.equal(good.failure, null, JSON.stringify(good.errors));
  assert.ok(good.errors["max error"] < 0.1, JSON.stringify(good.errors));
  for (const op of ["gelu", "softmax", "layerNormalization"]) {
    const context = new FakeContext();
    context.perturb = op;
    const bad = await webnnAgrees(context, fakeBuilder, cpuReference);
    assert.match(bad.failure ?? "passed", /logits differ from the f32 path's/, op);
    assert.ok(bad.errors["max error"] > 1, `${op}: ${JSON.stringify(bad.errors)}`);
  }
  configureGates({});
  const on = await gatedWebnn({ ml: fakeMl(new FakeContext()), newBuilder: fakeBuilder }, cpuReference);
  assert.ok(on.verdict.pass && on.context, on.verdict.reason);
  configureGates({ forceFail: ["webnn"] });
  const forced = await gatedWebnn({ ml: fakeMl(new FakeContext()), newBuilder: fakeBuilder }, cpuReference);
  assert.equal(forced.context, null);
  assert.match(forced.verdict.reason, /forced to fail/);
  configureGates({});
});

test("sampling through WebNN's cache writes the CPU backend's text across window slides; a dispatch failing mid-sample hands the rest to the backend", async () => {
  const model = { ...GATE_MODEL, block_size: 8 }; // a short window, so 20 tokens slide it several times
  const params = initParams(model, 7);
  const prompt = new TextEncoder().encode("To be");
  const run = async (context: FakeContext | null, temperature: number) => {
    const via = context ? await sampler(model, params, context) : undefined;
    const trainer = new GPTTrainer(await cpu(model, params), model, golden.train);
    try {
      const text = await trainer.sample(prompt, { temperature, topK: 0, maxTokens: 20, seed: 11 }, () => {}, undefined, via);
      return { text: [...text], via };
    } finally {
      trainer.dispose();
    }
  };
  for (const temperature of [0, 0.8]) {
    const plain = (await run(null, temperature)).text;
    const counted = new FakeContext();
    const cached = await run(counted, temperature);
    assert.deepEqual(cached.text, plain, `temperature ${temperature}`);
    assert.equal(cached.via!.produced, 20);
    // 5 prompt tokens and 20 drawn in a window of 8 that keeps 4 when it slides: a prefill of the
    // prompt, 4 more (one per slide: tokens 5, 10, 15 and 20), and one-token decodes for the rest.
    const decodes = counted.inputs.map((names) => names.includes("position"));
    assert.deepEqual(decodes.flatMap((d, i) => (d ? [] : [i + 1])), [1, 5, 10, 15, 20]);
    for (const failAfter of [2, 4]) { // a decode fails (token 3); the prefill after a slide fails (token 5)
      const failing = new FakeContext();
      failing.failAfter = failAfter;
      const cut = await run(failing, temperature);
      assert.deepEqual(cut.text, plain, `temperature ${temperature}, failing after ${failAfter}`);
      assert.equal(cut.via!.produced, failAfter);
      assert.ok(cut.via!.broken);
    }
  }
});
