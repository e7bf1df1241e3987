// The worker's one training session: the Trainer, its run in OPFS, the
// training loop with progress, validation, autosave and the loss guard.
import facts from "../../tinygpt/facts.json";
import { CheckpointError, DeviceLostError, Interrupted, createTrainer, defaultTrainConfig, fineTuneTrainer, loadTrainer, planBlob, readCheckpoint, writeCheckpoint } from "../engine/index";
import { type LoraSettings, mergeAdapter } from "../engine/lora";
import { chooseInt8, hasInt8Decoding } from "../levers/int8/lever";
import type { GPTTrainer } from "../engine/index";
import type { Plan } from "../engine/checkpoint";
import type { RunRecord, SampleOptions, TrainConfig } from "../engine/types";
import { Backends } from "./backends";
import { plainWords as describe } from "./errors";
import { REQUESTS } from "./protocol";
import type { BackendChoice, FromWorker, Intervals, Progress, Request, RunSettings, Status, WorkerState } from "./protocol";
import { webnnActive, webnnSampler } from "./webnn";
import { StorageFullError, holdRunLock, loadBase, loadCorpus, loadRun, saveBase, saveCorpus, saveRun } from "./store";

type Post = (msg: FromWorker, transfer?: Transferable[]) => void;
/** A model as a file: what an adapter fine-tunes (its trainer's baseSha256 names it as the adapter does). */
interface Base {
  name: string;
  bytes: Uint8Array;
}

const DIVERGED_LOSS = facts.app.diverged_loss_factor * Math.log(facts.vocab_size);
const PRODUCER = "tinygpt-web";
// Steps whose timing the tokens/s figure averages over.
const RATE_WINDOW = 20;

// A MessageChannel round trip: a task, queued behind those already waiting (the
// page's messages), and not clamped to 4 ms as nested setTimeout calls are.
const tick = new MessageChannel();
const ticks: (() => void)[] = [];
tick.port1.onmessage = () => ticks.shift()?.();
function nextTask(): Promise<void> {
  return new Promise((resolve) => {
    ticks.push(resolve);
    tick.port2.postMessage(null);
  });
}

// How long the bytes of a sample collect before they go to the page in one message.
const TOKEN_POST_MS = 30;

export class Session {
  private trainer: GPTTrainer | null = null;
  private runId: string | null = null;
  private releaseLock: () => void = () => {};
  private state: WorkerState = "empty";
  private target = 0;
  private intervals: Intervals = { evalEvery: facts.app.eval_every, saveEvery: facts.app.save_every };
  private canTrain = false;
  private running = false;
  private stopSampling = false;
  private lastSaved = -1;
  /** The newest step whose model exists outside this tab: its checkpoint here, or the file it came from. */
  private keptStep = 0;
  // A step's save is tried once: a failed one is not repeated (and reported again) at the end of the segment.
  private triedSave = -1;
  /** Training time before the current segment; with segmentStart, the run's elapsed time. */
  private elapsedMs = 0;
  private segmentStart: number | null = null;
  // A model loaded from a file with no run of its own (an import or a gallery
  // model): continueFile trains it further from these bytes on the chosen text.
  // An adapter's file comes with its base's.
  private imported: { name: string; bytes: Uint8Array; adam: boolean; base: Base | null } | null = null;
  /** Fine-tuning: the frozen model the loaded adapter is for, as a file. */
  private base: Base | null = null;

  readonly backends: Backends;
  /** The page's shared request flag (protocol.ts REQUESTS); null where the page is not cross-origin isolated. */
  control: Int32Array | null = null;

  constructor(private post: Post) {
    this.backends = new Backends((text) => this.say("warn", text));
  }

  get busy(): boolean {
    return this.state === "training" || this.state === "sampling" || this.state === "loading";
  }

