// The engine's two narrow interfaces. A Backend does the numerics of one
// training step on one device (WebGPU or WebAssembly); the Trainer does
// everything else (data, schedule, evaluation, sampling, checkpoints) and is
// the only thing the worker talks to. Nothing here touches the DOM.

import type { LoraSettings } from "./lora";

export interface ModelConfig {
  vocab_size: number;
  n_layer: number;
  n_embd: number;
  n_head: number;
  block_size: number;
}

export interface TrainConfig {
  batch_size: number;
  lr: number;
  beta1: number;
  beta2: number;
  eps: number;
  weight_decay: number;
  grad_clip: number;
  warmup_steps: number;
  seed: number;
}

/** A run's own settings and training time, kept in its checkpoint (facts.json format.run_settings). */
export interface RunRecord {
  target_steps: number;
  eval_every: number;
  save_every: number;
  elapsed_ms: number;
}

/** Parameters and AdamW moments as flat f32 arrays in the canonical tensor order. */
export interface ParamState {
  params: Float32Array;
  m?: Float32Array;
  v?: Float32Array;
  step: number;
}

export type BackendKind = "webgpu" | "wasm";

/**
 * The adapter of a backend made to fine-tune (facts.json lora): its tensors, flat in
 * engine/lora.ts adapterLayout order, with their own Adam moments and step count.
 */
export interface AdapterSlot {
  readonly settings: LoraSettings;
  setState(state: ParamState): Promise<void>;
  getState(): Promise<ParamState>;
  /** Whether loss, prefill and decode add the adapter's terms (trainStep always does): off samples the base alone. Changing it forgets the KV cache. */
  enabled: boolean;
}

export interface Backend {
  readonly kind: BackendKind;
  /** Human-readable device, e.g. the adapter description or "4 threads, SIMD". */
  readonly device: string;
  /** Bytes this backend holds on its device now, summed where it allocates them (GPU buffers, WebAssembly memory). */
  readonly residentBytes: number;
  /**
   * The optional paths it runs, by facts.json id: "threads" (facts.backends)
   * and the levers whose kernels it uses (facts.levers); the app's pills.
   */
  readonly paths: readonly string[];
  /**
   * Present on a backend made to fine-tune (its lora option): then the parameters are a frozen
   * base, set without moments (no memory is allocated for their gradients or moments), and
   * trainStep trains this adapter alone.
   */
  readonly adapter?: AdapterSlot;
  setState(state: ParamState): Promise<void>;
  getState(): Promise<ParamState>;
  /**
   * Forward, loss, backward, clip and AdamW on one batch (x, y: B*T token ids).
   * Resolves with the batch loss; callers may issue the next step before it
   * resolves, so a GPU backend never waits on the CPU.
   */
  trainStep(x: Int32Array, y: Int32Array, lr: number): Promise<number>;
  /** Mean cross-entropy on a batch without changing any state. */
  loss(x: Int32Array, y: Int32Array): Promise<number>;
  /**
   * Runs one sequence of 1 to block_size tokens from position 0, keeps their keys and values
   * (the KV cache, replacing what it held), and resolves with the last position's logits
   * (vocab_size floats).
   */
  prefill(tokens: Int32Array): Promise<Float32Array>;
  /**
   * Runs one token at the position after the cached ones, against their keys and values, adds
   * its own, and resolves with its logits. The cache must hold fewer than block_size tokens from
   * a prefill since the last trainStep, loss or setState (each may reuse its memory or change the
   * parameters, so each forgets it).
   */
  decode(token: number): Promise<Float32Array>;
  /**
   * Optional (the WebGPU backend): `count` tokens chosen on the device, in one submission, each by
   * `draw` from the logits of the text so far with sampleUniform(seed, counter + i) (rng.ts; the
   * i-th token's), each decoded as the next one's input: after a prefill of `window` (whose last
   * position's logits give the first), or (window null) going on from the last token this picked,
   * which the cache does not hold yet. Only the token ids come back. The tokens decoded must fit
   * the cache (block_size): window.length - 1 + count of them, or the cached ones + count.
   */
  sampleTokens?(window: Int32Array | null, count: number, draw: Draw, seed: number, counter: number): Promise<Int32Array>;
  dispose(): void;
}

