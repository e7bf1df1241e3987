// The relaxed-SIMD build against the plain one over a whole training run: the
// same preset, corpus, batches and learning-rate schedule, one build after the
// other on one thread. Prints one JSON object: {plain: [loss...], relaxed: [...]}.
// Driven by curve.py beside it.
//   node [--experimental-wasm-relaxed-simd] curve.mjs <cpu.wasm> <preset id> <steps> <corpus.txt>
import { readFileSync } from "node:fs";
import { createCpuBackend } from "../../cpu/backend";
import { preset } from "../../engine/model";
import { startTrainer } from "../../engine/trainer";

const [wasmPath, id, steps, corpusPath] = process.argv.slice(2);
const wasm = readFileSync(wasmPath);
const corpus = new Uint8Array(readFileSync(corpusPath));
const { model, train } = preset(id);
const curves: Record<string, number[]> = {};
for (const relaxed of [false, true]) {
  const backend = await createCpuBackend(model, { wasm, threads: 1, relaxed });
  if (backend.relaxed !== relaxed) throw new Error("the relaxed-SIMD build is unavailable or gated off here (Node 20 needs --experimental-wasm-relaxed-simd)");
  const trainer = await startTrainer(backend, model, train);
  await trainer.setCorpus("corpus", corpus);
  const losses: number[] = [];
  for (let i = 0; i < Number(steps); i++) losses.push(await trainer.trainStep());
  backend.dispose();
  curves[relaxed ? "relaxed" : "plain"] = losses;
  console.error(`${relaxed ? "relaxed" : "plain"}: loss ${losses[0].toFixed(4)} -> ${losses[losses.length - 1].toFixed(4)}`);
}
console.log(JSON.stringify(curves));