  status(): Status {
    const t = this.trainer;
    return {
      state: this.state,
      backend: t?.backend.kind ?? null,
      device: t?.backend.device ?? null,
      residentBytes: t?.backend.residentBytes ?? null,
      paths: [...(t?.backend.paths ?? []), ...(webnnActive(t) ? ["webnn"] : [])],
      model: t?.model ?? null,
      dataset: t?.dataset?.name ?? null,
      step: t?.step ?? 0,
      steps: this.target,
      runId: this.runId,
      canTrain: this.canTrain,
      unsaved: t ? t.step - this.keptStep : 0,
      adapter: t?.backend.adapter && this.base ? { ...t.backend.adapter.settings, base: this.base.name } : null,
    };
  }

  private setState(state: WorkerState): void {
    this.state = state;
    this.post({ type: "status", status: this.status() });
  }

  private say(level: "info" | "warn" | "error", text: string, resumeRun?: string): void {
    this.post({ type: "message", level, text, resumeRun });
  }

  private drop(): void {
    this.trainer?.dispose();
    this.trainer = null;
    this.releaseLock();
    this.releaseLock = () => {};
    this.runId = null;
    this.imported = null;
    this.base = null;
    this.canTrain = false;
    this.lastSaved = -1;
    this.triedSave = -1;
    this.elapsedMs = 0;
  }

  /** The sha256s of what the loaded run kept in storage (its text, the model under its adapter), which no saved record may name yet. */
  kept(): string[] {
    const t = this.runId ? this.trainer : null;
    return [t?.dataset?.sha256, t?.baseSha256].filter((sha): sha is string => !!sha);
  }

  private async adopt(trainer: GPTTrainer, runId: string | null, canTrain: boolean, base: Base | null = null): Promise<boolean> {
    let release = () => {};
    if (runId) {
      const lock = await holdRunLock(runId);
      if (!lock.ok) {
        trainer.dispose();
        this.say("error", "That run is open in another tab; close it there first. Its checkpoint is untouched.");
        return false;
      }
      release = lock.release;
    }
    this.drop();
    this.trainer = trainer;
    this.base = base;
    this.runId = runId;
    this.releaseLock = release;
    this.canTrain = canTrain;
    this.lastSaved = runId ? trainer.step : -1;
    this.keptStep = trainer.step;
    this.post({ type: "history", history: [...trainer.history] });
    return true;
  }

  /** A new run: a fresh model of the chosen shape on the chosen text. */
  async start(settings: RunSettings, name: string, corpus: Uint8Array): Promise<void> {
    await this.begin(settings, name, corpus, async () => {
      const backend = await this.backends.get(settings.backend, settings.model, settings.train);
      return createTrainer(backend, settings.model, settings.train, { producer: PRODUCER });
    });
  }

  /** A new run from the loaded file's model, trained further on the chosen text: its weights, step and history go on. */
  async continueFile(settings: RunSettings, name: string, corpus: Uint8Array): Promise<void> {
    const imported = this.imported;
    const from = this.trainer?.step ?? 0;
    if (!imported) {
      this.say("error", "There is no model from a file loaded to train further.");
      return this.setState(this.state); // the page disabled its button until it hears back
    }
    if (settings.steps <= from) {
      this.say("warn", `${imported.name} is already at step ${from}; raise Steps above it to train further.`);
      return this.setState(this.state);
    }
    const make = () => this.load(imported.bytes, settings.backend, imported.base, settings.train, imported.name);
    await this.begin(settings, name, corpus, make, () => {
      this.say("info", `Training ${imported.name} further from step ${from} on ${name}${imported.adam ? ", with its saved optimizer state" : "; the file has no optimizer state, so Adam starts afresh"}.`);
    }, imported.base);
  }

  /**
   * A new run that fine-tunes the loaded model (a run, an import or a gallery model) with a new
   * adapter on the chosen text: the model is frozen, and the run's checkpoints are the adapter's.
   */
  async fineTune(settings: RunSettings, lora: LoraSettings, name: string, corpus: Uint8Array): Promise<void> {
    const t = this.trainer;
    if (!t || this.base) {
      this.say("error", t ? "The loaded model is an adapter already: merge it into its base and import the merged model to fine-tune that." : "Load a model to fine-tune first: train one, import one or choose one from the gallery.");
      return this.setState(this.state); // the page disabled its button until it hears back
    }
    let base: Base;
    try {
      base = await this.baseOf(t);
    } catch (e) {
      this.say("error", `Could not start fine-tuning: ${describe(e)}`);
      return this.setState(this.state);
    }
    await this.begin(settings, name, corpus, async () => {
      const ck = readCheckpoint(base.bytes);
      const backend = await this.backends.get(settings.backend, ck.model, settings.train, false, lora);
      return fineTuneTrainer(backend, ck, settings.train, null, { base: base.name, adapter: "the adapter" }, { producer: PRODUCER });
    }, () => {
      this.say("info", `Fine-tuning ${base.name} on ${name} with a rank-${lora.rank} adapter on ${lora.targets.join(", ")}; the model itself stays as it was.`);
    }, base);
  }

