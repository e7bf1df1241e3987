// The CPU backend against the numpy reference's golden fixture
// (tests/fixtures/golden_tiny.json, from `python -m tinygpt.golden`), through
// the Backend interface only, in both SIMD builds (the relaxed-SIMD lever's
// gate has its own tests, levers/relaxed-simd/lever.test.ts). Run by
// tests/test_cpu_node.py, which compiles cpu.wasm and passes its path in
// TINYGPT_CPU_WASM.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { Worker } from "node:worker_threads";
import { createCpuBackend, type CpuBackend, type CpuBackendOptions } from "../backend";
import { Interrupted } from "../../engine/interrupt";
import type { WorkerLike } from "../threads";
import { relaxedModule } from "../wasm";
import { f32, l2, rel } from "../../engine/test/fixtures";
import type { Backend, ModelConfig } from "../../engine/types";

interface Step { step: number; lr: number; x: number[]; y: number[]; loss_f32: number; loss_f64: number }
interface Sample { prompt: number[]; tokens: number[]; min_margin: number }
interface Golden {
  config: ModelConfig;
  train: { beta1: number; beta2: number; eps: number; weight_decay: number; grad_clip: number };
  param_count: number;
  tensors: { name: string; offset: number; size: number }[];
  init_params: string;
  steps: Step[];
  logits_step0: string;
  final: { params: Record<string, { sum: number; l2: number }>; m_l2: number; v_l2: number; loss_f32: number };
  sample: Sample;
  sample_init?: Sample;
}

const golden = JSON.parse(readFileSync("tests/fixtures/golden_tiny.json", "utf8")) as Golden;
const wasmPath = process.env.TINYGPT_CPU_WASM;
if (!wasmPath) throw new Error("TINYGPT_CPU_WASM must name the compiled cpu.wasm (tests/test_cpu_node.py sets it)");
const wasm = readFileSync(wasmPath);
const engineRelaxed = WebAssembly.validate(relaxedModule(wasm)!);

async function backend(extra: Partial<CpuBackendOptions> = {}): Promise<CpuBackend> {
  const b = await createCpuBackend(golden.config, { wasm, threads: 1, optimizer: golden.train, ...extra });
  await b.setState({ params: f32(golden.init_params), step: 0 });
  return b;
}

async function train(b: Backend): Promise<number[]> {
  const losses = [];
  for (const s of golden.steps) losses.push(await b.trainStep(Int32Array.from(s.x), Int32Array.from(s.y), s.lr));
  return losses;
}

function checkCurve(losses: number[]) {
  assert.ok(rel(losses[0], golden.steps[0].loss_f32) < 1e-4, `first loss ${losses[0]} vs ${golden.steps[0].loss_f32}`);
  losses.forEach((loss, i) => {
    assert.ok(rel(loss, golden.steps[i].loss_f32) < 1e-3, `step ${i}: loss ${loss} vs reference ${golden.steps[i].loss_f32}`);
  });
}

async function greedy(b: Backend, sample: Sample): Promise<number[]> {
  const tokens = [...sample.prompt];
  for (let i = 0; i < sample.tokens.length; i++) {
    const logits = await b.nextLogits(Int32Array.from(tokens));
    tokens.push(logits.indexOf(Math.max(...logits)));
  }
  return tokens.slice(sample.prompt.length);
}

