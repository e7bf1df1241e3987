// The Trainer: data, schedule, evaluation, sampling and checkpoints around a
// Backend. Steps may be issued before earlier ones resolve (the GPU pipelines
// them); the step counter and the batch are fixed when a step is issued.

import type { Backend, DatasetInfo, HistoryPoint, ModelConfig, RunRecord, SampleOptions, TrainConfig, Trainer, CachedLogits } from "./types";
import { checkModelConfig, initParams, learningRate } from "./model";
import { type Checkpoint, writeCheckpoint } from "./checkpoint";
import { type Split, sha256Hex, splitCorpus, trainBatch, valBatch, validationStarts, windows } from "./data";
import { nextBatch, pickToken, windowStart } from "./sample";
import { sampleUniform } from "./rng";
import { Interrupted } from "./interrupt";
import { initAdapter, weightsSha256 } from "./lora";

export interface TrainerInit {
  step?: number;
  history?: HistoryPoint[];
  dataset?: DatasetInfo | null;
  /** The run's own settings, as the file it was loaded from recorded them. */
  run?: RunRecord;
  /** Written into the file's provenance, e.g. "tinygpt-web" or "tinygpt-node". */
  producer?: string;
  /** Fine-tuning (the backend has an adapter): the sha256 of the frozen base's weights, which its saves name as their base. */
  baseSha256?: string;
}

export class GPTTrainer implements Trainer {
  private issued: number;
  private done: number;
  private split: Split | null = null;
  private readonly points: HistoryPoint[];
  private data: DatasetInfo | null;
  private readonly producer: string;
  /** The run settings of the file this trainer was loaded from, where it had them. */
  readonly savedRun: RunRecord | null;
  /** Fine-tuning: the sha256 of the base's weights (what an adapter file names its base by); null when every weight trains. */
  readonly baseSha256: string | null;

  constructor(readonly backend: Backend, readonly model: ModelConfig, readonly config: TrainConfig, init: TrainerInit = {}) {
    this.issued = this.done = init.step ?? 0;
    this.points = init.history ? [...init.history] : [];
    this.data = init.dataset ?? null;
    this.producer = init.producer ?? "tinygpt-web";
    this.savedRun = init.run ?? null;
    this.baseSha256 = init.baseSha256 ?? null;
    if ((this.baseSha256 === null) !== !backend.adapter) throw new Error("a fine-tuning trainer needs a backend with an adapter and its base's sha256, and only it");
  }

  /** Steps completed (resolved); issued steps may run ahead of it. */
  get step(): number {
    return this.done;
  }

  get history(): readonly HistoryPoint[] {
    return this.points;
  }

  get dataset(): DatasetInfo | null {
    return this.data;
  }

  async setCorpus(name: string, bytes: Uint8Array): Promise<void> {
    this.split = splitCorpus(bytes, this.model.block_size);
    this.data = { name, bytes: bytes.length, sha256: await sha256Hex(bytes) };
  }

  /** The held-out bytes of the corpus, or null before one is set (the int8 lever checks sampling on them). */
  get heldOut(): Uint8Array | null {
    return this.split?.val ?? null;
  }

  private corpus(): Split {
    if (!this.split) throw new Error("no corpus: call setCorpus first");
    return this.split;
  }

  trainStep(): Promise<number> {
    const s = this.issued++;
    const { x, y } = trainBatch(this.corpus(), this.config.batch_size, this.model.block_size, this.config.seed, s);
    return this.backend.trainStep(x, y, learningRate(this.config, s)).then(
      (loss) => {
        this.done = Math.max(this.done, s + 1);
        this.points.push({ step: s + 1, train: loss });
        return loss;
      },
      (e: unknown) => {
        // An abandoned step changed nothing: the next one is step s again, on the same batch.
        if (e instanceof Interrupted) this.issued = Math.min(this.issued, s);
        throw e;
      },
    );
  }