/**
 * A backend with an int8 decoding path (the int8 sampling lever: the WebGPU backend where its
 * kernels passed their gate, the WebAssembly backend always), what levers/int8 chooseInt8 needs to
 * check it on the current weights and turn it on.
 */
export interface Int8Decoding {
  /** Whether it has the path. */
  readonly hasInt8: boolean;
  /** Decode on the int8 copy of the weights (prefill stays f32); settable only where `hasInt8`, and off again once the parameters change. */
  sampleInt8: boolean;
  /** Bumped whenever the parameters change (a training step, setState): the weights a check ran on. */
  readonly paramsVersion: number;
  /** How long the last refresh of the int8 copy took, in ms. */
  readonly int8RefreshMs: number;
  prefill(tokens: Int32Array): Promise<Float32Array>;
  decode(token: number): Promise<Float32Array>;
}

/** How the next byte is drawn (SampleOptions' share of it). */
export interface Draw {
  temperature: number; // 0: greedy (the argmax, lowest id on ties), no randomness used
  topK: number; // keep the k largest logits; 0: all
  topP?: number; // then the fewest most likely tokens whose probabilities reach this share (nucleus); 1 or absent: all
}

export interface SampleOptions extends Draw {
  maxTokens: number;
  seed?: number;
  /** Re-run the whole window (the last block_size tokens) for every token: the path before the KV cache, which benchmarks measure the cache against. */
  fullWindow?: boolean;
  /** Choose each token on the CPU from logits read back, where the backend could choose them (Backend.sampleTokens): the path benchmarks measure that against. */
  drawOnHost?: boolean;
}

/**
 * Next-token logits from outside the backend (the WebNN lever, levers/webnn), with its own KV
 * cache and the backend's contract for it: prefill a window, then decode one new token at a time.
 * The Trainer drives it by the rule it drives the backend by (the window, windowStart, when to
 * prefill), so the source keeps no rule of its own and cannot drift from the backend's; a source
 * that guessed from whole windows whether one extends the last would be a second copy of it. A
 * throw hands sampling back to the backend for the rest of the text.
 */
export type CachedLogits = Pick<Backend, "prefill" | "decode">;

export interface HistoryPoint {
  step: number;
  train: number;
  val?: number;
}

export interface DatasetInfo {
  name: string;
  bytes: number;
  sha256: string;
}

/** What the worker drives. Implemented in trainer.ts, backend-agnostic. */
export interface Trainer {
  readonly model: ModelConfig;
  readonly config: TrainConfig;
  readonly backend: Backend;
  readonly step: number;
  readonly history: readonly HistoryPoint[];
  readonly dataset: DatasetInfo | null;
  /** Deterministic train/validation split of a byte corpus. */
  setCorpus(name: string, bytes: Uint8Array): Promise<void>;
  /** One training step; resolves with its loss (NaN/Infinity are reported, not thrown). A step the backend abandons (Interrupted) is not counted. */
  trainStep(): Promise<number>;
  /** Mean validation loss over `batches` batches of the fixed validation windows (data.ts valStarts). */
  evaluate(batches: number): Promise<number>;
  /** The validation metric (facts.json data.validation_metric, data.ts validationStarts): the loss a model is judged by; slower than evaluate. */
  validationLoss(): Promise<number>;
  /**
   * `shouldStop` is awaited before each token, so a host can yield to its own events there; `via`
   * gives the logits instead of the backend until it fails (same windows, same draws).
   */
  sample(prompt: Uint8Array, opts: SampleOptions, onToken: (byte: number) => void, shouldStop?: () => boolean | Promise<boolean>, via?: CachedLogits): Promise<Uint8Array>;
  /** The whole run as .tinygpt bytes (weights, optionally Adam m/v, history, dataset, provenance, the run's settings). */
  save(includeOptimizer: boolean, run?: RunRecord): Promise<Uint8Array>;
  dispose(): void;
}