  /** The loaded model as a base to fine-tune: its file where it came from one, else its weights written as one. */
  private async baseOf(t: GPTTrainer): Promise<Base> {
    const file = this.imported;
    const bytes = file ? file.bytes : await t.save(false);
    const name = file ? file.name : `the model at step ${t.step}${t.dataset ? ` on ${t.dataset.name}` : ""}`;
    return { name, bytes };
  }

  /**
   * Makes the run's trainer, adopts it under a new run id, keeps a copy of its
   * text and trains it to the target; `ready` runs just before training.
   * Until the new trainer is adopted, the loaded model stays.
   */
  private async begin(settings: RunSettings, name: string, corpus: Uint8Array, make: () => Promise<GPTTrainer>, ready = () => {}, base: Base | null = null): Promise<void> {
    const previous = this.state;
    this.setState("loading");
    let trainer: GPTTrainer | null = null;
    try {
      trainer = await make();
      await trainer.setCorpus(name, corpus);
    } catch (e) {
      trainer?.dispose();
      this.say("error", `Could not start training: ${describe(e)}`);
      return this.setState(previous);
    }
    const runId = crypto.randomUUID();
    if (!(await this.adopt(trainer, runId, true, base))) return this.setState(previous);
    this.lastSaved = -1;
    // A model trained further keeps the training time its file recorded.
    this.elapsedMs = trainer.savedRun?.elapsed_ms ?? 0;
    try {
      await saveCorpus(runId, trainer.dataset!.sha256, corpus);
      if (base) await saveBase(runId, trainer.baseSha256!, base.bytes);
    } catch (e) {
      this.say("warn", `Could not keep a copy of the ${base ? "text and the model under the adapter" : "text"} in browser storage (${describe(e)}); a reload will not be able to resume this run.`);
    }
    ready();
    await this.train(settings.steps, settings.intervals);
  }

