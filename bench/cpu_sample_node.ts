// Sampling tokens/s of the WebAssembly CPU backend in Node, for one preset and thread count, with
// the KV cache and with the full window it replaced; prints one JSON array. Driven by
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
for (const fullWindow of full === "full" ? [false, true] : [false]) {
  const opts = { temperature: Number(temperature), topK: Number(topK), maxTokens: Number(tokens), seed: 1, fullWindow };
  const start = performance.now();
  const out = await trainer.sample(prompt, opts, () => {});
  const seconds = (performance.now() - start) / 1000;
  results.push({ preset: id, threads: backend.threads, simd: backend.relaxed ? "relaxed" : "plain", device: backend.device, path: fullWindow ? "full window" : "KV cache", tokens: out.length, seconds, tokens_per_s: out.length / seconds });
  console.error(`wasm ${id} ${backend.device} ${fullWindow ? "full window" : "KV cache"}: ${(out.length / seconds).toFixed(0)} tok/s`);
}
trainer.dispose();
console.log(JSON.stringify(results));
