// The int8 sampling lever (facts.levers "int8"): a decoding step's products (matvec.wgsl's four
// entry points) over an int8 copy of the weights, quantized per output channel, with each input
// row quantized per row, summed by dot4I8Packed (shaders/levers/int8/matvec.wgsl), on every GPU
// whose WGSL has packed_4x8_integer_dot_product. The copy is made on the GPU by two ops of its own
// (int8_quantize_nn, _nt: engine/gpu/int8.ts recordInt8Copy). Two checks stand between it and the text:
// - its kernels, once per adapter, browser and shader (gate.ts remembers the verdict): each op on
//   awkward shapes against the plain f32 kernel on the dequantized operands, within facts.gate;
// - the quantized model, whenever the weights change before sampling: the mean cross-entropy of
//   held-out text, teacher-forced through the int8 decoding path (on the copy its ops made) and the f32 one, within
//   facts.gate.int8_loss_rel_tolerance. Where either fails, sampling stays on f32.
// The WebAssembly backend has an int8 decoding path too (cpu/assembly/index.ts matvec_i8: the same
// copy, made on the CPU by quantize.ts packInt8, and exact integer sums in both of its builds, so it
// has no kernel gate); the held-out check (chooseInt8, on any Int8Decoding) stands before it alike.

import matvecInt8 from "../../../.cache/wgsl/levers/int8/matvec.wgsl";
import facts from "../../../tinygpt/facts.json";
import { type GpuContext, requestGpu } from "../../engine/gpu/device";
import { BIAS, ACCUMULATE, F32_KERNELS, type AddedKernels, type KernelTable, type Sizes, type Workgroups } from "../../engine/gpu/kernels";
import { dispatchOnce } from "../../engine/gpu/recorder";
import { blockWords, dequantizeRows, quantizeRows, transpose } from "../../engine/quantize";
import { Rng } from "../../engine/rng";
import type { Int8Decoding } from "../../engine/types";
import { type GateErrors, type Outcome, type Verdict, describeErrors, gate, gateErrors, withinBudget, worst } from "../gate";
import { tableKey } from "../gpu";

export const ID = "int8";
export const WGSL_FEATURE = "packed_4x8_integer_dot_product";

/** The plain ops it replaces and its entry point for each: nn and nt read a channel along K alike. */
const ENTRIES = { matvec_nn: "int8_nn", matvec_nt: "int8_nn", matvec_nn_ln: "int8_nn_ln", matvec_nt_ln: "int8_nn_ln", matvec_nn_ln_gelu: "int8_nn_ln_gelu" } as const;
type Int8Op = keyof typeof ENTRIES;
/** The ops that LayerNorm their row first (binding 7's bias, 6's weight) before they quantize it. */
export const NORMALISES: ReadonlySet<Int8Op> = new Set(["matvec_nn_ln", "matvec_nt_ln", "matvec_nn_ln_gelu"]);

/** The ops it adds, which make the int8 copy of a weight, [K, N] (nn) or [N, K] (nt): a workgroup per CHANNELS_Q channels. */
const QUANTIZE = ["int8_quantize_nn", "int8_quantize_nt"] as const satisfies (keyof AddedKernels)[];

/**
 * The lever's table from its module (the tests pass one broken on purpose); `channels`, the copy's
 * channels per workgroup (its CHANNELS_Q; the tests try others), a power of 2 up to 256.
 */
export function int8Kernels(source = matvecInt8, channels = 64): Partial<KernelTable> {
  const products = Object.entries(ENTRIES).map(([op, entry]) => [op, { ...F32_KERNELS[op as Int8Op], source, entry, weightsInt8: true }]);
  const constants = { ...F32_KERNELS.matvec_nn.constants, CHANNELS_Q: channels };
  const quantize = QUANTIZE.map((op) => [op, { ...F32_KERNELS.matvec_nn, source, entry: op, constants, workgroups: (s: Sizes): Workgroups => [Math.ceil(s.N / constants.CHANNELS_Q), 1, 1] }]);
  return Object.fromEntries([...products, ...quantize]);
}

/**
 * The shapes its kernels are held to, each op once or more, sizes no tile divides: q, k and v as
 * three products with bias and accumulation, a head wider than a workgroup's outputs (OUTS, 256 at
 * most), K not a multiple of the slices (8 at OUTS 32), fc_out's K at its widest (4 x 384), and
 * fc_in with its GELU.
 */