for (const relaxed of [false, true]) {
  const build = relaxed ? "relaxed SIMD" : "plain SIMD";

  test(`${build}: first-step loss and 20-step curve match the reference; final weights and moments too`, async () => {
    const b = await backend({ relaxed });
    assert.equal(b.relaxed, relaxed && engineRelaxed);
    checkCurve(await train(b));
    const s = await b.getState();
    assert.equal(s.step, golden.steps.length);
    // Absolute floor: k_proj.bias has an exactly zero gradient (softmax ignores a
    // shift shared by a whole row of scores), so its tiny value is rounding noise.
    for (const t of golden.tensors) {
      const want = golden.final.params[t.name].l2;
      const got = l2(s.params.subarray(t.offset, t.offset + t.size));
      assert.ok(Math.abs(got - want) < 1e-3 * Math.max(want, 1), `${t.name}: final L2 ${got} vs reference ${want}`);
    }
    assert.ok(rel(l2(s.m!), golden.final.m_l2) < 1e-3, `Adam m L2 ${l2(s.m!)} vs ${golden.final.m_l2}`);
    assert.ok(rel(l2(s.v!), golden.final.v_l2) < 1e-3, `Adam v L2 ${l2(s.v!)} vs ${golden.final.v_l2}`);
    const first = golden.steps[0];
    const after = await b.loss(Int32Array.from(first.x), Int32Array.from(first.y));
    assert.ok(rel(after, golden.final.loss_f32) < 1e-3, `final loss ${after} vs ${golden.final.loss_f32}`);
    assert.deepEqual(await greedy(b, golden.sample), golden.sample.tokens);
    b.dispose();
  });

  test(`${build}: nextLogits of the initial model match the reference logits`, async () => {
    const b = await backend({ relaxed });
    const want = f32(golden.logits_step0);
    const got = await b.nextLogits(Int32Array.from(golden.steps[0].x.slice(0, golden.config.block_size)));
    assert.equal(got.length, golden.config.vocab_size);
    const scale = want.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
    const worst = want.reduce((m, v, i) => Math.max(m, Math.abs(v - got[i])), 0);
    assert.ok(worst < 1e-4 * scale, `max |logit diff| ${worst} (max |logit| ${scale})`);
    if (golden.sample_init) assert.deepEqual(await greedy(b, golden.sample_init), golden.sample_init.tokens);
    b.dispose();
  });

  test(`${build}: two threads sharing memory reproduce the reference`, async () => {
    const workerUrl = new URL("./thread_worker.mjs", import.meta.url);
    const b = await backend({ relaxed, threads: 2, spawn: () => new Worker(workerUrl) as unknown as WorkerLike });
    assert.equal(b.device, `2 threads, ${relaxed && engineRelaxed ? "relaxed SIMD" : "SIMD"}`);
    checkCurve(await train(b));
    b.dispose();
  });
}

test("getState then setState into a fresh backend continues the same run", async () => {
  const a = await backend();
  const steps = golden.steps;
  for (const s of steps.slice(0, 10)) await a.trainStep(Int32Array.from(s.x), Int32Array.from(s.y), s.lr);
  const saved = await a.getState();
  const b = await createCpuBackend(golden.config, { wasm, threads: 1, optimizer: golden.train });
  await b.setState(saved);
  const again = await b.getState();
  assert.deepEqual([again.params, again.m, again.v, again.step], [saved.params, saved.m, saved.v, saved.step]);
  for (const s of steps.slice(10)) {
    const [x, y] = [Int32Array.from(s.x), Int32Array.from(s.y)];
    assert.equal(await b.trainStep(x, y, s.lr), await a.trainStep(x, y, s.lr), `step ${s.step}`);
  }
  a.dispose();
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
  const step = (b: Backend, s: Step) => b.trainStep(Int32Array.from(s.x), Int32Array.from(s.y), s.lr);
  for (const threads of [1, 2]) {
    const [b, plain] = [await backend({ interrupt: flag, threads, spawn }), await backend({ threads, spawn })];
    const [first, ...rest] = golden.steps;
    assert.equal(await step(b, first), await step(plain, first));
    const before = await b.getState();
    Atomics.store(flag, 0, 1);
    const x = Int32Array.from(first.x);
    await assert.rejects(step(b, rest[0]), Interrupted);
    await assert.rejects(b.loss(x, x), Interrupted);
    await assert.rejects(b.nextLogits(x.subarray(0, 5)), Interrupted);
    const after = await b.getState();
    assert.deepEqual([after.params, after.m, after.v, after.step], [before.params, before.m, before.v, before.step]);
    Atomics.store(flag, 0, 0);
    for (const s of rest) assert.equal(await step(b, s), await step(plain, s), `${threads} threads, step ${s.step}`);
    b.dispose();
    plain.dispose();
  }
});

test("helpers that fail to start leave a working single-thread backend", async () => {
  const broken = () => new Worker("throw new Error('no helper today')", { eval: true }) as unknown as WorkerLike;
  const b = await backend({ threads: 2, spawn: broken });
  assert.equal(b.device, `1 thread, ${engineRelaxed ? "relaxed SIMD" : "SIMD"}`);
  checkCurve(await train(b));
  b.dispose();
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
  await assert.rejects(b.nextLogits(new Int32Array(0)), /at least one token/);
  await assert.rejects(b.setState({ params: new Float32Array(3), step: 0 }), new RegExp(`params has 3 floats, the model has ${golden.param_count}`));
  await assert.rejects(createCpuBackend({ ...golden.config, n_embd: 30, n_head: 3 }, { wasm, threads: 1 }), /multiples of 4/);
  b.dispose();
});
