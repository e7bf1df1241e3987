// The coop-matrix lever's kernels against the numpy reference (kernels.json, which
// tests/oracles/conformance.py writes), one dispatch each: every matmul of its table with the flags
// the graph sets (BIAS with ACCUMULATE, GRAD_A and GRAD_B on operands too small for f16 unscaled),
// split along K and stacked (q, k and v), in both WGSL spellings (spelling.ts). Only an adapter with subgroup matrices runs them (the H200 through Dawn, with
// TINYGPT_DAWN_F16_TOGGLE=1); elsewhere each test says the adapter lacks them. The lever's gate
// compares whole training steps; this finds the kernel.
import assert from "node:assert/strict";
import { test } from "node:test";
import { join } from "node:path";
import facts from "../../../tinygpt/facts.json";
import { gpu, noGpu } from "../../engine/test/dawn";
import { f32, readJson } from "../../engine/test/fixtures";
import { requestGpu } from "../../engine/gpu/device";
import { ACCUMULATE, BIAS, F32_KERNELS, GRAD_A, GRAD_B, type KernelTable, type Op, type Sizes } from "../../engine/gpu/kernels";
import { dispatchOnce } from "../../engine/gpu/recorder";
import { leverFeatures, tableOn } from "../gpu";
import { COOP_MATRIX } from "./lever";
import { olderKernel, respelled } from "./spelling";

const TOLERANCE = facts.kernel_tolerance["coop-matrix"].max;

interface MatmulCase { M: number; N: number; K: number; a: string; b: string; bias: string; c0: string; ab: string }
const conformance = process.env.TINYGPT_CONFORMANCE;
const cases = conformance ? readJson<{ matmul: MatmulCase[] }>(join(conformance, "kernels.json")) : null;

const adapter = noGpu ? null : await gpu.requestAdapter();
const table = adapter ? tableOn(COOP_MATRIX, adapter, gpu.wgslLanguageFeatures) : null;
const own = table ? requestGpu(gpu, undefined, leverFeatures(COOP_MATRIX)) : null;
const skip = noGpu ?? (!cases ? "TINYGPT_CONFORMANCE names no folder with kernels.json (tests/test_engine_node.py writes one)" : table ? false : `the adapter lacks ${leverFeatures(COOP_MATRIX).join(", ")} or a table for it`);

const spellings: [string, Partial<KernelTable>][] = table ? [["templated", table], ["older", respelled(table, olderKernel)]] : [];

/** One dispatch of `op` of table `t` (recorder.ts's dispatchOnce); `out` starts as given (NaN where only a length) and comes back. */
async function dispatch(t: Partial<KernelTable>, op: Op, sizes: Sizes, inputs: Record<number, Float32Array>, out: Float32Array | number): Promise<Float32Array> {
  const c = typeof out === "number" ? new Float32Array(out).fill(NaN) : out;
  return (await dispatchOnce((await own!).device, { ...F32_KERNELS, ...t }, op, sizes, { ...inputs, 4: c }, [4]))[4];
}

/** max|out - ref| / max|ref|, as tests/test_kernels.py measures the plain kernels (a NaN fails). */
function check(what: string, out: Float32Array, ref: Float32Array): number {
  assert.equal(out.length, ref.length, what);
  let diff = 0, top = 0;
  for (let i = 0; i < ref.length; i++) {
    const d = Math.abs(out[i] - ref[i]);
    diff = Number.isNaN(d) ? NaN : Math.max(diff, d);
    top = Math.max(top, Math.abs(ref[i]));
  }
  const err = diff / top;
  assert.ok(err <= TOLERANCE, `${what}: max error ${err.toPrecision(3)} of max|ref| exceeds ${TOLERANCE}`);
  return err;
}

const transpose = (a: Float32Array, rows: number, cols: number) => Float32Array.from({ length: a.length }, (_, i) => a[(i % rows) * cols + Math.floor(i / rows)]);
const times = (a: Float32Array, s: number) => a.map((x) => x * s);
const plus = (...xs: Float32Array[]) => xs[0].map((_, i) => xs.reduce((s, x) => s + x[i], 0));
const concat = (xs: Float32Array[]) => Float32Array.from(xs.flatMap((x) => [...x]));
const log = (line: string) => process.stderr.write(`${line}\n`);

test("coop-matrix: every matmul of its table matches the reference, with bias and accumulate, gradient operands scaled into f16, split along K and stacked, in both spellings", { skip }, async () => {
  // An operand this small (a gradient of a mean over 16384 rows) is all subnormal in f16 unless scaled.
  const tiny = 2 ** -14;
  const ops = (Object.keys(table!) as Op[]).filter((op) => op.startsWith("matmul"));
  for (const [spelling, t] of spellings) for (const c of cases!.matmul) {
    const { M, N, K } = c;
    const [a, b, bias, c0, ab] = [c.a, c.b, c.bias, c.c0, c.ab].map(f32);
    for (const op of ops) {
      const o = table![op]!.entry.slice(-2) as "nn" | "nt" | "tn";
      // Operands as the orientation stores them: A [M,K] or Aᵀ as [K,M]; B [K,N] or Bᵀ as [N,K].
      const A = (x: Float32Array) => (o === "tn" ? transpose(x, M, K) : x);
      const B = (x: Float32Array) => (o === "nt" ? transpose(x, K, N) : x);
      const sizes = { M, N, K };
      const run = async (flags: number, ai: Float32Array, bi: Float32Array, out: Float32Array | number, splits = 1) =>
        dispatch(t, op, { ...sizes, flags, splits }, { 1: A(ai), 2: B(bi), 3: bias }, out);
      const errors = [
        check(`${op} ${M}x${N}x${K}`, await run(0, a, b, M * N), ab),
        check(`${op} bias + accumulate`, await run(BIAS | ACCUMULATE, a, b, c0), Float32Array.from(ab, (x, i) => x + bias[i % N] + c0[i])),
        check(`${op} GRAD_A`, await run(GRAD_A, times(a, tiny), b, M * N), times(ab, tiny)),
        check(`${op} GRAD_B`, await run(GRAD_B, a, times(b, tiny), M * N), times(ab, tiny)),
      ];
      if (o === "tn") {
        const S = 3;
        const parts = await run(0, a, b, S * M * N, S);
        errors.push(check(`${op} split ${S} ways`, plus(...[0, 1, 2].map((s) => parts.subarray(s * M * N, (s + 1) * M * N))), ab));
      }
      // Three stacked products (lib/matmul_block.wgsl), product j's B and bias scaled by scales[j];
      // the weight gradient's also split, each split's three products one after another.
      const scales = [1, 0.5, -2];
      const [S, flags] = o === "tn" ? [2, 0] : [1, BIAS];
      const stacked = await dispatch(t, op, { ...sizes, flags, splits: S, products: 3 }, { 1: A(a), 2: concat(scales.map((s) => B(times(b, s)))), 3: concat(scales.map((s) => times(bias, s))) }, S * 3 * M * N);
      scales.forEach((s, j) => {
        const product = plus(...Array.from({ length: S }, (_, z) => stacked.subarray((z * 3 + j) * M * N, (z * 3 + j + 1) * M * N)));
        errors.push(check(`${op} stacked product ${j}`, product, Float32Array.from(ab, (x, i) => (x + (flags ? bias[i % N] : 0)) * s)));
      });
      log(`coop-matrix ${op} ${M}x${N}x${K} (${spelling} spelling): max error of max|ref| ${errors.map((e) => e.toExponential(2)).join(", ")}`);
    }
  }
});
