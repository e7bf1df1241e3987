// The int8 sampling lever on Dawn (SwiftShader here, whose WGSL has dot4I8Packed): its kernels
// against CPU maths on the quantized operands (engine/quantize.ts), awkward sizes and a real
// LayerNorm included; the int8 copy of a seeded model's weights made on the GPU against the
// CPU's (packInt8), zero channels and other channels per workgroup included, and refusing a copy that truncates; its kernel gate passing, and refusing a kernel broken on purpose; the int8
// decoding path choosing the f32 path's tokens at temperature 0 on a seeded model, wherever they
// stand clear of the runner-up; the held-out
// loss check passing there, and leaving sampling on f32 where it fails (a forced gate failure, a
// broken kernel).
import assert from "node:assert/strict";
import { test } from "node:test";
import { gpu, noGpu } from "../../engine/test/dawn";
import { createGpuBackend, type GpuBackend } from "../../engine/gpu/backend";
import { requestGpu } from "../../engine/gpu/device";
import { recordInt8Copy } from "../../engine/gpu/int8";
import { ACCUMULATE, BIAS, F32_KERNELS, type KernelTable } from "../../engine/gpu/kernels";
import { gpuLayout, toGpuOrder } from "../../engine/gpu/layout";
import { Pipelines, Recorder, dispatchOnce, encode } from "../../engine/gpu/recorder";
import { defaultTrainConfig, initParams, tensorLayout } from "../../engine/model";
import { blockWords, int8Layout, packInt8, quantizeRows } from "../../engine/quantize";
import { Rng } from "../../engine/rng";
import type { ModelConfig } from "../../engine/types";
import { configureGates } from "../gate";
import { CHECK_CASES, NORMALISES, WGSL_FEATURE, chooseInt8, gatedInt8, int8Kernels, int8KernelsAgree, int8LossAgrees, packBlocks } from "./lever";

const wgslHas = !noGpu && gpu.wgslLanguageFeatures.has(WGSL_FEATURE);
const skip = noGpu ?? (wgslHas ? false : `the adapter lacks ${WGSL_FEATURE}`);
const context = skip ? null : await requestGpu(gpu);

function mutate(source: string, from: string, to: string): string {
  assert.ok(source.includes(from), `the mutation's target is gone: ${from}`);
  return source.replace(from, to);
}
const SOURCE = int8Kernels().matvec_nn!.source;
// Each channel scaled by its neighbour's scale: small errors, which only the gate's thresholds see.
const BROKEN = int8Kernels(mutate(SOURCE, "bitcast<f32>(w8[block + 4u * n4 + j])", "bitcast<f32>(w8[block + 4u * n4 + (j + 1u) % 4u])"));

test("int8: every kernel matches CPU maths on the quantized operands", { skip }, async () => {
  const device = context!.device;
  const rng = new Rng(11);
  const normal = (n: number) => Float32Array.from({ length: n }, () => rng.normal());
  // fc_in's GELU is the plain kernel's store (matvec.wgsl), held to it by the gate's test below.
  const cases = CHECK_CASES.filter((c) => c.op !== "matvec_nn_ln_gelu");
  for (const { op, N, K, products, flags } of [...cases, { op: "matvec_nt" as const, N: 4, K: 4, products: 1, flags: BIAS }]) {
    const ln = NORMALISES.has(op);
    const a = normal(K), bias = normal(products * N), c0 = normal(products * N), lnW = normal(K), lnB = normal(K);
    const weights = Array.from({ length: products }, () => normal(N * K));
    // The row each workgroup quantizes: a, or its LayerNorm (f64 here).
    let row = Float64Array.from(a);
    if (ln) {
      const mean = row.reduce((s, v) => s + v, 0) / K;
      const rstd = 1 / Math.sqrt(row.reduce((s, v) => s + (v - mean) ** 2, 0) / K + 1e-5);
      row = row.map((v, k) => (v - mean) * rstd * lnW[k] + lnB[k]);
    }
    const qa = quantizeRows(Float32Array.from(row), 1, K);
    const want = new Float32Array(products * N);
    weights.forEach((w, y) => {
      const qw = quantizeRows(w, N, K);
      for (let n = 0; n < N; n++) {
        let dot = 0;
        for (let k = 0; k < K; k++) dot += qa.q[k] * qw.q[n * K + k];
        const i = y * N + n;
        want[i] = dot * qa.scales[0] * qw.scales[n] + (flags & BIAS ? bias[i] : 0) + (flags & ACCUMULATE ? c0[i] : 0);
      }
    });
    const stride = Math.ceil(blockWords(N, K) / 64) * 64;
    const bindings: Record<number, ArrayBufferView> = { 1: a, 3: bias, 4: c0, 5: packBlocks(weights, N, K, stride) };
    if (ln) Object.assign(bindings, { 6: lnW, 7: lnB });
    const got = (await dispatchOnce(device, { ...F32_KERNELS, ...int8Kernels() }, op, { M: 1, N, K, flags, eps: 1e-5, products, b_stride: stride, bias_stride: N / 4, c_stride: N / 4 }, bindings, [4]))[4];
    const scale = want.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
    for (let i = 0; i < want.length; i++) assert.ok(Math.abs(got[i] - want[i]) <= 1e-5 * scale, `${op} N ${N} K ${K}: output ${i} is ${got[i]}, CPU maths ${want[i]}`);
  }
});

