// The numerics gate for the relaxed-SIMD build (content/docs/numerics-gate.md):
// before the backend trusts it, the kernels whose results it changes (every
// matrix product: the linear layers' matmul and attention) run on the same
// random inputs in both builds, and each relaxed output must match the plain
// one within facts.gate. relaxed_madd may fuse or not, as the engine likes;
// either way the outputs must agree, and an engine that got it wrong is
// caught here rather than in a loss curve.

import facts from "../../tinygpt/facts.json";
import { Rng } from "../engine/rng";
import type { Kernels } from "./threads";
import { relaxedModule } from "./wasm";

/** facts.gate's kernel rule: max|out - ref| and the floored mean relative error, against mean|ref|. */
export function withinGate(out: Float32Array, ref: Float32Array): boolean {
  if (out.length !== ref.length || ref.length === 0) return false;
  const meanAbs = ref.reduce((s, v) => s + Math.abs(v), 0) / ref.length;
  const floor = facts.gate.rel_floor_frac_of_mean_ref * meanAbs;
  let maxAbs = 0, rel = 0;
  for (let i = 0; i < ref.length; i++) {
    const d = Math.abs(out[i] - ref[i]);
    maxAbs = Math.max(maxAbs, d); // NaN stays NaN and fails below
    rel += d / Math.max(Math.abs(ref[i]), floor);
  }
  return maxAbs < facts.gate.max_abs_frac_of_mean_ref * meanAbs && rel / ref.length < facts.gate.mean_rel;
}

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

/** Whether the relaxed build's kernels match the plain build's on this engine and machine. */
export async function relaxedAgrees(plain: BufferSource, relaxed: BufferSource): Promise<boolean> {
  const x = inputs();
  const [ref, out] = await Promise.all([outputs(plain, x), outputs(relaxed, x)]);
  return ref.every((r, i) => withinGate(out[i], r));
}

// Verdicts for this session, per cpu.wasm bytes: the check runs once, however
// many backends (and the page's pill) ask.
const verdicts = new WeakMap<object, Promise<Uint8Array<ArrayBuffer> | null>>();

/**
 * The relaxed-SIMD build carried in cpu.wasm `bytes`, or null when there is
 * none, this engine does not validate it (no relaxed SIMD), or it fails the gate.
 */
export function gatedRelaxed(bytes: BufferSource): Promise<Uint8Array<ArrayBuffer> | null> {
  let verdict = verdicts.get(bytes);
  if (!verdict) {
    verdict = (async () => {
      const relaxed = relaxedModule(bytes);
      if (!relaxed || !WebAssembly.validate(relaxed)) return null;
      try {
        return (await relaxedAgrees(bytes, relaxed)) ? relaxed : null;
      } catch {
        return null;
      }
    })();
    verdicts.set(bytes, verdict);
  }
  return verdict;
}
