// The WebAssembly backend's products with a weight transposed (input gradients, the tied head's
// logits), two ways in one process: matmul_nt reading W [M, K] in place (what the backend runs),
// and the transposed copy it replaced (transpose W, then matmul on W^T). Each shape is checked
// (the two agree to 1e-5, relative) before it is timed; the figures are the median of 3 rounds of
// alternating timings, one thread. The shapes are Huge's at a 1024-row micro-batch, a decode's
// head and a Tiny projection.
//   node bench/cpu_matmul_nt.mjs dist/assets/cpu-*.wasm
import { readFileSync } from "node:fs";

const memory = new WebAssembly.Memory({ initial: 4096, maximum: 65536 });
const { instance } = await WebAssembly.instantiate(readFileSync(process.argv[2]), { env: { memory } });
const ex = instance.exports;
const f32 = new Float32Array(memory.buffer);
let top = Math.ceil(ex.heap_base() / 64) * 64;
const alloc = (n) => {
  const at = top;
  top += Math.ceil((n * 4) / 64) * 64;
  return at;
};
const fill = (at, n, seed) => {
  for (let i = 0, s = seed; i < n; i++) f32[at / 4 + i] = ((s = (s * 1103515245 + 12345) >>> 0) / 2 ** 32) - 0.5;
};
const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const SHAPES = [ // rows, K, M: out [rows, M] = x [rows, K] W^T
  ["fc_out's input gradient", 1024, 384, 1536], ["fc_in's input gradient", 1024, 1536, 384], ["o_proj's input gradient", 1024, 384, 384],
  ["the head's logits", 1024, 384, 256], ["a decode's logits", 1, 384, 256], ["Tiny fc_in's input gradient", 1024, 256, 64],
];
for (const [label, rows, K, M] of SHAPES) {
  const x = alloc(rows * K), w = alloc(M * K), wT = alloc(M * K), copied = alloc(rows * M), inPlace = alloc(rows * M);
  fill(x, rows * K, 1);
  fill(w, M * K, 2);
  const viaCopy = () => {
    ex.transpose(wT, w, M, K, 0, M);
    ex.matmul(copied, x, wT, 0, 0, K, 1, K, M, 0, rows);
  };
  const nt = () => ex.matmul_nt(inPlace, x, w, 0, K, M, 0, rows);
  viaCopy();
  nt();
  let err = 0, norm = 0;
  for (let i = 0; i < rows * M; i++) {
    err += (f32[copied / 4 + i] - f32[inPlace / 4 + i]) ** 2;
    norm += f32[copied / 4 + i] ** 2;
  }
  const rel = Math.sqrt(err / norm);
  if (!(rel < 1e-5)) throw new Error(`${label}: matmul_nt differs from matmul on W^T (relative error ${rel})`);
  const reps = Math.max(1, Math.round(3e7 / (rows * K * M)));
  const ms = (f) => {
    const t = performance.now();
    for (let r = 0; r < reps; r++) f();
    return (performance.now() - t) / reps;
  };
  const rounds = { viaCopy: [], nt: [] };
  for (let r = 0; r < 3; r++) {
    rounds.viaCopy.push(ms(viaCopy));
    rounds.nt.push(ms(nt));
  }
  const [a, b] = [median(rounds.viaCopy), median(rounds.nt)];
  const gflops = (t) => ((2 * rows * K * M) / t / 1e6).toFixed(1);
  console.log(`${label.padEnd(28)} ${rows}x${K} W^T ${K}x${M}: transpose + matmul ${a.toFixed(3)} ms (${gflops(a)} GFLOP/s), ` +
    `matmul_nt ${b.toFixed(3)} ms (${gflops(b)} GFLOP/s), ${(a / b).toFixed(2)}x; rel. difference ${rel.toExponential(1)}`);
}