// n_embd 260: fc_out's channels are 1040 long, more words (260) than a workgroup has invocations.
const COPY_MODEL: ModelConfig = { vocab_size: 256, n_layer: 2, n_embd: 260, n_head: 4, block_size: 8 };

/**
 * Where the int8 copy the kernels of `table` make on the GPU (recordInt8Copy, as the backend
 * records it) of a seeded COPY_MODEL differs from packInt8's on the CPU by more than the GPU's
 * division allows: a scale by more than 2 ulps, a value by more than one, or by one where x·127/max
 * lies further than 1e-6 (relative) from a .5 (WGSL's 127 / max need not be rounded exactly). fc_in's
 * channel 5 of block 1 (nn) and the head's row 7 (nt) are zeros. Also how many values sat on such a boundary.
 */
async function copyMismatches(table: Partial<KernelTable>): Promise<{ mismatches: string[]; boundary: number; zeros: number }> {
  const device = context!.device;
  const align = device.limits.minStorageBufferOffsetAlignment;
  const layout = gpuLayout(COPY_MODEL, align);
  const int8 = int8Layout(COPY_MODEL, align);
  const params = toGpuOrder(layout, initParams(COPY_MODEL, 20261203));
  const fcIn = layout.byName.get("blocks.1.mlp.fc_in.weight")!;
  for (let k = 0; k < COPY_MODEL.n_embd; k++) params[fcIn.gpuOffset + k * 4 * COPY_MODEL.n_embd + 5] = 0;
  const head = layout.byName.get("token_embedding.weight")!;
  params.fill(0, head.gpuOffset + 7 * COPY_MODEL.n_embd, head.gpuOffset + 8 * COPY_MODEL.n_embd);

  const paramBuf = device.createBuffer({ size: params.byteLength, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST });
  device.queue.writeBuffer(paramBuf, 0, params);
  const buffer = device.createBuffer({ size: int8.words * 4, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC });
  const staging = device.createBuffer({ size: int8.words * 4, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const pipelines = new Pipelines({ ...F32_KERNELS, ...table });
  const r = new Recorder(device, pipelines);
  recordInt8Copy(r, { buffer, layout: int8 }, layout, paramBuf);
  await pipelines.compile(device, r.ops);
  const enc = device.createCommandEncoder();
  const pass = enc.beginComputePass();
  encode(pass, r.finish("int8 copy"));
  pass.end();
  enc.copyBufferToBuffer(buffer, 0, staging, 0, int8.words * 4);
  device.queue.submit([enc.finish()]);
  await staging.mapAsync(GPUMapMode.READ);
  const gpuWords = new Uint32Array(staging.getMappedRange().slice(0));
  for (const b of [paramBuf, buffer, staging]) b.destroy();
  r.destroy();

  const cpuWords = packInt8(int8, (name) => { const t = layout.byName.get(name)!; return params.subarray(t.gpuOffset, t.gpuOffset + t.size); });
  const [gpuScales, cpuScales] = [gpuWords, cpuWords].map((w) => new Float32Array(w.buffer));
  const [gpuQ, cpuQ] = [gpuWords, cpuWords].map((w) => new Int8Array(w.buffer));
  const mismatches: string[] = [];
  let boundary = 0, zeros = 0;
  for (const [name, { offset, N, K, transposed }] of int8.blocks) {
    const w = params.subarray(layout.byName.get(name)!.gpuOffset);
    const x = (n: number, k: number) => (transposed ? w[k * N + n] : w[n * K + k]);
    for (let n = 0; n < N; n++) {
      const [got, want] = [gpuScales[offset + n], cpuScales[offset + n]];
      if (want === 0) zeros++;
      const ulp = want === 0 ? 0 : 2 ** (Math.floor(Math.log2(want)) - 23);
      if (!(Math.abs(got - want) <= 2 * ulp)) mismatches.push(`${name} channel ${n}: scale ${got}, CPU ${want}`);
      let max = 0;
      for (let k = 0; k < K; k++) max = Math.max(max, Math.abs(x(n, k)));
      for (let k = 0; k < K; k++) {
        const i = (offset + N) * 4 + n * K + k;
        if (gpuQ[i] === cpuQ[i]) continue;
        const t = Math.abs((x(n, k) * 127) / max);
        const nearHalf = Math.abs((t % 1) - 0.5) <= 1e-6 * Math.max(1, t);
        if (Math.abs(gpuQ[i] - cpuQ[i]) === 1 && nearHalf) boundary++;
        else mismatches.push(`${name} channel ${n}, k ${k}: q ${gpuQ[i]}, CPU ${cpuQ[i]} (x·127/max ${t})`);
      }
    }
  }
  return { mismatches, boundary, zeros };
}

test("int8: the GPU makes packInt8's copy of the weights, at any channels per workgroup its table sets, and a copy that truncates is caught", { skip }, async () => {
  const good = await copyMismatches(int8Kernels());
  assert.deepEqual(good.mismatches.slice(0, 5), [], `${good.mismatches.length} values differ`);
  assert.equal(good.zeros, 2, "the zero channels were not zero on the CPU: the check of them proves nothing");
  // CHANNELS_Q fewer and more than the table's: a shader or a grid that kept a number of its own leaves channels unwritten.
  for (const channels of [16, 256]) {
    const other = await copyMismatches(int8Kernels(SOURCE, channels));
    assert.deepEqual(other.mismatches.slice(0, 5), [], `CHANNELS_Q ${channels}: ${other.mismatches.length} values differ`);
  }
  const truncating = await copyMismatches(int8Kernels(mutate(SOURCE, "vec4<i32>(round(x * inv))", "vec4<i32>(x * inv)")));
  assert.ok(truncating.mismatches.length > 1000, `a copy rounding toward zero differs in only ${truncating.mismatches.length} values`);
});

test("int8: the kernel gate passes the lever and refuses a kernel that scales by the wrong channel", { skip }, async () => {
  const good = await int8KernelsAgree(context!.device, int8Kernels());
  assert.equal(good.failure, null, JSON.stringify(good.errors));
  const bad = await int8KernelsAgree(context!.device, BROKEN);
  assert.match(bad.failure ?? "", /differs from the plain kernel's/);
  configureGates({});
  const adapter = (await gpu.requestAdapter())!;
  const out = await gatedInt8({ context: context! }, adapter, gpu.wgslLanguageFeatures);
  assert.equal(out?.verdict.pass, true);
  assert.ok(out?.kernels?.matvec_nt_ln?.weightsInt8);
  assert.equal(await gatedInt8({ context: context! }, adapter, new Set()), null, "without dot4I8Packed the lever is not tried");
  configureGates({ forceFail: ["int8"] });
  const forced = await gatedInt8({ context: context! }, adapter, gpu.wgslLanguageFeatures);
  assert.equal(forced?.verdict.pass, false);
  assert.equal(forced?.kernels, null);
  configureGates({});
});

const MODEL: ModelConfig = { vocab_size: 256, n_layer: 2, n_embd: 32, n_head: 2, block_size: 24 };

/** A seeded model whose predictions are confident: the initial matrices scaled up, so a top logit stands clear of the next. */
function confidentParams(): Float32Array {
  const params = initParams(MODEL, 20261203);
  for (const t of tensorLayout(MODEL)) if (t.shape.length === 2) for (let i = t.offset; i < t.offset + t.size; i++) params[i] *= 10;
  return params;
}

async function backend(int8 = int8Kernels()): Promise<GpuBackend> {
  const b = await createGpuBackend(MODEL, defaultTrainConfig(2, 1e-3), { context: context!, int8 });
  await b.setState({ params: confidentParams(), step: 0 });
  return b;
}

const heldOut = Uint8Array.from({ length: 400 }, (_, i) => "to be or not to be, that is the question. ".charCodeAt(i % 42));

test("int8: decoding on int8 picks the f32 path's tokens at temperature 0, and its loss check passes", { skip }, async () => {
  const b = await backend();
  try {
    assert.ok(b.hasInt8);
    const prompt = Int32Array.from(heldOut.subarray(0, 5));
    const greedy = { temperature: 0, topK: 0 };
    const f32 = await b.sampleTokens(prompt, 19, greedy, 1, 0);
    b.sampleInt8 = true;
    assert.deepEqual([...b.paths], ["int8"]);
    // The f32 text teacher-forced through both paths: int8 picks f32's token wherever f32's top two
    // logits stand further apart than int8's rounding moves them (MARGIN); at 10 of the 19 here.
    const MARGIN = 0.25;
    const logits = async () => {
      const out = [await b.prefill(prompt)];
      for (const t of f32.subarray(0, -1)) out.push(await b.decode(t));
      return out;
    };
    const int8 = await logits();
    b.sampleInt8 = false;
    const plain = await logits();
    const argmax = (l: Float32Array) => l.indexOf(Math.max(...l));
    let clear = 0;
    plain.forEach((l, i) => {
      assert.equal(argmax(l), f32[i], "f32's decode picks sampleTokens' token");
      const [top, next] = [...l].sort((x, y) => y - x);
      if (top - next <= MARGIN) return;
      clear++;
      assert.equal(argmax(int8[i]), f32[i], `token ${i}: int8 picks another token`);
    });
    assert.ok(clear >= 8, `only ${clear} of 19 tokens stand clear of the next: the check proves little`);
    b.sampleInt8 = true;
    const outcome = await int8LossAgrees(b, heldOut, MODEL.block_size);
    assert.equal(outcome.failure, null, JSON.stringify(outcome.errors));
    assert.ok(outcome.errors["held-out loss"] > 0, "the int8 path computed something else than f32's");
    // What sample.js --profile times is the decoding path sampling takes.
    await b.prefill(prompt);
    const int8Dispatches = async () => (await b.profileDecode()).dispatches.filter((d) => d.op.includes("(int8_")).length;
    assert.ok((await int8Dispatches()) > 0, "the profile of an int8 decoding step names no int8 kernel");
    b.sampleInt8 = false;
    assert.equal(await int8Dispatches(), 0, "the profile of an f32 decoding step names an int8 kernel");
    const lines: string[] = [];
    await chooseInt8(b, heldOut, MODEL.block_size, (l) => lines.push(l));
    assert.equal(b.sampleInt8, true);
    await chooseInt8(b, heldOut, MODEL.block_size, (l) => lines.push(l));
    assert.equal(lines.length, 1, "the same weights are checked once");
    await b.trainStep(Int32Array.from(heldOut.subarray(0, 48)), Int32Array.from(heldOut.subarray(1, 49)), 1e-3);
    await chooseInt8(b, heldOut, MODEL.block_size, (l) => lines.push(l));
    assert.equal(lines.length, 2, "new weights are checked again");
    await chooseInt8(b, null, MODEL.block_size, (l) => lines.push(l));
    assert.equal(b.sampleInt8, false, "without held-out text there is no check, so no int8");
  } finally {
    b.dispose();
  }
});

test("int8: a kernel that passes its gate but quantizes badly fails the loss check, and sampling stays on f32", { skip }, async () => {
  // Every channel's weights at 1/4 of their scale: a model of its own, not a rounding of this one.
  const b = await backend(int8Kernels(mutate(SOURCE, "out[j] = f32(sum) * (scale *", "out[j] = 0.25 * f32(sum) * (scale *")));
  try {
    const lines: string[] = [];
    await chooseInt8(b, heldOut, MODEL.block_size, (l) => lines.push(l));
    assert.equal(b.sampleInt8, false);
    assert.deepEqual([...b.paths], []);
    assert.match(lines[0], /^int8 sampling off for these weights: its held-out loss .* strays from f32's/);
  } finally {
    b.dispose();
  }
});
