// Registers the WebAssembly backend with the engine. The module's bytes are
// fetched once; helper threads run this worker's own script.
import { createCpuBackend } from "../cpu/backend";
import { registerBackend } from "../engine/index";

export function registerCpuBackend(wasmUrl: string): void {
  let wasm: Promise<ArrayBuffer> | null = null;
  const bytes = () => {
    wasm ??= fetch(wasmUrl).then((res) => {
      if (!res.ok) throw new Error(`the WebAssembly module could not be loaded (HTTP ${res.status})`);
      return res.arrayBuffer();
    });
    wasm.catch(() => (wasm = null));
    return wasm;
  };
  registerBackend("wasm", async (model, train) => {
    if (!wasmUrl) throw new Error("this page was built without the WebAssembly backend");
    const threads = self.crossOriginIsolated ? Math.max(1, self.navigator.hardwareConcurrency || 1) : 1;
    return createCpuBackend(model, {
      wasm: await bytes(),
      threads,
      workerUrl: self.location.href,
      optimizer: { beta1: train.beta1, beta2: train.beta2, eps: train.eps, weight_decay: train.weight_decay, grad_clip: train.grad_clip },
    });
  });
}
