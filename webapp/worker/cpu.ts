// Registers the WebAssembly backend with the engine. The module's bytes are
// fetched once, and the relaxed-SIMD gate's verdict is kept with them (gate.ts),
// so the capability check and every backend share one run of the gate; helper
// threads run this worker's own script.
import { cpuMemory, createCpuBackend } from "../cpu/backend";
import { gatedRelaxed } from "../cpu/gate";
import { registerBackend } from "../engine/index";

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

/** Whether the CPU backend will run its relaxed-SIMD build here (the engine has it and it passes the gate). */
export async function cpuRelaxedSimd(): Promise<boolean> {
  if (!wasmUrl) return false;
  try {
    return (await gatedRelaxed(await bytes())) !== null;
  } catch {
    return false;
  }
}

/** `interrupt`: the page's request flag, which every CPU backend reads between the jobs of a step. */
export function registerCpuBackend(url: string, interrupt: Int32Array | null): void {
  wasmUrl = url;
  registerBackend("wasm", async (model, train) => {
    if (!wasmUrl) throw new Error("this page was built without the WebAssembly backend");
    // A memory shared between threads holds less than one thread's: a model that needs more runs on one.
    const { bytes: need, sharedLimit } = cpuMemory(model, train.batch_size);
    const threads = self.crossOriginIsolated && need <= sharedLimit ? Math.max(1, self.navigator.hardwareConcurrency || 1) : 1;
    return createCpuBackend(model, {
      wasm: await bytes(),
      threads,
      workerUrl: self.location.href,
      interrupt: interrupt ?? undefined,
      optimizer: { beta1: train.beta1, beta2: train.beta2, eps: train.eps, weight_decay: train.weight_decay, grad_clip: train.grad_clip },
    });
  });
}