  /** Continue the loaded run up to `steps` steps. */
  async train(steps: number, intervals: Intervals): Promise<void> {
    const t = this.trainer;
    if (!t || !this.canTrain) return this.say("error", "There is no run to continue: start one first.");
    if (steps <= t.step) return this.say("warn", `The run is already at step ${t.step}; raise Steps to train further.`);
    this.intervals = intervals;
    this.target = steps;
    this.running = true;
    if (t.backend.adapter) t.backend.adapter.enabled = true; // validation judges the adapter too
    this.takeRequest(); // one left from before this segment is not for it
    this.setState("training");
    const tokensPerStep = t.config.batch_size * t.model.block_size;
    const depth = t.backend.kind === "webgpu" ? 2 : 1;
    const times: { at: number; step: number }[] = [{ at: performance.now(), step: t.step }];
    const segmentStart = performance.now();
    const from = t.step;
    this.segmentStart = segmentStart;
    let failure: { kind: "diverged" | "lost" | "error"; text: string } | null = null;

    const progress = (loss: number, val?: number): Progress => {
      const now = performance.now();
      const first = times[0];
      const last = times[times.length - 1];
      const msPerStep = last.step > first.step ? (last.at - first.at) / (last.step - first.step) : 0;
      const elapsedMs = this.elapsedMs + (now - segmentStart);
      return {
        step: t.step,
        steps: this.target,
        loss,
        val,
        tokPerSec: msPerStep > 0 ? (tokensPerStep * 1000) / msPerStep : 0,
        elapsedMs,
        etaMs: msPerStep * Math.max(0, this.target - t.step),
      };
    };

    try {
      while (this.running && !failure) {
        try {
          // Validation and the save come before the steps, so that a segment cut short
          // during validation validates on resuming.
          if (this.validationDue(t)) {
            const val = await t.evaluate(facts.app.eval_batches);
            this.post({ type: "progress", progress: progress(t.history[t.history.length - 1].train, val) });
            // Evaluation time is not training time: restart the rate window.
            times.splice(0, times.length, { at: performance.now(), step: t.step });
          }
          if (t.step > from && t.step % this.intervals.saveEvery === 0) await this.save();
          if (t.step >= this.target) break;
          const base = t.step;
          const boundary = (every: number) => (Math.floor(base / every) + 1) * every;
          const limit = Math.min(this.target, boundary(this.intervals.evalEvery), boundary(this.intervals.saveEvery));
          const queue: Promise<number>[] = [];
          let issued = base;
          for (;;) {
            while (this.running && !failure && issued < limit && queue.length < depth) {
              const step = t.trainStep();
              // Awaited below; if an earlier step fails first, this one's failure is already handled.
              step.catch(() => undefined);
              queue.push(step);
              issued++;
            }
            if (!queue.length) break;
            const loss = await queue.shift()!;
            if (failure) continue;
            times.push({ at: performance.now(), step: t.step });
            if (times.length > RATE_WINDOW) times.shift();
            if (!Number.isFinite(loss) || loss > DIVERGED_LOSS) {
              failure = { kind: "diverged", text: `the loss became ${Number.isFinite(loss) ? `${loss.toFixed(2)}, above ${DIVERGED_LOSS.toFixed(2)} (diverging)` : String(loss)} at step ${t.step}` };
              continue;
            }
            this.post({ type: "progress", progress: progress(loss) });
            await this.checkIn();
          }
        } catch (e) {
          // The CPU backend abandoned a step or a validation batch for the page's request: nothing changed.
          if (!(e instanceof Interrupted)) throw e;
          await this.checkIn();
        }
      }
    } catch (e) {
      failure = e instanceof DeviceLostError ? { kind: "lost", text: describe(e) } : { kind: "error", text: describe(e) };
    }
    this.elapsedMs += performance.now() - segmentStart;
    this.segmentStart = null;
    this.running = false;

    if (failure) return this.fail(failure.kind, failure.text);
    // The page hears first, so Pause and Stop take effect at once; the save that keeps the
    // last steps follows (commands the page sends meanwhile wait for it).
    this.setState(this.canTrain && t.step < this.target ? "paused" : "ready");
    await this.save();
    if (t.step >= this.target) this.say("info", `Training finished at step ${t.step}.`);
  }

  /** The current step is a validation point (or the target) whose validation has not run. */
  private validationDue(t: GPTTrainer): boolean {
    const last = t.history[t.history.length - 1];
    return last !== undefined && last.step === t.step && last.val === undefined && (t.step % this.intervals.evalEvery === 0 || t.step === this.target);
  }

  /** The request the page left in the shared flag (protocol.ts REQUESTS), now cleared. */
  takeRequest(): Request | null {
    const v = this.control ? Atomics.exchange(this.control, 0, 0) : 0;
    return v ? REQUESTS[v - 1] : null;
  }

  /**
   * Lets the worker's queued messages run (Pause, Stop, ... without a shared
   * flag), then acts on a request in the flag. Between steps and tokens: a
   * computing CPU backend never returns to the event loop by itself.
   */
  private async checkIn(): Promise<void> {
    await nextTask();
    const r = this.takeRequest();
    if (r === "pause") this.pause();
    else if (r === "stop") this.stop();
    else if (r === "stopSample") this.cancelSample();
  }

  pause(): void {
    this.running = false;
  }

  /** Ends the run: the model stays for sampling and export, training cannot continue. */
  stop(): void {
    this.running = false;
    this.canTrain = false;
    if (this.state === "paused") this.setState("ready");
  }

