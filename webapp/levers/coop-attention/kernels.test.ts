// The coop-attention lever's kernels (shaders/levers/coop-attention/attention.wgsl) against the plain
// f32 kernels on the same adapter, one dispatch each: the forward's output and lse, and dQ, dK, dV
// from an upstream gradient the size of a mean-loss gradient (about 1/(B·T): all subnormal in f16
// unless scaled), on heads of 64 columns (Huge's), 16, and 40 (not a multiple of the matrices' 16),
// with contexts that are and are not multiples of the kernels' 32 rows, in both WGSL spellings
// (coop-matrix/spelling.ts). Only an adapter with
// subgroup matrices runs it (the H200 through Dawn, with TINYGPT_DAWN_F16_TOGGLE=1).
import assert from "node:assert/strict";
import { test } from "node:test";
import facts from "../../../tinygpt/facts.json";
import { gpu, noGpu } from "../../engine/test/dawn";
import { requestGpu } from "../../engine/gpu/device";
import { type AnyOp, F32_KERNELS, type KernelTable, type Sizes } from "../../engine/gpu/kernels";
import { dispatchOnce } from "../../engine/gpu/recorder";
import { Rng } from "../../engine/rng";
import { leverFeatures, tableOn } from "../gpu";
import { COOP_ATTENTION } from "./lever";
import { olderKernel, respelled } from "../coop-matrix/spelling";

const TOLERANCE = facts.kernel_tolerance["coop-attention"].max;

const adapter = noGpu ? null : await gpu.requestAdapter();
const table = adapter ? tableOn(COOP_ATTENTION, adapter, gpu.wgslLanguageFeatures) : null;
const own = table ? requestGpu(gpu, undefined, leverFeatures(COOP_ATTENTION)) : null;
const skip = noGpu ?? (table ? false : `the adapter lacks ${leverFeatures(COOP_ATTENTION).join(", ")} or a table for it`);
const log = (line: string) => process.stderr.write(`${line}\n`);

const spellings: [string, Partial<KernelTable>][] = table ? [["templated", table], ["older", respelled(table, olderKernel)]] : [];
let current: Partial<KernelTable> = {};

async function run(op: AnyOp, sizes: Sizes, inputs: Record<number, Float32Array>, outputs: Record<number, number>): Promise<Record<number, Float32Array>> {
  const bindings = { ...inputs, ...Object.fromEntries(Object.entries(outputs).map(([i, n]) => [i, new Float32Array(n).fill(NaN)])) };
  return dispatchOnce((await own!).device, { ...F32_KERNELS, ...current } as KernelTable, op, sizes, bindings, Object.keys(outputs).map(Number));
}

/** max|got - want| / max|want| (a NaN fails). */
function error(got: Float32Array, want: Float32Array): number {
  let diff = 0, top = 0;
  for (let i = 0; i < want.length; i++) {
    const d = Math.abs(got[i] - want[i]);
    diff = Number.isNaN(d) ? NaN : Math.max(diff, d);
    top = Math.max(top, Math.abs(want[i]));
  }
  return diff / top;
}

const SHAPES = [
  { B: 2, T: 256, C: 384, n_head: 6 }, // Huge's heads
  { B: 3, T: 45, C: 32, n_head: 2 }, // 16 columns, a context of one chunk and a part
  { B: 2, T: 70, C: 120, n_head: 3 }, // 40 columns
];

test("coop-attention: attention's forward, dQ, dK and dV match the plain kernels on heads of 64, 16 and 40 columns, in both spellings", { skip }, async () => {
  for (const [spelling, t] of spellings) for (const sizes of SHAPES) {
    current = t;
    const { B, T, C, n_head } = sizes;
    const rng = new Rng(20261203);
    const n = B * T * C;
    // Scores of a few units, as trained models have; an upstream gradient of a mean over B·T rows.
    const draw = (scale: number) => Float32Array.from({ length: n }, () => (rng.uniform() * 2 - 1) * scale);
    const [q, k, v] = [draw(2), draw(2), draw(1)];
    const dy = draw(1 / (B * T));
    const stats = B * n_head * T;
    const plain = await run("attention_forward", sizes, { 1: q, 2: k, 3: v }, { 4: n, 5: stats });
    const matrix = await run("attention_forward_matrix", sizes, { 1: q, 2: k, 3: v }, { 4: n, 5: stats });
    const { 7: delta } = await run("attention_backward_delta", sizes, { 6: dy, 11: plain[4] }, { 7: stats });
    const inputs = { 1: q, 2: k, 3: v, 6: dy, 12: plain[5], 13: delta };
    const dq = [await run("attention_backward_dq", sizes, inputs, { 8: n }), await run("attention_backward_dq_matrix", sizes, inputs, { 8: n })];
    const dkdv = [await run("attention_backward_dkdv", sizes, inputs, { 9: n, 10: n }), await run("attention_backward_dkdv_matrix", sizes, inputs, { 9: n, 10: n })];
    const errors = {
      y: error(matrix[4], plain[4]),
      lse: error(matrix[5], plain[5]),
      dq: error(dq[1][8], dq[0][8]),
      dk: error(dkdv[1][9], dkdv[0][9]),
      dv: error(dkdv[1][10], dkdv[0][10]),
    };
    const shape = `B ${B}, T ${T}, C ${C}, ${n_head} heads, ${spelling} spelling`;
    log(`coop-attention ${shape}: max error of max|plain| ${Object.entries(errors).map(([w, e]) => `${w} ${e.toExponential(2)}`).join(", ")}`);
    for (const [what, e] of Object.entries(errors)) assert.ok(e <= TOLERANCE, `${what} (${shape}): max error ${e.toPrecision(3)} of max|plain| exceeds ${TOLERANCE}`);
  }
});
