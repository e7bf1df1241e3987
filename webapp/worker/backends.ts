// Making backends, with one spare kept warm: the backend the time-per-step
// measurement built is reused when a run starts with the same shape, batch and
// optimizer, since building one (compiling every GPU pipeline) can take longer
// than many training steps. A WebGPU backend runs the kernels of the GPU
// levers that passed the numerics gate on this adapter.
import { F32_KERNELS, type KernelTable } from "../engine/gpu/kernels";
import { type BackendOptions, createBackend } from "../engine/index";
import type { LoraSettings } from "../engine/lora";
import type { Backend, BackendKind, ModelConfig, TrainConfig } from "../engine/types";
import type { Verdict } from "../levers/gate";
import { gpuLevers } from "../levers/gpu";
import { ID as INT8, gatedInt8 } from "../levers/int8/lever";
import { requestAdapter } from "./caps";
import type { BackendChoice } from "./protocol";

/** The backend kind to try first, and whether falling back to the CPU is allowed; `best`: what "auto" was found to mean here (best.ts). */
async function resolveKind(choice: BackendChoice, best: BackendKind | null): Promise<{ kind: BackendKind; fallback: boolean }> {
  if (choice !== "auto") return { kind: choice, fallback: false };
  if (best) return { kind: best, fallback: true };
  const { adapter } = await requestAdapter();
  return { kind: adapter && !adapter.info.isFallbackAdapter ? "webgpu" : "wasm", fallback: true };
}

/** The GPU levers on this worker's adapter (each gate runs once; levers/gate.ts remembers the verdict). */
async function gated(): Promise<{ verdicts: Record<string, Verdict>; options: BackendOptions }> {
  const { adapter } = await requestAdapter();
  if (!adapter) return { verdicts: {}, options: {} };
  const { verdicts, kernels, features } = await gpuLevers({ gpu: navigator.gpu }, adapter);
  const levers = Object.keys(verdicts).filter((id) => verdicts[id].pass);
  // The int8 lever's kernels serve sampling alone: a path the backend takes once the weights pass their own check.
  const int8 = await gatedInt8({ gpu: navigator.gpu }, adapter);
  if (int8) verdicts[INT8] = int8.verdict;
  return { verdicts, options: { kernels, features, levers, int8: int8?.kernels ?? undefined } };
}

/** The verdicts of the GPU levers here, for the page's list. */
export const gpuVerdicts = async () => (await gated()).verdicts;
/** What a WebGPU backend would run here: its kernel table (the levers' that passed over the plain ones) and its optional paths (Backend.paths). */
export async function gpuRun(): Promise<{ kernels: KernelTable; paths: string[] }> {
  const { options } = await gated();
  return { kernels: { ...F32_KERNELS, ...options.kernels }, paths: options.levers ?? [] };
}

function key(kind: BackendKind, model: ModelConfig, train: TrainConfig, lora?: LoraSettings): string {
  const { batch_size, beta1, beta2, eps, weight_decay, grad_clip } = train;
  return JSON.stringify([kind, model, batch_size, beta1, beta2, eps, weight_decay, grad_clip, lora ?? null]);
}

export class Backends {
  private spare: { key: string; backend: Backend } | null = null;
  /** What "auto" means on this device, once measured (best.ts). */
  best: BackendKind | null = null;

  constructor(private warn: (text: string) => void) {}

  /** The kind a get() for `choice` tries first. */
  async kindFor(choice: BackendChoice): Promise<BackendKind> {
    return (await resolveKind(choice, this.best)).kind;
  }

  /**
   * A backend of the chosen kind (one that fine-tunes an adapter with `lora`); "auto" falls back
   * to the CPU when WebGPU fails, saying why.
   */
  async get(choice: BackendChoice, model: ModelConfig, train: TrainConfig, quiet = false, lora?: LoraSettings): Promise<Backend> {
    const { kind, fallback } = await resolveKind(choice, this.best);
    const spare = this.take(key(kind, model, train, lora));
    if (spare) return spare;
    this.clear(); // free its memory before building another
    try {
      return await createBackend(kind, model, train, { ...(kind === "webgpu" ? (await gated()).options : {}), lora });
    } catch (e) {
      if (kind !== "webgpu" || !fallback) throw e;
      if (!quiet) this.warn(`WebGPU could not start (${(e as Error).message}); using the CPU instead.`);
      return this.take(key("wasm", model, train, lora)) ?? createBackend("wasm", model, train, { lora });
    }
  }

  /** Keeps a backend nobody uses any more for a later get() of the same configuration. */
  keep(backend: Backend, model: ModelConfig, train: TrainConfig): void {
    this.clear();
    this.spare = { key: key(backend.kind, model, train), backend };
  }

  clear(): void {
    this.spare?.backend.dispose();
    this.spare = null;
  }

  private take(k: string): Backend | null {
    if (this.spare?.key !== k) return null;
    const b = this.spare.backend;
    this.spare = null;
    return b;
  }
}
