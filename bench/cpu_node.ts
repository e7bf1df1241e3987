// Training tokens/s of the WebAssembly CPU backend in Node, per preset and
// thread count; prints one JSON object. Driven by bench/bench_cpu.py, which
// compiles cpu.wasm and bundles this file with the helper-thread script.
//   node cpu_node.mjs <cpu.wasm> <seconds per case> <preset ids,...> <thread counts,...> [spin ms]
import { readFileSync } from "node:fs";
import { Worker } from "node:worker_threads";
import { createCpuBackend } from "../webapp/cpu/backend";
import type { WorkerLike } from "../webapp/cpu/threads";
import { initParams, preset } from "../webapp/engine/model";

const [wasmPath, seconds, presetIds, threadCounts, spin] = process.argv.slice(2);
const spinMs = spin === undefined ? undefined : Number(spin);
const wasm = readFileSync(wasmPath);
const workerUrl = new URL("./thread_worker.mjs", import.meta.url);
const results = [];
for (const id of presetIds.split(",")) {
  const { model, train } = preset(id);
  for (const threads of threadCounts.split(",").map(Number)) {
    const backend = await createCpuBackend(model, { wasm, threads, spinMs, spawn: () => new Worker(workerUrl) as unknown as WorkerLike });
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
    results.push({ preset: id, threads: backend.device, steps, seconds_per_step: elapsed / steps, tokens_per_s: (steps * n) / elapsed });
    console.error(`wasm ${id} ${backend.device}: ${(steps * n / elapsed).toFixed(0)} tok/s (${(elapsed / steps * 1000).toFixed(0)} ms/step)`);
  }
}
console.log(JSON.stringify(results));
