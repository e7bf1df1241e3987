// The WebAssembly CPU backend: the conformance suite (engine/test/conformance.ts)
// for the plain and the relaxed-SIMD build and for two threads sharing memory,
// then what only this backend does: micro-batches, an interrupted step or decode,
// falling back to one thread, refusing bad input. Run by tests/test_cpu_node.py, which compiles cpu.wasm
// and passes its path in TINYGPT_CPU_WASM (the relaxed-SIMD lever's gate has
// its own tests, levers/relaxed-simd/lever.test.ts).

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { Worker } from "node:worker_threads";
import { createCpuBackend, type CpuBackend, type CpuBackendOptions } from "../backend";
import type { WorkerLike } from "../threads";
import { relaxedModule } from "../wasm";
import { Interrupted } from "../../engine/interrupt";
import { conformance, oddRankRuns } from "../../engine/test/conformance";
import { f32, fixture, readJson, rel } from "../../engine/test/fixtures";
import facts from "../../../tinygpt/facts.json";
import { type Checkpoint, readCheckpoint } from "../../engine/checkpoint";
import { adapterLayout, type LoraSettings, type Projection, weightsSha256 } from "../../engine/lora";
import { fineTuneTrainer } from "../../engine/trainer";
import type { Backend, ModelConfig, TrainConfig } from "../../engine/types";

interface Golden {
  config: ModelConfig;
  train: TrainConfig;
  param_count: number;
  init_params: string;
  steps: { lr: number; x: number[]; y: number[] }[];
}

const golden = readJson<Golden>(fixture("golden_tiny.json")!);
const wasmPath = process.env.TINYGPT_CPU_WASM;
if (!wasmPath) throw new Error("TINYGPT_CPU_WASM must name the compiled cpu.wasm (tests/test_cpu_node.py sets it)");
const wasm = readFileSync(wasmPath);
const engineRelaxed = WebAssembly.validate(relaxedModule(wasm)!);
// The SIMD kernels need multiples of 4: the backend says so at creation.
const refuses = /must be multiples of 4 for SIMD/;
const cpu = (extra: Partial<CpuBackendOptions>) => (model: ModelConfig, train: TrainConfig, lora?: LoraSettings) =>
  createCpuBackend(model, { wasm, threads: 1, optimizer: train, lora, ...extra });

conformance({ name: "wasm, plain SIMD", make: cpu({ relaxed: false }), refuses });
conformance({ name: "wasm, relaxed SIMD", make: cpu({ relaxed: true }), refuses, skip: engineRelaxed ? false : "this Node has no relaxed SIMD" });
conformance({
  name: "wasm, 2 threads",
  make: cpu({ threads: 2, spawn: () => new Worker(new URL("./thread_worker.mjs", import.meta.url)) as unknown as WorkerLike }),
  refuses,
});

async function backend(extra: Partial<CpuBackendOptions> = {}): Promise<CpuBackend> {
  const b = await createCpuBackend(golden.config, { wasm, threads: 1, optimizer: golden.train, ...extra });
  await b.setState({ params: f32(golden.init_params), step: 0 });
  return b;
}

async function train(b: CpuBackend): Promise<number[]> {
  const losses = [];
  for (const s of golden.steps) losses.push(await b.trainStep(Int32Array.from(s.x), Int32Array.from(s.y), s.lr));
  b.dispose();
  return losses;
}

test("two threads run where asked, with the build the gate chose", async () => {
  const b = await backend({ threads: 2, spawn: () => new Worker(new URL("./thread_worker.mjs", import.meta.url)) as unknown as WorkerLike });
  assert.equal(b.device, `2 threads, ${engineRelaxed ? "relaxed SIMD" : "SIMD"}`);
  b.dispose();
});

test("micro-batches (one sequence at a time) give the same step as the whole batch", async () => {
  const whole = await train(await backend());
  const split = await train(await backend({ activationBudget: 1 }));
  split.forEach((loss, i) => assert.ok(rel(loss, whole[i]) < 1e-5, `step ${i}: ${loss} vs ${whole[i]}`));
});

test("with the interrupt flag set, a step, a loss and a next-token pass are abandoned and change nothing; cleared, the run goes on as if never interrupted", async () => {
  const flag = new Int32Array(new SharedArrayBuffer(4));
  const spawn = () => new Worker(new URL("./thread_worker.mjs", import.meta.url)) as unknown as WorkerLike;
  const step = (b: Backend, s: Golden["steps"][number]) => b.trainStep(Int32Array.from(s.x), Int32Array.from(s.y), s.lr);
  for (const threads of [1, 2]) {
    const [b, plain] = [await backend({ interrupt: flag, threads, spawn }), await backend({ threads, spawn })];
    const [first, ...rest] = golden.steps;
    assert.equal(await step(b, first), await step(plain, first));
    const before = await b.getState();
    Atomics.store(flag, 0, 1);
    const x = Int32Array.from(first.x);
    await assert.rejects(step(b, rest[0]), Interrupted);
    await assert.rejects(b.loss(x, x), Interrupted);
    await assert.rejects(b.prefill(x.subarray(0, 5)), Interrupted);
    const after = await b.getState();
    assert.deepEqual([after.params, after.m, after.v, after.step], [before.params, before.m, before.v, before.step]);
    Atomics.store(flag, 0, 0);
    for (const [i, s] of rest.entries()) assert.equal(await step(b, s), await step(plain, s), `${threads} threads, step ${i + 1}`);
    b.dispose();
    plain.dispose();
  }
});

