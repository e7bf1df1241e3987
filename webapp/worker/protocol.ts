// The messages between the page (webapp/app) and the training worker. One
// file so both sides agree; every message is a plain structured-clonable object.
import type { LoraSettings } from "../engine/lora";
import type { BackendKind, HistoryPoint, ModelConfig, SampleOptions, TrainConfig } from "../engine/types";
import type { Verdict } from "../levers/gate";
import type { Fit } from "./fit";

export interface AdapterInfo {
  vendor: string;
  architecture: string;
  device: string;
  description: string;
}

/** What this browser offers, detected in the worker (where training runs). */
export interface Caps {
  webgpu: boolean;
  adapter: AdapterInfo | null;
  features: string[];
  maxBufferMiB: number;
  gpuError: string | null; // why WebGPU is missing, when the browser says
  wasmSimd: boolean;
  /** The numerics gate's verdict on each lever of either backend here, by facts.levers id. */
  levers: Record<string, Verdict>;
  /** Whether the GPU levers were gated (the second post): a GPU lever without a verdict then cannot run here. */
  gpuChecked: boolean;
  crossOriginIsolated: boolean;
  threads: number; // logical cores the browser reports
}

export type BackendChoice = "auto" | "webgpu" | "wasm";

/** A corpus handed to the worker: the bytes travel with the message (transferred). */
export interface CorpusData {
  name: string;
  bytes: Uint8Array;
}

/** How often a run measures validation loss and saves its checkpoint, in steps. */
export interface Intervals {
  evalEvery: number;
  saveEvery: number;
}

export interface RunSettings {
  model: ModelConfig;
  train: TrainConfig;
  steps: number; // target step count
  intervals: Intervals;
  backend: BackendChoice;
}

export interface CheckpointInfo {
  id: string;
  step: number;
  model: ModelConfig;
  dataset: string | null;
  bytes: number;
  savedAt: string; // ISO time
  /** A fine-tuning run's base: what the user called it (its checkpoints are the adapter's). */
  base: string | null;
  busy: boolean; // open in another tab
  current: boolean; // the run loaded in this tab
}

/**
 * What the page writes into the shared request flag, slot 0 of an Int32Array
 * over a SharedArrayBuffer that it hands over in init, as REQUESTS index + 1.
 * Messages wait until the worker returns to its event loop; the flag is read
 * between steps and tokens and, by the CPU backend, between the jobs of a step
 * (engine/interrupt.ts). pause, stop and stopSample go as messages too (a page
 * that is not cross-origin isolated has no flag); measure ends a time-per-step
 * measurement for a command that needs the device.
 */
export const REQUESTS = ["pause", "stop", "stopSample", "measure"] as const;
export type Request = (typeof REQUESTS)[number];

/** paused: a run stopped short of its target by Pause, which Continue takes on (a new model needs Stop or Reset first). */
export type WorkerState = "empty" | "loading" | "ready" | "paused" | "training" | "sampling";

export type ToWorker =
  | { type: "ping"; id: number }
  | { type: "caps" }
  /** control: the shared request flag (SharedArrayBuffer), or null; gateFail: lever ids whose gate must fail (the page's ?gate-fail=a,b, for tests). */
  | { type: "init"; wasmUrl: string; control: Int32Array | null; gateFail: string[] }
  | { type: "measure"; key: string; model: ModelConfig; batch: number; backend: BackendChoice }
  /** Whether the shape fits this device's limits (worker/fit.ts); answered at once, nothing allocated. */
  | { type: "check"; key: string; model: ModelConfig; batch: number; backend: BackendChoice; lora?: LoraSettings }
  /** A new run of a fresh model. */
  | { type: "start"; settings: RunSettings; corpus: CorpusData }
  /** A new run from the loaded file's model (an import or a gallery model), trained further. */
  | { type: "continueFile"; settings: RunSettings; corpus: CorpusData }
  /** A new run that fine-tunes the loaded model with a new adapter: the model stays frozen. */
  | { type: "fineTune"; settings: RunSettings; lora: LoraSettings; corpus: CorpusData }
  | { type: "pause" }
  | { type: "resume"; steps: number; intervals: Intervals }
  | { type: "stop" }
  | { type: "reset" }
  /** adapter: with the loaded adapter's terms (the default), or false for its base alone. */
  | { type: "sample"; prompt: string; options: Required<Pick<SampleOptions, "temperature" | "topK" | "topP" | "seed" | "maxTokens">>; adapter?: boolean }
  | { type: "stopSample" }
  | { type: "export" }
  /** The loaded adapter folded into its base, exported as a plain model. */
  | { type: "merge" }
  /** A model file, still on disk: the worker reads its preamble and header before the rest; `ref` comes back in "imported". */
  | { type: "import"; name: string; file: Blob; backend: BackendChoice; ref: string }
  | { type: "listCheckpoints" }
  | { type: "openCheckpoint"; id: string; backend: BackendChoice; train: boolean; steps: number; intervals: Intervals }
  | { type: "deleteCheckpoint"; id: string };