  private async fail(kind: "diverged" | "lost" | "error", text: string): Promise<void> {
    const runId = this.runId;
    const saved = this.lastSaved;
    const backend = this.trainer?.backend.kind;
    this.drop();
    if (kind === "lost" || (kind === "error" && backend === "webgpu")) {
      this.setState("empty");
      if (runId && saved >= 0) {
        this.say("error", `The GPU stopped working (${text}). Resume from the last checkpoint (step ${saved})?`, runId);
      } else {
        this.say("error", `The GPU stopped working (${text}) before the first checkpoint; start again.`);
      }
      return;
    }
    if (kind === "diverged") {
      const where = saved >= 0 ? `The last good checkpoint (step ${saved}) is kept and loaded; lower the learning rate before training on.` : "No checkpoint had been saved yet; start again with a lower learning rate.";
      this.say("error", `Training stopped: ${text}. ${where}`);
    } else {
      this.say("error", `Training stopped: ${text}.${saved >= 0 ? ` The last checkpoint (step ${saved}) is kept.` : ""}`);
    }
    if (runId && saved >= 0) await this.open(runId, backend ?? "auto", false, 0, this.intervals, true);
    else this.setState("empty");
  }

  /** Writes the run's checkpoint unless the weights went bad; failures are reported, never fatal. */
  private async save(): Promise<void> {
    const t = this.trainer;
    if (!t || !this.runId || this.lastSaved === t.step || this.triedSave === t.step) return;
    this.triedSave = t.step;
    const kept = this.lastSaved >= 0 ? `the last good checkpoint (step ${this.lastSaved}) is kept` : "no checkpoint of this run is saved yet";
    try {
      // The writer refuses non-finite weights or moments, as every reader would.
      const bytes = await t.save(true, this.runRecord());
      const base = this.base && { sha256: t.baseSha256!, name: this.base.name };
      await saveRun({ id: this.runId, step: t.step, model: t.model, dataset: t.dataset, base, savedAt: new Date().toISOString() }, bytes);
      this.lastSaved = this.keptStep = t.step;
      this.post({ type: "saved", id: this.runId, step: t.step, bytes: bytes.length });
      this.post({ type: "status", status: this.status() });
    } catch (e) {
      if (e instanceof CheckpointError) return this.say("error", `The checkpoint at step ${t.step} was not saved: ${describe(e)}; ${kept}.`);
      const why = e instanceof StorageFullError ? `: ${describe(e)}` : ` (${describe(e)})`;
      this.say("warn", `Saving the checkpoint at step ${t.step} failed${why}; ${kept}. Training goes on; export the model to keep it.`);
    }
  }

  /** The run's settings and training time so far, as its checkpoint keeps them. */
  private runRecord(): RunRecord {
    return {
      target_steps: this.target,
      eval_every: this.intervals.evalEvery,
      save_every: this.intervals.saveEvery,
      elapsed_ms: this.elapsedMs + (this.segmentStart === null ? 0 : performance.now() - this.segmentStart),
    };
  }

  /** Takes on the run settings a loaded file recorded; `steps` and `intervals` where it has none. `train`: the file's training config. */
  private restoreRun(t: GPTTrainer, steps: number, intervals: Intervals, train: TrainConfig | null): void {
    const run = t.savedRun;
    this.target = Math.max(run?.target_steps ?? steps, t.step);
    this.intervals = run ? { evalEvery: run.eval_every, saveEvery: run.save_every } : intervals;
    this.elapsedMs = run?.elapsed_ms ?? 0;
    this.post({ type: "run", model: t.model, steps: this.target, intervals: this.intervals, elapsedMs: this.elapsedMs, recorded: run !== null, train });
  }

