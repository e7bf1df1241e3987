// Fine-tuning (a LoRA adapter with facts.json lora's defaults on a frozen base) beside full
// training of the same model on the WebAssembly CPU backend in Node, for one preset and thread
// count: tokens/s, seconds per step and resident memory of each; prints one JSON object. Driven by
// bench/bench_lora.py, which compiles cpu.wasm and bundles this file with the helper-thread script.
//   node [--experimental-wasm-relaxed-simd] lora_node.mjs <cpu.wasm> <seconds per run> <rounds> <preset id> <threads>
// Both backends live in this one process and their timed runs alternate, round after round, so
// that both see the same machine: these hosts are shared and change speed from minute to minute.
import { readFileSync } from "node:fs";
import { Worker } from "node:worker_threads";
import { createCpuBackend } from "../webapp/cpu/backend";
import type { WorkerLike } from "../webapp/cpu/threads";
import { adapterLayout, initAdapter, LORA, type LoraSettings } from "../webapp/engine/lora";
import { initParams, preset } from "../webapp/engine/model";

const [wasmPath, seconds, rounds, id, threadArg] = process.argv.slice(2);
const wasm = readFileSync(wasmPath);
const workerUrl = new URL("./thread_worker.mjs", import.meta.url);
const { model, train } = preset(id);
const lora: LoraSettings = { rank: LORA.rank, alpha: LORA.alpha, targets: LORA.targets as LoraSettings["targets"] };
const make = (withLora: boolean) => createCpuBackend(model, {
  wasm, threads: Number(threadArg), spawn: () => new Worker(workerUrl) as unknown as WorkerLike, ...(withLora ? { lora } : {}),
});
const base = initParams(model, 1);
const full = await make(false);
await full.setState({ params: base, step: 0 });
const finetune = await make(true);
await finetune.setState({ params: base, step: 0 });
await finetune.adapter!.setState({ params: initAdapter(model, lora, 2), step: 0 });

const n = train.batch_size * model.block_size;
const x = Int32Array.from({ length: n }, (_, i) => (i * 7919) % 256);
const y = Int32Array.from({ length: n }, (_, i) => (i * 104729) % 256);
const modes = { full: { backend: full, lr: train.lr }, finetune: { backend: finetune, lr: LORA.lr } };
const out: Record<string, { resident_bytes: number; rounds: { steps: number; seconds: number }[] }> = {};
for (const [mode, { backend, lr }] of Object.entries(modes)) {
  await backend.trainStep(x, y, lr); // warm-up: memory growth to the step's size, JIT tier-up
  out[mode] = { resident_bytes: backend.residentBytes, rounds: [] };
}
for (let r = 0; r < Number(rounds); r++) {
  for (const [mode, { backend, lr }] of Object.entries(modes)) {
    let steps = 0;
    const start = performance.now();
    do {
      await backend.trainStep(x, y, lr);
      steps++;
    } while (performance.now() - start < Number(seconds) * 1000);
    out[mode].rounds.push({ steps, seconds: (performance.now() - start) / 1000 });
  }
}
const results = Object.fromEntries(Object.entries(out).map(([mode, { resident_bytes, rounds: rs }]) => {
  const steps = rs.reduce((s, r) => s + r.steps, 0), elapsed = rs.reduce((s, r) => s + r.seconds, 0);
  return [mode, {
    steps, seconds_per_step: elapsed / steps, tokens_per_s: steps * n / elapsed, resident_bytes,
    rounds_tokens_per_s: rs.map((r) => r.steps * n / r.seconds),
  }];
}));
const adapterParams = adapterLayout(model, lora).reduce((s, t) => s + t.size, 0);
full.dispose();
finetune.dispose();
console.log(JSON.stringify({
  preset: id, threads: full.threads, simd: full.relaxed ? "relaxed" : "plain", device: full.device, tokens_per_step: n,
  lora, adapter_params: adapterParams, adapter_bytes: adapterParams * Float32Array.BYTES_PER_ELEMENT, ...results,
}));