/** The commands that need the device: each ends a time-per-step measurement in progress. */
export const NEEDS_DEVICE: ReadonlySet<ToWorker["type"]> = new Set(["start", "continueFile", "fineTune", "resume", "sample", "import", "openCheckpoint", "export", "merge"]);

export interface Progress {
  step: number;
  steps: number;
  loss: number;
  val?: number;
  tokPerSec: number;
  elapsedMs: number;
  etaMs: number;
}

export interface Status {
  state: WorkerState;
  backend: string | null; // "webgpu" | "wasm" when a model is loaded
  device: string | null;
  /** What the loaded model's backend holds on its device (Backend.residentBytes), when one is loaded. */
  residentBytes: number | null;
  /** The optional paths the loaded model's backend runs (Backend.paths: threads, levers). */
  paths: string[];
  model: ModelConfig | null;
  dataset: string | null;
  step: number;
  steps: number;
  runId: string | null;
  /** A corpus is loaded and the run was not stopped: Resume can continue it. */
  canTrain: boolean;
  /** Steps of the loaded model kept nowhere but this tab (saves failed, or none yet): replacing it loses them. */
  unsaved: number;
  /** The loaded model is an adapter being fine-tuned: its settings and what its base is called. */
  adapter: (LoraSettings & { base: string }) | null;
}

export type MessageLevel = "info" | "warn" | "error";

export type FromWorker =
  | { type: "pong"; id: number }
  | { type: "caps"; caps: Caps }
  /** What Best available trains on here; `reason` says why the CPU when a GPU adapter was passed over. */
  | { type: "best"; kind: "webgpu" | "wasm"; reason: string | null }
  | { type: "status"; status: Status }
  | { type: "progress"; progress: Progress }
  | { type: "history"; history: HistoryPoint[] }
  /**
   * A loaded model's run settings: its step target, intervals and training
   * time (`recorded` when its file kept them), and its training config (seed,
   * learning rate, warm-up, batch) where the file has one.
   */
  | { type: "run"; model: ModelConfig; steps: number; intervals: Intervals; elapsedMs: number; recorded: boolean; train: TrainConfig | null }
  | { type: "measured"; key: string; msPerStep: number | null; backend: string | null; error?: string }
  /** `problem`: why the shape cannot train on the chosen backend here, the limit named; `note`: how it runs anyway. */
  | ({ type: "checked"; key: string } & Fit)
  | { type: "token"; bytes: Uint8Array } // the sample's next bytes: its first, then as many as came in 30 ms
  | { type: "sampleDone"; tokens: number; tokPerSec: number; backend: BackendKind; paths: readonly string[]; seed: number; chosenOnGpu: boolean; webnn: number } // webnn: how many of the tokens WebNN's logits gave (the first ones)
  | { type: "saved"; id: string; step: number; bytes: number }
  | { type: "checkpoints"; list: CheckpointInfo[] }
  | { type: "exported"; name: string; bytes: Uint8Array }
  /** An import's outcome, after its message: `ok` when the file's model replaced the loaded one. */
  | { type: "imported"; ref: string; ok: boolean }
  | { type: "message"; level: MessageLevel; text: string; resumeRun?: string };