export const CHECK_CASES: { op: Int8Op; N: number; K: number; products: number; flags: number }[] = [
  { op: "matvec_nn", N: 36, K: 20, products: 3, flags: BIAS | ACCUMULATE },
  { op: "matvec_nn", N: 384, K: 1536, products: 1, flags: BIAS | ACCUMULATE },
  { op: "matvec_nt", N: 260, K: 132, products: 1, flags: 0 },
  { op: "matvec_nn_ln", N: 8, K: 68, products: 3, flags: BIAS },
  { op: "matvec_nt_ln", N: 256, K: 384, products: 1, flags: 0 },
  { op: "matvec_nn_ln_gelu", N: 1536, K: 384, products: 1, flags: BIAS },
];

/** `products` int8 blocks (gpu/int8.ts) of N channels of K, each `stride` words apart, from channel-major weights. */
export function packBlocks(weights: Float32Array[], N: number, K: number, stride: number): Uint32Array {
  const words = new Uint32Array(stride * (weights.length - 1) + blockWords(N, K));
  weights.forEach((w, y) => {
    const { q, scales } = quantizeRows(w, N, K);
    new Float32Array(words.buffer, y * stride * 4, N).set(scales);
    new Int8Array(words.buffer, (y * stride + N) * 4, N * K).set(q);
  });
  return words;
}

/**
 * The int8 kernels `kernels` against the plain ones on this device, case by case: both get the same
 * row, weights, biases and old outputs, the plain kernel the int8 weights dequantized and a row that
 * int8 holds exactly (its own quantization, dequantized), so only the kernel's arithmetic differs.
 * The _ln cases (and _ln_gelu) normalise with a zero weight, which leaves their bias: the exact row.
 */
export async function int8KernelsAgree(device: GPUDevice, kernels: Partial<KernelTable>, cases = CHECK_CASES): Promise<Outcome> {
  const rng = new Rng(20261203);
  const normal = (n: number) => Float32Array.from({ length: n }, () => rng.normal());
  const measured: GateErrors[] = [];
  let failure: string | null = null;
  for (const { op, N, K, products, flags } of cases) {
    const exact = dequantizeRows(quantizeRows(normal(K), 1, K));
    const channels = Array.from({ length: products }, () => normal(N * K)); // [N, K] each
    const plainW = new Float32Array(products * N * K);
    channels.forEach((w, y) => {
      const deq = dequantizeRows(quantizeRows(w, N, K));
      plainW.set(op.startsWith("matvec_nn") ? transpose(deq, N, K) : deq, y * N * K);
    });
    const stride = Math.ceil(blockWords(N, K) / 4) * 4;
    const ln = NORMALISES.has(op);
    const shared: Record<number, ArrayBufferView> = { 1: ln ? normal(K) : exact, 3: normal(products * N), 4: normal(products * N) };
    if (ln) Object.assign(shared, { 6: new Float32Array(K), 7: exact });
    const sizes = { M: 1, N, K, flags, eps: 1e-5, products, bias_stride: N / 4, c_stride: N / 4 };
    const want = (await dispatchOnce(device, { ...F32_KERNELS }, op, { ...sizes, b_stride: (N * K) / 4 }, { ...shared, 2: plainW }, [4]))[4];
    const got = (await dispatchOnce(device, { ...F32_KERNELS, ...kernels }, op, { ...sizes, b_stride: stride }, { ...shared, 5: packBlocks(channels, N, K, stride) }, [4]))[4];
    const errors = gateErrors(got, want);
    measured.push(errors);
    if (!failure && !withinBudget(errors)) failure = `its ${op} differs from the plain kernel's on the dequantized operands (N ${N}, K ${K}, ${products} products)`;
  }
  return { failure, errors: worst(...measured) };
}

/** The lever's table where the browser's WGSL has dot4I8Packed, else null: it cannot run here. */
export const int8On = (wgsl: ReadonlySet<string>): Partial<KernelTable> | null => (wgsl.has(WGSL_FEATURE) ? int8Kernels() : null);

/** The lever's verdict on the adapter `on` offers (null where the WGSL lacks dot4I8Packed) and its table where it passed. */
export async function gatedInt8(on: { gpu: GPU } | { context: GpuContext }, adapter: GPUAdapter, wgsl: ReadonlySet<string> = globalThis.navigator?.gpu?.wgslLanguageFeatures ?? new Set()): Promise<{ verdict: Verdict; kernels: Partial<KernelTable> | null } | null> {
  const kernels = int8On(wgsl);
  if (!kernels) return null;
  const verdict = await gate(ID, await tableKey(adapter, kernels), async () => {
    const context = "context" in on ? on.context : await requestGpu(on.gpu);
    try {
      return await int8KernelsAgree(context.device, kernels);
    } finally {
      if (!("context" in on)) context.device.destroy();
    }
  });
  return { verdict, kernels: verdict.pass ? kernels : null };
}

