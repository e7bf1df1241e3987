// The engine's front door: make a backend, start a trainer or load one from a
// .tinygpt file. The worker and the Node CLI use only these.

import type { Backend, BackendKind, ModelConfig, TrainConfig } from "./types";
import { GPTTrainer, type TrainerInit, resumeTrainer, startTrainer } from "./trainer";
export { fineTuneTrainer } from "./trainer";
import { readCheckpoint } from "./checkpoint";
import { defaultTrainConfig } from "./model";
import { type GpuBackendOptions, createGpuBackend } from "./gpu/backend";
import type { LoraSettings } from "./lora";

export type { Backend, BackendKind, ModelConfig, TrainConfig, Trainer } from "./types";
export { GPTTrainer } from "./trainer";
export { CheckpointError, planBlob, readCheckpoint, writeCheckpoint, type Checkpoint } from "./checkpoint";
export { DeviceLostError } from "./gpu/device";
export { Interrupted } from "./interrupt";
export { GpuBackend } from "./gpu/backend";
export { paramCount, preset, presets, defaultTrainConfig, learningRate, tensorLayout, type Preset } from "./model";

export interface BackendOptions {
  /** WebGPU: an adapter already requested (the worker's), else one is requested from `gpu`. */
  adapter?: GPUAdapter | null;
  /** WebGPU: the GPU object (navigator.gpu in a browser; `create([])` from npm webgpu in Node). */
  gpu?: GPU;
  /** WebGPU: replacement kernels, the tables of GPU levers that passed the numerics gate (levers/gpu.ts). */
  kernels?: GpuBackendOptions["kernels"];
  /** WebGPU: the adapter features those kernels need. */
  features?: GpuBackendOptions["features"];
  /** WebGPU: the ids of the levers those kernels are (Backend.paths). */
  levers?: GpuBackendOptions["levers"];
  /** WebGPU: the int8 sampling lever's kernels, where they passed their gate (levers/int8). */
  int8?: GpuBackendOptions["int8"];
  /** Either: fine-tune an adapter with these settings on a frozen base (Backend.adapter). */
  lora?: LoraSettings;
}

export type BackendFactory = (model: ModelConfig, train: TrainConfig, opts: BackendOptions) => Promise<Backend>;

// The WebAssembly backend registers itself from the worker (webapp/worker/cpu.ts),
// which knows where its module and thread script live; hosts that never use it
// (the Node CLI) do not bundle it.
const factories = new Map<BackendKind, BackendFactory>([
  ["webgpu", (model, train, opts) => createGpuBackend(model, train, { gpu: opts.gpu ?? globalThis.navigator?.gpu, adapter: opts.adapter, kernels: opts.kernels, features: opts.features, levers: opts.levers, int8: opts.int8, lora: opts.lora })],
]);

export function registerBackend(kind: BackendKind, factory: BackendFactory): void {
  factories.set(kind, factory);
}

export async function createBackend(kind: BackendKind, model: ModelConfig, train: TrainConfig, opts: BackendOptions = {}): Promise<Backend> {
  const factory = factories.get(kind);
  if (!factory) throw new Error(`no ${kind} backend is available in this host`);
  return factory(model, train, opts);
}

/** A fresh run: parameters initialised from train.seed. */
export async function createTrainer(backend: Backend, model: ModelConfig, train: TrainConfig, init?: TrainerInit): Promise<GPTTrainer> {
  return startTrainer(backend, model, train, init);
}

/**
 * A run continued from .tinygpt bytes. `makeBackend` gets the file's model
 * config (the backend's buffers depend on it) and the training config to use:
 * `train` if given, else the file's, else the optimizer defaults.
 */
export async function loadTrainer(
  bytes: Uint8Array,
  makeBackend: (model: ModelConfig, train: TrainConfig) => Promise<Backend>,
  train?: TrainConfig,
  init?: TrainerInit,
): Promise<GPTTrainer> {
  const ck = readCheckpoint(bytes);
  // A gallery file may carry no training config; sampling needs none, and
  // further training then starts from the optimizer defaults.
  const config = train ?? ck.train ?? defaultTrainConfig(16, 1e-3);
  const backend = await makeBackend(ck.model, config);
  return resumeTrainer(backend, ck, config, init);
}
