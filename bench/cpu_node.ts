// Training tokens/s of the WebAssembly CPU backend in Node, for one preset and
// thread count, per SIMD build; prints one JSON array. Driven by
// bench/bench_cpu.py (one process per case, so each case sits right beside its
// PyTorch run), which compiles cpu.wasm and bundles this file with the
// helper-thread script.
//   node [--experimental-wasm-relaxed-simd] cpu_node.mjs <cpu.wasm> <seconds per case> <preset id>
//     <threads> <simd: auto | plain | both> [spin ms]
// "auto" is what the app does: the relaxed-SIMD build where the engine has it
// and it passes the gate, else plain; each result says which ran.
import { readFileSync } from "node:fs";
import { Worker } from "node:worker_threads";
import { createCpuBackend } from "../webapp/cpu/backend";
import type { WorkerLike } from "../webapp/cpu/threads";
import { initParams, preset } from "../webapp/engine/model";

const [wasmPath, seconds, id, threadArg, simd, spin] = process.argv.slice(2);
const spinMs = spin === undefined ? undefined : Number(spin);
const wasm = readFileSync(wasmPath);
const workerUrl = new URL("./thread_worker.mjs", import.meta.url);
const results = [];
const { model, train } = preset(id);
const threads = Number(threadArg);
for (const relaxed of simd === "both" ? [true, false] : [simd !== "plain"]) {
  const backend = await createCpuBackend(model, {
    wasm, threads, relaxed, spinMs, spawn: () => new Worker(workerUrl) as unknown as WorkerLike,
  });
  if (simd === "both" && relaxed && !backend.relaxed) {
    backend.dispose();
    console.error(`wasm ${id}: relaxed SIMD unavailable or gated off here; plain only`);
    continue;
  }
  await backend.setState({ params: initParams(model, 1), step: 0 });
  const n = train.batch_size * model.block_size;
  const x = Int32Array.from({ length: n }, (_, i) => (i * 7919) % 256);
  const y = Int32Array.from({ length: n }, (_, i) => (i * 104729) % 256);
  await backend.trainStep(x, y, train.lr); // warm-up: memory growth, JIT tier-up
  let steps = 0;
  const start = performance.now();
  while (performance.now() - start < Number(seconds) * 1000 || steps < 2) {
    await backend.trainStep(x, y, train.lr);
    steps++;
  }
  const elapsed = (performance.now() - start) / 1000;
  backend.dispose();
  results.push({
    preset: id, threads: backend.threads, simd: backend.relaxed ? "relaxed" : "plain", device: backend.device, steps,
    seconds_per_step: elapsed / steps, tokens_per_s: (steps * n) / elapsed,
  });
  console.error(`wasm ${id} ${backend.device}: ${(steps * n / elapsed).toFixed(0)} tok/s (${(elapsed / steps * 1000).toFixed(0)} ms/step)`);
}
console.log(JSON.stringify(results));