  /** Also records the loss as `val` on the history point of the current step, when there is one. */
  async evaluate(batches: number): Promise<number> {
    const split = this.corpus();
    let sum = 0;
    for (let i = 0; i < batches; i++) {
      const { x, y } = valBatch(split, this.config.batch_size, this.model.block_size, i, batches);
      sum += await this.backend.loss(x, y);
    }
    const val = sum / Math.max(1, batches);
    const last = this.points[this.points.length - 1];
    if (last && last.step === this.done) last.val = val;
    return val;
  }

  /** The validation metric (facts.json data.validation_metric): a batch_size of its windows at a time. */
  async validationLoss(): Promise<number> {
    const val = this.corpus().val;
    const B = this.config.batch_size, T = this.model.block_size;
    const starts = validationStarts(val.length, T);
    let sum = 0; // of the windows' own mean losses
    for (let i = 0; i < starts.length; i += B) {
      const part = starts.slice(i, i + B);
      // A backend takes whole batches only: a short last one is filled with copies of its first
      // window, whose loss, from a batch of nothing but it, is then taken back out.
      const fill = B - part.length;
      const { x, y } = windows(val, [...part, ...Array<number>(fill).fill(part[0])], T);
      sum += B * (await this.backend.loss(x, y));
      if (fill > 0) {
        const alone = windows(val, Array<number>(B).fill(part[0]), T);
        sum -= fill * (await this.backend.loss(alone.x, alone.y));
      }
    }
    return sum / starts.length;
  }

  async sample(prompt: Uint8Array, opts: SampleOptions, onToken: (byte: number) => void, shouldStop?: () => boolean | Promise<boolean>, via?: CachedLogits): Promise<Uint8Array> {
    const T = this.model.block_size;
    const seed = opts.seed ?? (Date.now() >>> 0);
    // An empty prompt starts from a newline, the natural start of a text.
    const context = prompt.length ? Array.from(prompt) : [10];
    let start = Math.max(0, context.length - T);
    let cached = false; // whether the cache holds context[start .. length - 1)
    const out: number[] = [];
    const take = (tokens: ArrayLike<number>) => {
      for (const token of Array.from(tokens)) {
        context.push(token);
        out.push(token);
        onToken(token);
      }
    };
    const onDevice = this.backend.sampleTokens && !opts.fullWindow && !opts.drawOnHost;
    let batch = 1;
    let outside = via ?? null;
    while (out.length < opts.maxTokens) {
      if (await shouldStop?.()) break;
      const was = start;
      start = opts.fullWindow ? Math.max(0, context.length - T) : windowStart(start, context.length, T);
      const fresh: boolean = !cached || start !== was || !!opts.fullWindow;
      if (outside) {
        // Its own cache by the backend's rule below: the same logits, the same draw.
        const logits: Float32Array | null = await (fresh ? outside.prefill(Int32Array.from(context.slice(start))) : outside.decode(context[context.length - 1])).catch(() => null);
        if (logits) take([pickToken(logits, opts, sampleUniform(seed, out.length))]);
        else outside = null;
        // Failed: the backend's cache holds nothing of this text, so it prefills the window next.
        cached = logits !== null;
        continue;
      }
      if (onDevice) {
        // Tokens until the window outgrows the cache, a batch at a time; the i-th drawn overall
        // draws sampleUniform(seed, i) wherever it is chosen, so batching leaves the text alone.
        const n = Math.min(batch, opts.maxTokens - out.length, T - (context.length - start) + 1);
        const began = performance.now();
        take(await this.backend.sampleTokens!(fresh ? Int32Array.from(context.slice(start)) : null, n, opts, seed, out.length));
        batch = nextBatch(batch, n, performance.now() - began);
      } else {
        // The cache holds context[was..length-1) when one token is new: decode it; else prefill the window.
        const logits = fresh ? await this.backend.prefill(Int32Array.from(context.slice(start))) : await this.backend.decode(context[context.length - 1]);
        take([pickToken(logits, opts, sampleUniform(seed, out.length))]);
      }
      cached = true;
    }
    return Uint8Array.from(out);
  }