  /**
   * Loads a saved run; with `train`, continues it. Its target and intervals
   * are the ones its checkpoint recorded; `steps` and `intervals` are for
   * checkpoints saved before runs kept them.
   */
  async open(id: string, choice: BackendChoice, train: boolean, steps: number, intervals = this.intervals, quiet = false): Promise<void> {
    const previous = this.state;
    this.setState("loading");
    let trainer: GPTTrainer | null = null;
    let base: Base | null = null;
    let canTrain = false;
    try {
      const { meta, bytes } = await loadRun(id);
      if (meta.base) {
        const kept = await loadBase(meta.base.sha256);
        if (!kept) throw new Error(`it fine-tunes ${meta.base.name}, which browser storage no longer holds`);
        base = { name: meta.base.name, bytes: kept };
      }
      trainer = await this.load(bytes, choice, base);
      if (meta.dataset) {
        const corpus = await loadCorpus(meta.dataset.sha256);
        if (corpus) {
          await trainer.setCorpus(meta.dataset.name, corpus);
          canTrain = true;
        }
      }
    } catch (e) {
      trainer?.dispose();
      this.say("error", `Could not open the saved run: ${describe(e)}`);
      this.setState(previous === "loading" ? "empty" : previous);
      return;
    }
    if (!(await this.adopt(trainer, id, canTrain, base))) return this.setState(previous);
    this.restoreRun(trainer, steps, intervals, trainer.config);
    if (!quiet) this.say("info", `Loaded the run at step ${trainer.step} on ${trainer.backend.kind === "webgpu" ? "WebGPU" : "WebAssembly"}.${canTrain ? "" : " Its text is no longer stored, so it cannot resume; export it and import the file to train it further on a text you choose."}`);
    if (train && canTrain && this.target > trainer.step) return this.train(this.target, this.intervals);
    if (train && canTrain) this.say("info", `The run has reached its target of ${this.target} steps; raise Steps and press Continue training to train it further.`);
    this.setState("ready");
  }

  /**
   * A trainer from a file's bytes (with `train`, trained by it, else by the file's settings): a
   * model, or an adapter on `base` (refused, naming both, when it belongs to another model).
   */
  private async load(bytes: Uint8Array, choice: BackendChoice, base: Base | null = null, train?: TrainConfig, name = "the adapter"): Promise<GPTTrainer> {
    const ck = readCheckpoint(bytes);
    if (!ck.adapter) return loadTrainer(bytes, (model, config) => this.backends.get(choice, model, config), train, { producer: PRODUCER });
    if (!base) throw new Error(`${name} is a LoRA adapter: load the model it was fine-tuned from first`);
    const config = train ?? ck.train ?? defaultTrainConfig(16, facts.lora.lr);
    const baseCk = readCheckpoint(base.bytes);
    const backend = await this.backends.get(choice, ck.model, config, false, { rank: ck.adapter.rank, alpha: ck.adapter.alpha, targets: ck.adapter.targets });
    try {
      return await fineTuneTrainer(backend, baseCk, config, ck, { base: base.name, adapter: name }, { producer: PRODUCER });
    } catch (e) {
      backend.dispose();
      throw e;
    }
  }

  /**
   * An exported or gallery model, checked fully before the current one is
   * replaced: its preamble and header before the rest of the file is read.
   */
  async import(name: string, file: Blob, choice: BackendChoice): Promise<boolean> {
    const refused = (e: unknown) => {
      this.say("error", `${name} ${e instanceof CheckpointError ? "was refused" : "could not be loaded"}: ${describe(e)}. The current model is unchanged.`);
      return false;
    };
    let plan: Plan;
    let bytes: Uint8Array;
    try {
      plan = await planBlob(file);
      bytes = new Uint8Array(await file.arrayBuffer());
    } catch (e) {
      return refused(e);
    }
    const previous = this.state;
    this.setState("loading");
    let trainer: GPTTrainer;
    let base: Base | null = null;
    try {
      // An adapter goes onto the loaded model, which must be the one it was fine-tuned from.
      if (plan.adapter && this.trainer && !this.base) base = await this.baseOf(this.trainer);
      trainer = await this.load(bytes, choice, base, undefined, name);
    } catch (e) {
      refused(e);
      this.setState(previous);
      return false;
    }
    await this.adopt(trainer, null, false, base);
    this.imported = { name, bytes, adam: plan.moments, base };
    this.restoreRun(trainer, trainer.step, this.intervals, plan.train);
    this.say("info", base
      ? `Loaded the adapter ${name} onto ${base.name}: step ${trainer.step}. Sampling uses it; to fine-tune it further, choose a text and press Continue training.`
      : `Loaded ${name}: step ${trainer.step}, ${trainer.model.n_layer} layers, ${trainer.model.n_embd} wide. To train it further, choose a text and press Continue training; Start new model starts a fresh one instead.`);
    this.setState("ready");
    return true;
  }

