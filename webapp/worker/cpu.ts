// Registers the WebAssembly backend with the engine. The module's bytes are
// fetched once, and the CPU levers' verdicts are kept with them (levers/gate.ts),
// so the capability check and every backend share one run of each gate; helper
// threads run this worker's own script.
import { cpuMemory, createCpuBackend } from "../cpu/backend";
import { registerBackend } from "../engine/index";
import type { ModelConfig } from "../engine/types";
import type { Verdict } from "../levers/gate";
import { ID as RELAXED_SIMD, gatedRelaxed } from "../levers/relaxed-simd/lever";

let wasmUrl = "";
let wasm: Promise<ArrayBuffer> | null = null;

function bytes(): Promise<ArrayBuffer> {
  wasm ??= fetch(wasmUrl).then((res) => {
    if (!res.ok) throw new Error(`the WebAssembly module could not be loaded (HTTP ${res.status})`);
    return res.arrayBuffer();
  });
  wasm.catch(() => (wasm = null));
  return wasm;
}

/** The verdicts of the CPU backend's levers here: its pills, and what its backends will run. */
export async function cpuVerdicts(): Promise<Record<string, Verdict>> {
  if (!wasmUrl) return {};
  try {
    return { [RELAXED_SIMD]: (await gatedRelaxed(await bytes())).verdict };
  } catch (e) {
    return { [RELAXED_SIMD]: { pass: false, reason: `the WebAssembly module could not be checked (${(e as Error).message})`, errors: {}, cached: false } };
  }
}

/** The threads a CPU backend of this shape runs: a memory shared between threads holds less than one thread's, so a model that needs more runs on one. */
function cpuThreads(model: ModelConfig, batch: number): number {
  const { bytes: need, sharedLimit } = cpuMemory(model, batch);
  return self.crossOriginIsolated && need <= sharedLimit ? Math.max(1, self.navigator.hardwareConcurrency || 1) : 1;
}

/** The optional paths (Backend.paths) a CPU backend of this shape would run here. */
export async function cpuPaths(model: ModelConfig, batch: number): Promise<string[]> {
  const relaxed = (await cpuVerdicts())[RELAXED_SIMD]?.pass ? [RELAXED_SIMD] : [];
  return [...(cpuThreads(model, batch) > 1 ? ["threads"] : []), ...relaxed];
}

/** `interrupt`: the page's request flag, which every CPU backend reads between the jobs of a step. */
export function registerCpuBackend(url: string, interrupt: Int32Array | null): void {
  wasmUrl = url;
  registerBackend("wasm", async (model, train, opts) => {
    if (!wasmUrl) throw new Error("this page was built without the WebAssembly backend");
    return createCpuBackend(model, {
      wasm: await bytes(),
      threads: cpuThreads(model, train.batch_size),
      workerUrl: self.location.href,
      interrupt: interrupt ?? undefined,
      optimizer: { beta1: train.beta1, beta2: train.beta2, eps: train.eps, weight_decay: train.weight_decay, grad_clip: train.grad_clip },
      lora: opts.lora,
    });
  });
}
