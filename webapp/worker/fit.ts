// Whether a shape fits this device before anything is allocated: the CPU
// backend's WebAssembly memory and the GPU's buffer limits, computed by the
// code that lays the buffers out, with the limit named.
import { cpuMemory } from "../cpu/backend";
import { gpuFit } from "../engine/gpu/plan";
import type { ModelConfig } from "../engine/types";
import type { LoraSettings } from "../engine/lora";
import { type Backends, gpuRun } from "./backends";
import { requestAdapter } from "./caps";
import { cpuPaths } from "./cpu";
import type { BackendChoice } from "./protocol";

const gib = (bytes: number) => `${(bytes / 2 ** 30).toFixed(2)} GiB`;

export interface Fit {
  /** Why the chosen backend cannot train the shape here, the limit named. */
  problem: string | null;
  /** How it will run anyway. */
  note: string | null;
  /** What the backend that would train it holds while training, from its own allocation code; null where unknown (no adapter). */
  bytes: number | null;
  kind: "webgpu" | "wasm";
  /** The optional paths (Backend.paths) that backend would run: the page's pills before Start. */
  paths: string[];
}

/** The fit of training `model` at `batch` on `choice`, or with `lora` of fine-tuning it. */
export async function checkFit(backends: Backends, model: ModelConfig, batch: number, choice: BackendChoice, lora?: LoraSettings): Promise<Fit> {
  const memory = cpuMemory(model, batch, undefined, lora);
  const cpu = {
    problem: memory.bytes > memory.limit ? `On the CPU this needs ${gib(memory.bytes)} of WebAssembly memory, more than one WebAssembly memory can hold (${gib(memory.limit)}).` : null,
    note: memory.bytes > memory.sharedLimit && memory.bytes <= memory.limit && self.crossOriginIsolated
      ? `On the CPU this needs ${gib(memory.bytes)}, more than a memory shared between threads can hold (${gib(memory.sharedLimit)}), so it trains on one thread.`
      : null,
  };
  const onCpu = { ...cpu, bytes: memory.bytes, kind: "wasm", paths: await cpuPaths(model, batch) } as const;
  if ((await backends.kindFor(choice)) === "wasm") return onCpu;
  const { adapter } = await requestAdapter();
  // Planned with the kernels the backend would run: a lever's may store other element sizes.
  const { kernels, paths } = await gpuRun();
  const fit = adapter ? gpuFit(model, batch, adapter.limits, kernels, lora) : null;
  if (!fit?.problem) return { problem: null, note: null, bytes: fit?.bytes ?? null, kind: "webgpu", paths };
  const gpu = `Too large for this GPU: ${fit.problem}.`;
  // Best available falls back to the CPU when the GPU backend cannot be built.
  if (choice === "auto" && !cpu.problem) return { ...onCpu, note: `${gpu} Best available trains it on the CPU instead.${cpu.note ? ` ${cpu.note}` : ""}` };
  return { problem: cpu.problem && choice === "auto" ? `${gpu} ${cpu.problem}` : gpu, note: null, bytes: fit.bytes, kind: "webgpu", paths };
}