  async exportModel(): Promise<void> {
    const t = this.trainer;
    if (!t) return this.say("error", "There is no model to export yet.");
    const bytes = await t.save(true, this.runRecord());
    const adapter = t.backend.adapter ? `-adapter-r${t.backend.adapter.settings.rank}` : "";
    const name = `tinygpt-${t.model.n_layer}x${t.model.n_embd}${adapter}-step${t.step}${facts.format.extension}`;
    this.post({ type: "exported", name, bytes }, [bytes.buffer]);
  }

  /** The loaded adapter folded into its base (W + scale A B), exported as a plain model file. */
  async mergeModel(): Promise<void> {
    const t = this.trainer, slot = t?.backend.adapter, base = this.base;
    if (!t || !slot || !base) return this.say("error", "There is no adapter loaded to merge.");
    const ck = readCheckpoint(base.bytes);
    const merged = mergeAdapter(t.model, ck.params, slot.settings, (await slot.getState()).params);
    const bytes = writeCheckpoint({ ...ck, params: merged, m: undefined, v: undefined, adapter: null,
      provenance: { ...ck.provenance, merged_adapter: { ...slot.settings, base_sha256: t.baseSha256, step: t.step } } }, { producer: PRODUCER });
    const name = `tinygpt-${t.model.n_layer}x${t.model.n_embd}-merged-r${slot.settings.rank}-step${t.step}${facts.format.extension}`;
    this.post({ type: "exported", name, bytes }, [bytes.buffer]);
  }

  reset(): void {
    this.drop();
    this.target = 0;
    this.post({ type: "history", history: [] });
    this.setState("empty");
  }

  /** `adapter` false: the loaded adapter's base alone, for comparing the two from one seed. */
  async sample(prompt: string, options: SampleOptions & { seed: number }, adapter = true): Promise<void> {
    const t = this.trainer;
    if (!t) return this.say("error", "There is no model to sample from yet.");
    if (t.backend.adapter) t.backend.adapter.enabled = adapter;
    this.stopSampling = false;
    this.takeRequest();
    const previous = this.state; // ready, or paused: a paused run stays paused
    this.setState("sampling");
    const via = await webnnSampler(t);
    const viaBefore = via?.produced ?? 0;
    const t0 = performance.now();
    let n = 0;
    // The first byte goes to the page at once, the rest TOKEN_POST_MS of them at a time: one message
    // a byte outran the page (a DOM update each), whose queue then held seconds of bytes when Stop
    // was clicked.
    let unsent: number[] = [];
    let posted = -Infinity;
    const post = () => {
      if (unsent.length) this.post({ type: "token", bytes: Uint8Array.from(unsent) });
      unsent = [];
      posted = performance.now();
    };
    try {
      if (hasInt8Decoding(t.backend)) await chooseInt8(t.backend, t.heldOut, t.model.block_size, (line) => console.info(line));
      await t.sample(new TextEncoder().encode(prompt), options, (byte) => {
        n++;
        unsent.push(byte);
        if (performance.now() - posted >= TOKEN_POST_MS) post();
      }, async () => {
        await this.checkIn();
        return this.stopSampling;
      }, via ?? undefined);
    } catch (e) {
      // Interrupted: the CPU backend abandoned a token for Stop.
      if (e instanceof Interrupted) this.takeRequest();
      else this.say("error", `Sampling failed: ${describe(e)}`);
    }
    post();
    const seconds = (performance.now() - t0) / 1000;
    const webnn = (via?.produced ?? 0) - viaBefore;
    if (t.backend.adapter) t.backend.adapter.enabled = true;
    this.post({ type: "sampleDone", tokens: n, tokPerSec: seconds > 0 ? n / seconds : 0, backend: t.backend.kind, paths: t.backend.paths, seed: options.seed, chosenOnGpu: !!t.backend.sampleTokens && webnn < n, webnn });
    this.setState(previous);
  }

  cancelSample(): void {
    this.stopSampling = true;
  }
}