  /** `run`: the run's settings to record beside the trainer state. Fine-tuning, the adapter's file: its tensors, moments and base. */
  async checkpoint(includeOptimizer: boolean, run?: RunRecord): Promise<Checkpoint> {
    const slot = this.backend.adapter;
    const state = slot ? await slot.getState() : await this.backend.getState();
    return {
      ...(slot ? { adapter: { ...slot.settings, targets: [...slot.settings.targets], base_sha256: this.baseSha256! } } : {}),
      model: this.model,
      params: state.params,
      m: includeOptimizer ? state.m : undefined,
      v: includeOptimizer ? state.v : undefined,
      step: this.done,
      adamStep: includeOptimizer ? state.step : undefined,
      train: this.config,
      ...(run ? { run } : {}),
      history: [...this.points],
      dataset: this.data,
      provenance: { backend: this.backend.kind, device: this.backend.device },
    };
  }

  async save(includeOptimizer: boolean, run?: RunRecord): Promise<Uint8Array> {
    return writeCheckpoint(await this.checkpoint(includeOptimizer, run), { producer: this.producer });
  }

  dispose(): void {
    this.backend.dispose();
  }
}

/** A fresh model: parameters initialised from config.seed, zero Adam state. */
export async function startTrainer(backend: Backend, model: ModelConfig, config: TrainConfig, init: TrainerInit = {}): Promise<GPTTrainer> {
  checkModelConfig(model);
  await backend.setState({ params: initParams(model, config.seed), step: 0 });
  return new GPTTrainer(backend, model, config, init);
}

/**
 * Fine-tuning `base` (a plain model's checkpoint) on a backend made with an adapter: a new
 * adapter (initAdapter, from config.seed), or `adapter`, an adapter file's checkpoint for this
 * very base, with its Adam state when saved. An adapter for another base, shape or settings is
 * refused with a message naming both (`names`: what the user calls the base and the adapter).
 */
export async function fineTuneTrainer(backend: Backend, base: Checkpoint, config: TrainConfig, adapter: Checkpoint | null,
  names = { base: "the loaded model", adapter: "the adapter" }, init: TrainerInit = {}): Promise<GPTTrainer> {
  const slot = backend.adapter;
  if (!slot) throw new Error("this backend was made without an adapter: it cannot fine-tune");
  if (base.adapter) throw new Error(`${names.base} is an adapter, not a model to fine-tune`);
  const baseSha256 = await weightsSha256(base.params);
  if (adapter) {
    const a = adapter.adapter;
    if (!a) throw new Error(`${names.adapter} is a model, not an adapter`);
    if (a.base_sha256 !== baseSha256) {
      throw new Error(`${names.adapter} was trained on another base (its weights' sha256 ${a.base_sha256.slice(0, 12)}…), not on ${names.base} (${baseSha256.slice(0, 12)}…)`);
    }
    const same = JSON.stringify(adapter.model) === JSON.stringify(base.model) && a.rank === slot.settings.rank && a.alpha === slot.settings.alpha
      && JSON.stringify(a.targets) === JSON.stringify(slot.settings.targets);
    if (!same) throw new Error(`${names.adapter}'s shape or settings differ from the backend's`);
  }
  await backend.setState({ params: base.params, step: base.step });
  await slot.setState(adapter
    ? { params: adapter.params, m: adapter.m, v: adapter.v, step: adapter.m ? (adapter.adamStep ?? adapter.step) : 0 }
    : { params: initAdapter(base.model, slot.settings, config.seed), step: 0 });
  return new GPTTrainer(backend, base.model, config, adapter
    ? { step: adapter.step, history: adapter.history, dataset: adapter.dataset, run: adapter.run, ...init, baseSha256 }
    : { ...init, baseSha256 });
}

/** Continue from a checkpoint (its Adam state when saved, else fresh moments). */
export async function resumeTrainer(backend: Backend, ck: Checkpoint, config: TrainConfig, init: TrainerInit = {}): Promise<GPTTrainer> {
  await backend.setState({ params: ck.params, m: ck.m, v: ck.v, step: ck.m ? (ck.adamStep ?? ck.step) : 0 });
  return new GPTTrainer(backend, ck.model, config, { step: ck.step, history: ck.history, dataset: ck.dataset, run: ck.run, ...init });
}
