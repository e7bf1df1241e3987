// Sampling tokens/s of the WebAssembly CPU backend in Node, for one preset and thread count, with
// the KV cache (decoding on the f32 weights, then on the int8 lever's copy: a measurement of the
// path, on seeded weights nobody checked here, as sample.js --levers int8 on WebGPU) and with the
// full window it replaced; prints one JSON array. Driven by
// bench/bench_sample.py, which compiles cpu.wasm and bundles this file with the helper-thread script.
//   node cpu_sample_node.mjs <cpu.wasm> <preset id> <threads> <prompt file> <tokens> <temperature> <top-k> [full]
import { readFileSync } from "node:fs";
import { Worker } from "node:worker_threads";
import { createCpuBackend } from "../webapp/cpu/backend";
import type { WorkerLike } from "../webapp/cpu/threads";
import { preset } from "../webapp/engine/model";
import { startTrainer } from "../webapp/engine/trainer";

const [wasmPath, id, threadArg, promptPath, tokens, temperature, topK, full] = process.argv.slice(2);
const { model, train } = preset(id);
const workerUrl = new URL("./thread_worker.mjs", import.meta.url);
const backend = await createCpuBackend(model, { wasm: readFileSync(wasmPath), threads: Number(threadArg), spawn: () => new Worker(workerUrl) as unknown as WorkerLike });
const trainer = await startTrainer(backend, model, train);
const prompt = readFileSync(promptPath);
const results = [];
const paths = Object.entries({ "KV cache": { int8: false, fullWindow: false }, "KV cache, int8": { int8: true, fullWindow: false }, "full window": { int8: false, fullWindow: true } })
  .filter(([, { fullWindow }]) => !fullWindow || full === "full");
// Every path once untimed first (the full window for 64 bytes): V8 compiles a module's functions
// quickly, then again optimised once they run hot, and the path timed first would pay for all.
for (const [, { int8, fullWindow }] of paths) {
  backend.sampleInt8 = int8;
  await trainer.sample(prompt, { temperature: Number(temperature), topK: Number(topK), maxTokens: fullWindow ? 64 : Number(tokens), seed: 2, fullWindow }, () => {});
}
for (const [path, { int8, fullWindow }] of paths) {
  // The int8 copy was made at the first decode on int8, before the clock starts: in the app it is
  // made by the held-out check that precedes sampling on it (levers/int8 chooseInt8).
  backend.sampleInt8 = int8;
  const opts = { temperature: Number(temperature), topK: Number(topK), maxTokens: Number(tokens), seed: 1, fullWindow };
  const start = performance.now();
  const out = await trainer.sample(prompt, opts, () => {});
  const seconds = (performance.now() - start) / 1000;
  const refresh = int8 ? { int8_refresh_ms: backend.int8RefreshMs } : {};
  results.push({ preset: id, threads: backend.threads, simd: backend.relaxed ? "relaxed" : "plain", device: backend.device, path, tokens: out.length, seconds, tokens_per_s: out.length / seconds, ...refresh });
  console.error(`wasm ${id} ${backend.device} ${path}: ${(out.length / seconds).toFixed(0)} tok/s${int8 ? `, the int8 copy made in ${backend.int8RefreshMs.toFixed(0)} ms` : ""}`);
}
trainer.dispose();
console.log(JSON.stringify(results));