test("with the interrupt flag set, a decode is abandoned and the cache keeps what it held; a loss, which reuses the cache's memory, forgets it", async () => {
  const flag = new Int32Array(new SharedArrayBuffer(4));
  const spawn = () => new Worker(new URL("./thread_worker.mjs", import.meta.url)) as unknown as WorkerLike;
  const x = Int32Array.from(golden.steps[0].x);
  for (const threads of [1, 2]) {
    const [b, plain] = [await backend({ interrupt: flag, threads, spawn }), await backend({ threads, spawn })];
    await b.prefill(x.subarray(0, 5));
    await plain.prefill(x.subarray(0, 5));
    Atomics.store(flag, 0, 1);
    await assert.rejects(b.decode(x[5]), Interrupted);
    Atomics.store(flag, 0, 0);
    for (const token of x.subarray(5, 8)) assert.deepEqual(await b.decode(token), await plain.decode(token), `${threads} threads, decode of ${token}`);
    await b.loss(x, x);
    await assert.rejects(b.decode(x[8]), /prefill first/);
    b.dispose();
    plain.dispose();
  }
});

test("an adapter whose rank is no multiple of 4 trains exactly as the same adapter zero-padded to the next (the backend pads it so)", async () => {
  const { odd, even } = await oddRankRuns(cpu({}));
  assert.deepEqual(odd.losses, even.losses);
  assert.deepEqual(odd.params, even.params, "the padding stays zero and the rest trains the same");
});

test("fine-tuning saves an adapter file naming its base; loaded onto that base it goes on exactly; onto another it is refused, naming both", async () => {
  const L = readJson<{ base_params: string }>(fixture("golden_lora_tiny.json")!);
  const base: Checkpoint = { model: golden.config, params: f32(L.base_params), step: 20, train: golden.train, history: [], dataset: null, provenance: {} };
  const settings = { rank: facts.lora.rank, alpha: facts.lora.alpha, targets: facts.lora.targets as Projection[] };
  const tuner = async (adapter: Checkpoint | null, on = base) =>
    fineTuneTrainer(await createCpuBackend(golden.config, { wasm, threads: 1, optimizer: golden.train, lora: settings }), on, golden.train, adapter,
      { base: "the sonnet model", adapter: "sonnet.tinygpt" });
  const corpus = new TextEncoder().encode("Shall I compare thee to a summer's day? Thou art more lovely and more temperate. ".repeat(8));
  const a = await tuner(null);
  await a.setCorpus("sonnet", corpus);
  for (let i = 0; i < 10; i++) await a.trainStep();
  const file = await a.save(true);
  const onward = [];
  for (let i = 0; i < 5; i++) onward.push(await a.trainStep());
  a.dispose();
  const read = readCheckpoint(file);
  assert.deepEqual(read.adapter, { ...settings, base_sha256: await weightsSha256(base.params) });
  assert.equal(read.step, 10);
  assert.equal(read.params.length, adapterLayout(golden.config, settings).reduce((n, t) => n + t.size, 0));
  const b = await tuner(read);
  await b.setCorpus("sonnet", corpus);
  const again = [];
  for (let i = 0; i < 5; i++) again.push(await b.trainStep());
  assert.deepEqual(again, onward);
  b.dispose();
  const other = { ...base, params: base.params.map((x, i) => (i === 0 ? x + 1e-3 : x)) };
  await assert.rejects(tuner(read, other), /sonnet\.tinygpt was trained on another base \(its weights' sha256 [0-9a-f]{12}…\), not on the sonnet model \([0-9a-f]{12}…\)/);
});

test("helpers that fail to start leave a working single-thread backend", async () => {
  const broken = () => new Worker("throw new Error('no helper today')", { eval: true }) as unknown as WorkerLike;
  const b = await backend({ threads: 2, spawn: broken });
  assert.equal(b.device, `1 thread, ${engineRelaxed ? "relaxed SIMD" : "SIMD"}`);
  assert.deepEqual(await train(b), await train(await backend()), "the same run as a one-thread backend's");
  const refused = await backend({ threads: 3, spawn: () => { throw new Error("blocked by policy"); } });
  assert.equal(refused.threads, 1);
  refused.dispose();
});

test("bad input is refused with a message saying what and where", async () => {
  const b = await backend();
  const T = golden.config.block_size;
  const ok = new Int32Array(T);
  const bad = new Int32Array(T);
  bad[3] = 256;
  await assert.rejects(b.trainStep(bad, ok, 1e-3), /x\[3\] = 256 is outside \[0, 256\)/);
  await assert.rejects(b.loss(new Int32Array(T + 1), new Int32Array(T + 1)), /not a whole number of block_size/);
  await assert.rejects(b.prefill(new Int32Array(0)), new RegExp(`prefill: takes 1 to ${T} tokens, got 0`));
  await assert.rejects(b.prefill(new Int32Array(T + 1)), new RegExp(`prefill: takes 1 to ${T} tokens, got ${T + 1}`));
  await assert.rejects(b.prefill(bad), /prefill: token 256 is outside \[0, 256\)/);
  await b.prefill(ok.subarray(0, 1));
  for (const token of [256, -1, 0.5]) await assert.rejects(b.decode(token), new RegExp(`decode: token ${token} is not an integer in \\[0, 256\\)`));
  await assert.rejects(b.setState({ params: new Float32Array(3), step: 0 }), new RegExp(`params has 3 floats, the model has ${golden.param_count}`));
  await assert.rejects(createCpuBackend({ ...golden.config, n_embd: 30, n_head: 3 }, { wasm, threads: 1 }), refuses);
  b.dispose();
});
