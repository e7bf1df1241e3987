// The relaxed-SIMD lever (facts.levers "relaxed-simd"): the CPU backend's
// kernels built a second time from the same source with fused multiply-adds
// (WebAssembly relaxed SIMD). Its variant rides inside cpu.wasm (cpu/wasm.ts);
// the feature is the engine validating that module; its gate runs the kernels
// whose results it changes (every matrix product: the linear layers' matmul
// and attention) on the same random inputs in both builds, and each relaxed
// output must match the plain one within facts.gate. relaxed_madd may fuse or
// not, as the engine likes; either way the outputs must agree, and an engine
// that got it wrong is caught here rather than in a loss curve. Its release
// check, 500 training steps beside the plain build, is curve.py (and curve.ts) beside this file.

import { Rng } from "../../engine/rng";
import type { Kernels } from "../../cpu/threads";
import { relaxedModule } from "../../cpu/wasm";
import { type Outcome, type Verdict, browserVersion, gate, gateErrors, shaderHash, withinBudget, worst } from "../gate";

export const ID = "relaxed-simd";

// Shapes with every remainder path: rows not a multiple of 4, columns 8k + 4,
// a head size of 12 (8 + 4 columns), sequences of 9 (a partial block of queries).
const ROWS = 13, K = 72, M = 36;
const SEQS = 2, T = 9, C = 24, H = 2;

type Inputs = Record<string, Float32Array>;

function inputs(): Inputs {
  const rng = new Rng(20261130);
  const normal = (n: number, s = 1) => Float32Array.from({ length: n }, () => rng.normal() * s);
  const N = SEQS * T;
  return {
    a: normal(ROWS * K), b: normal(K * M, 0.1), bias: normal(M), c: normal(ROWS * M),
    q: normal(N * C), k: normal(N * C), v: normal(N * C), dout: normal(N * C),
  };
}

/** The gated kernels' outputs in one build, on its own small memory. */
async function outputs(bytes: BufferSource, x: Inputs): Promise<Float32Array[]> {
  const memory = new WebAssembly.Memory({ initial: 4, maximum: 65536 });
  const instance = await WebAssembly.instantiate(await WebAssembly.compile(bytes), { env: { memory } });
  const ex = instance.exports as unknown as Kernels & { heap_base(): number };
  const f32 = new Float32Array(memory.buffer);
  let end = Math.ceil(ex.heap_base() / 64) * 64;
  const take = (n: number, from?: Float32Array) => {
    const at = end;
    end += Math.ceil(n / 16) * 64;
    f32.fill(0, at / 4, at / 4 + n);
    if (from) f32.set(from, at / 4);
    return at;
  };
  const read = (at: number, n: number) => f32.slice(at / 4, at / 4 + n);

  const a = take(ROWS * K, x.a), b = take(K * M, x.b), bias = take(M, x.bias), c = take(ROWS * M, x.c);
  const lin = take(ROWS * M);
  ex.matmul(lin, a, b, bias, c, K, 1, K, M, 0, ROWS);
  // A transposed through the strides, accumulating: a weight gradient's shape.
  const wg = take(K * M, x.b);
  ex.matmul(wg, a, c, 0, wg, 1, K, ROWS, M, 0, K);

  const N = SEQS * T, Tp = Math.ceil(T / 4) * 4, D = C / H, items = SEQS * H;
  const q = take(N * C, x.q), k = take(N * C, x.k), v = take(N * C, x.v), dout = take(N * C, x.dout);
  const y = take(N * C), att = take(items * T * Tp), scratch = take(items * (D + 4) * Tp);
  const dq = take(N * C), dk = take(N * C), dv = take(N * C);
  ex.attention_forward(y, att, scratch, q, k, v, T, C, H, 1 / Math.sqrt(D), 0, items);
  const probs = read(att, items * T * Tp);
  ex.attention_backward(dq, dk, dv, scratch, dout, q, k, v, att, T, C, H, 1 / Math.sqrt(D), 0, items);
  return [read(lin, ROWS * M), read(wg, K * M), read(y, N * C), probs, read(dq, N * C), read(dk, N * C), read(dv, N * C)];
}

/** Whether the relaxed build's kernels match the plain build's on this engine and machine, and how closely. */
export async function relaxedAgrees(plain: BufferSource, relaxed: BufferSource): Promise<Outcome> {
  const x = inputs();
  const [ref, out] = await Promise.all([outputs(plain, x), outputs(relaxed, x)]);
  const errors = worst(...ref.map((r, i) => gateErrors(out[i], r)));
  return { failure: withinBudget(errors) ? null : "its matrix products or attention differ from the plain build's", errors };
}

/** A CPU check has no adapter to name: the engine is the browser, which the key records anyway. */
const ADAPTER = "wasm";

/** The lever's verdict for cpu.wasm `bytes`, and its module when it passed. */
export interface Gated {
  verdict: Verdict;
  module: Uint8Array<ArrayBuffer> | null;
}

// Per cpu.wasm bytes, so the module is taken out and hashed once however many backends ask.
const gated = new WeakMap<object, Promise<Gated>>();

/**
 * The relaxed-SIMD build carried in cpu.wasm `bytes` if this engine validates
 * it and it passes the gate (module null otherwise), with the verdict.
 */
export function gatedRelaxed(bytes: BufferSource): Promise<Gated> {
  let result = gated.get(bytes);
  if (!result) {
    result = (async () => {
      const relaxed = relaxedModule(bytes);
      if (!relaxed) return { verdict: { pass: false, reason: "this cpu.wasm carries no relaxed-SIMD build", errors: {}, cached: false }, module: null };
      if (!WebAssembly.validate(relaxed)) return { verdict: { pass: false, reason: "this browser has no relaxed SIMD", errors: {}, cached: false }, module: null };
      const key = { adapter: ADAPTER, browser: browserVersion(), shaders: await shaderHash(bytes) };
      const verdict = await gate(ID, key, () => relaxedAgrees(bytes, relaxed));
      return { verdict, module: verdict.pass ? relaxed : null };
    })();
    gated.set(bytes, result);
  }
  return result;
}