/** The held-out windows the loss check reads: enough windows of up to 64 tokens, evenly spread, to predict int8_check_tokens. */
export function checkWindows(heldOut: Uint8Array, blockSize: number): Int32Array[] {
  const W = Math.min(blockSize, 64, heldOut.length);
  const count = Math.ceil(facts.gate.int8_check_tokens / (W - 1));
  return Array.from({ length: count }, (_, j) => {
    const start = Math.floor((j * (heldOut.length - W)) / count);
    return Int32Array.from(heldOut.subarray(start, start + W));
  });
}

/** Mean cross-entropy of each window's tokens after the first, teacher-forced through the backend's decoding path. */
async function decodedLoss(backend: Int8Decoding, windows: Int32Array[]): Promise<number> {
  let sum = 0, n = 0;
  for (const w of windows) {
    let logits = await backend.prefill(w.subarray(0, 1));
    for (let i = 1; i < w.length; i++) {
      const max = logits.reduce((m, v) => Math.max(m, v), -Infinity);
      const lse = max + Math.log(logits.reduce((s, v) => s + Math.exp(v - max), 0));
      sum += lse - logits[w[i]];
      n++;
      if (i + 1 < w.length) logits = await backend.decode(w[i]);
    }
  }
  return sum / n;
}

/**
 * Whether decoding on int8 keeps the model's held-out loss within facts.gate.int8_loss_rel_tolerance
 * of the f32 decoding path on the backend's current weights; leaves `sampleInt8` as it found it.
 */
export async function int8LossAgrees(backend: Int8Decoding, heldOut: Uint8Array, blockSize: number): Promise<Outcome> {
  const windows = checkWindows(heldOut, blockSize);
  const was = backend.sampleInt8;
  try {
    backend.sampleInt8 = false;
    const f32 = await decodedLoss(backend, windows);
    backend.sampleInt8 = true;
    const int8 = await decodedLoss(backend, windows);
    const share = Math.abs(int8 - f32) / f32 / facts.gate.int8_loss_rel_tolerance;
    const errors = { "held-out loss": Number.isNaN(share) ? NaN : share };
    return { failure: share < 1 ? null : `its held-out loss (${int8.toFixed(4)}) strays from f32's (${f32.toFixed(4)})`, errors };
  } finally {
    backend.sampleInt8 = was;
  }
}

/** Whether `backend` has an int8 decoding path to choose (the WebGPU and WebAssembly backends). */
export const hasInt8Decoding = <B extends object>(backend: B): backend is B & Int8Decoding => "sampleInt8" in backend && "hasInt8" in backend;

// The weights each backend's check ran on (Int8Decoding.paramsVersion) and its outcome.
const checked = new WeakMap<Int8Decoding, { version: number; pass: boolean }>();

/**
 * Before sampling: sampling on int8 where the backend has the path and its held-out loss check
 * passes on the current weights (run once per version of them, one console line each), else on f32.
 */
export async function chooseInt8(backend: Int8Decoding, heldOut: Uint8Array | null, blockSize: number, log: (line: string) => void): Promise<void> {
  if (!backend.hasInt8 || !heldOut || heldOut.length < 2) {
    backend.sampleInt8 = false;
    return;
  }
  let seen = checked.get(backend);
  if (seen?.version !== backend.paramsVersion) {
    const version = backend.paramsVersion;
    let outcome: Outcome;
    try {
      outcome = await int8LossAgrees(backend, heldOut, blockSize);
    } catch (e) {
      outcome = { failure: `its check failed to run (${(e as Error).message})`, errors: {} };
    }
    log(`int8 sampling ${outcome.failure ? "off" : "on"} for these weights: ${outcome.failure ?? "held-out loss matches f32's"}; ${describeErrors(outcome.errors)}, refreshing the int8 copy took ${backend.int8RefreshMs.toFixed(1)} ms`);
    seen = { version, pass: outcome.failure === null };
    checked.set(backend, seen);
  }
  backend.sampleInt8 = seen.pass;
}
