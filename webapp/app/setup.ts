// The model and run settings: presets from the shared facts with their size,
// memory and measured time per step, a custom shape, and the run options,
// with the seed, learning rate, warm-up and batch under Advanced for every size.
import { SHAPE, checkModelConfig, defaultTrainConfig, paramCount, presetOf, presets } from "../engine/model";
import type { LoraSettings, Projection } from "../engine/lora";
import type { ModelConfig, TrainConfig } from "../engine/types";
import facts from "../../tinygpt/facts.json";
import type { Fit } from "../worker/fit";
import type { BackendChoice, Intervals, RunSettings, Status } from "../worker/protocol";
import { $ } from "./dom";
import { bytes, count, duration, msPerStep } from "./format";

function intField(id: string, label: string, min: number, max: number): number {
  const v = Number($<HTMLInputElement>(`#${id}`).value);
  if (!Number.isInteger(v) || v < min || v > max) throw new Error(`${label} must be a whole number from ${min} to ${max}.`);
  return v;
}

// The first part of a fine-tuning fit's key, where a size's fit has the size's id.
const FINE_TUNE = "finetune";

export class Setup {
  readonly measured = new Map<string, number>();
  /** What the worker said about each shape's fit to this device's limits (worker/fit.ts). */
  readonly fits = new Map<string, Fit>();
  /** The key of the fit each size's card shows the memory of (the last asked for it). */
  private readonly memoryKeys = new Map<string, string>();
  /** The key of the fine-tuning fit the Fine-tuning settings show (the last asked for). */
  private fineTuneKey = "";

  constructor(onChange: () => void) {
    for (const input of document.querySelectorAll<HTMLInputElement>("input[name=preset]")) {
      input.addEventListener("change", () => {
        $("#custom").hidden = this.presetId() !== "custom";
        const p = presets().find((x) => x.id === this.presetId());
        if (p) this.showTrain(p.train, false);
        this.describeCustom();
        onChange();
      });
    }
    $("#steps").addEventListener("input", () => this.showNote());
    // A seed of its own for each page load, shown, so a run can be repeated.
    $<HTMLInputElement>("#seed").value = String((Math.random() * 2 ** 31) >>> 0);
    for (const input of document.querySelectorAll<HTMLInputElement>("#custom input, #batch, #lora-rank, input[name=lora-target]")) {
      input.addEventListener("input", () => {
        this.describeCustom();
        onChange();
      });
    }
    for (const p of presets()) {
      $(`[data-preset-params="${p.id}"]`).textContent = `${count(paramCount(p.model))} parameters`;
    }
    this.describeCustom();
  }

  presetId(): string {
    return document.querySelector<HTMLInputElement>("input[name=preset]:checked")?.value ?? "tiny";
  }

  selectPreset(id: string): void {
    const input = document.querySelector<HTMLInputElement>(`input[name=preset][value="${id}"]`);
    if (input) {
      input.checked = true;
      $("#custom").hidden = id !== "custom";
    }
  }

  /** Selects the size of a model just loaded, so the form describes it until another size is chosen. */
  selectModel(model: ModelConfig): void {
    const match = presetOf(model);
    this.selectPreset(match?.id ?? "custom");
    if (!match) for (const k of SHAPE) $<HTMLInputElement>(`#c-${k}`).value = String(model[k]);
    this.describeCustom();
  }

  /**
   * Says which model is loaded and what Continue training and Start new model
   * do with it; null hides that. For a file's model, Steps (a target step
   * count) is raised above its step when it is not already.
   */
  showLoaded(model: ModelConfig | null, step: number, fromFile: boolean, adapter: Status["adapter"] = null): void {
    const note = $("#loaded-shape");
    note.hidden = model === null;
    if (!model) return;
    note.textContent = adapter
      ? `Loaded: a rank-${adapter.rank} adapter on ${adapter.targets.join(", ")} at step ${step}, fine-tuning ${adapter.base} (${model.n_layer} layers × ${model.n_embd} wide), which stays as it was. Continue training fine-tunes it further${fromFile ? " on the text below, as a new run" : ""}; Merge folds it into the model as a file of its own.`
      : `Loaded: ${model.n_layer} layers × ${model.n_embd} wide, context ${model.block_size}, at step ${step}. Continue training trains it further${fromFile ? " on the text below, as a new run" : ""}; Fine-tune trains an adapter on it instead; Start new model starts a fresh one of the size chosen here.`;
    const steps = $<HTMLInputElement>("#steps");
    if (fromFile && Number(steps.value) <= step) steps.value = String(step + Number(steps.defaultValue));
  }

  /** Shows a training config under Advanced; the seed too unless `withSeed` is false. */
  showTrain(train: TrainConfig, withSeed = true): void {
    if (withSeed) $<HTMLInputElement>("#seed").value = String(train.seed);
    $<HTMLInputElement>("#lr").value = String(train.lr);
    $<HTMLInputElement>("#warmup").value = String(train.warmup_steps);
    $<HTMLInputElement>("#batch").value = String(train.batch_size);
  }

  /** The Advanced settings over the optimizer defaults; throws with a readable message. */
  train(): TrainConfig {
    const lr = Number($<HTMLInputElement>("#lr").value);
    if (!(lr > 0 && lr <= 1)) throw new Error("Learning rate must be above 0 and at most 1.");
    const seed = intField("seed", "Seed", 0, facts.format.trainer_config.seed.max);
    return { ...defaultTrainConfig(intField("batch", "Batch", 1, 256), lr, seed), warmup_steps: intField("warmup", "Warm-up", 0, 1_000_000) };
  }

  /** The chosen model and training config; throws with a readable message for a bad custom shape or setting. */
  config(id = this.presetId()): { model: ModelConfig; train: TrainConfig } {
    return { model: id === "custom" ? this.customModel() : presets().find((x) => x.id === id)!.model, train: this.train() };
  }

  private customModel(): ModelConfig {
    const model: ModelConfig = {
      vocab_size: facts.vocab_size,
      n_layer: intField("c-n_layer", "Layers", 1, 24),
      n_embd: intField("c-n_embd", "Width", 8, 1024),
      n_head: intField("c-n_head", "Heads", 1, 16),
      block_size: intField("c-block_size", "Context", 8, 1024),
    };
    if (model.n_embd % model.n_head !== 0) throw new Error(`Width ${model.n_embd} must divide evenly by Heads ${model.n_head}.`);
    checkModelConfig(model);
    return model;
  }

  settings(): RunSettings {
    const { model, train } = this.config();
    return {
      model,
      train,
      steps: this.steps(),
      intervals: this.intervals(),
      backend: this.backend(),
    };
  }

  /** What Fine-tune runs with on the loaded `model`: its own steps and learning rate over the Advanced settings, and the adapter's. */
  fineTune(model: ModelConfig): { settings: RunSettings; lora: LoraSettings } {
    const lr = Number($<HTMLInputElement>("#lora-lr").value);
    if (!(lr > 0 && lr <= 1)) throw new Error("The fine-tuning learning rate must be above 0 and at most 1.");
    const alpha = Number($<HTMLInputElement>("#lora-alpha").value);
    if (!(alpha > 0 && alpha <= 10_000)) throw new Error("Alpha must be above 0 and at most 10000.");
    const targets = [...document.querySelectorAll<HTMLInputElement>("input[name=lora-target]:checked")].map((i) => i.value as Projection);
    if (!targets.length) throw new Error("Choose at least one projection for the adapter.");
    return {
      settings: { model, train: { ...this.train(), lr }, steps: intField("lora-steps", "Fine-tuning steps", 1, 1_000_000), intervals: this.intervals(), backend: this.backend() },
      lora: { rank: intField("lora-rank", "Rank", 1, facts.lora.max_rank), alpha, targets },
    };
  }

  intervals(): Intervals {
    return {
      evalEvery: intField("eval-every", "Validate every", 1, 100_000),
      saveEvery: intField("save-every", "Save every", 1, 100_000),
    };
  }

  /** Shows a loaded run's own target and intervals, which Resume then continues with. */
  showRun(steps: number, intervals: Intervals): void {
    $<HTMLInputElement>("#steps").value = String(steps);
    $<HTMLInputElement>("#eval-every").value = String(intervals.evalEvery);
    $<HTMLInputElement>("#save-every").value = String(intervals.saveEvery);
  }

  steps(): number {
    return intField("steps", "Steps", 1, 1_000_000);
  }

  /** Names what Best available trains on here, and why when the GPU was passed over. */
  showBest(kind: "webgpu" | "wasm", reason: string | null): void {
    this.fits.clear(); // checked against what "auto" meant before
    $("#backend option[value=auto]").textContent = `Best available: ${kind === "webgpu" ? "WebGPU" : "WebAssembly (CPU)"}`;
    const note = $("#backend-note");
    note.textContent = reason ?? "";
    note.hidden = reason === null;
  }

  backend(): BackendChoice {
    return $<HTMLSelectElement>("#backend").value as BackendChoice;
  }

  private describeCustom(): void {
    const error = $("#custom-error");
    try {
      const model = this.customModel();
      $('[data-preset-params="custom"]').textContent = `${count(paramCount(model))} parameters`;
      error.textContent = "";
    } catch (e) {
      $('[data-preset-params="custom"]').textContent = "";
      $('[data-preset-memory="custom"]').textContent = "";
      error.textContent = (e as Error).message;
    }
  }

  /** A key naming the shape, batch and backend a time-per-step figure or a fit belongs to. */
  measureKey(): string {
    const { model, train } = this.config();
    return this.key(this.presetId(), model, train.batch_size);
  }

  private key(id: string, model: ModelConfig, batch: number): string {
    return `${id}:${model.n_layer}x${model.n_embd}x${model.n_head}x${model.block_size}:b${batch}:${this.backend()}`;
  }

  /**
   * The fits to ask the worker for: every size's card shows the memory its run
   * would hold on the chosen backend (the selected size at the batch under
   * Advanced, the others at their own), and the selected one's limits.
   */
  fitRequests(): { key: string; model: ModelConfig; batch: number }[] {
    const selected = this.presetId();
    const out = [];
    for (const p of presets()) {
      const batch = p.id === selected ? this.config().train.batch_size : p.train.batch_size;
      out.push({ key: this.key(p.id, p.model, batch), model: p.model, batch });
    }
    if (selected === "custom") {
      const { model, train } = this.config();
      out.push({ key: this.key("custom", model, train.batch_size), model, batch: train.batch_size });
    }
    for (const { key } of out) this.memoryKeys.set(key.split(":")[0], key);
    return out;
  }

  /**
   * The fit to ask for of fine-tuning the loaded `model` with the adapter chosen; null, and none
   * shown, with no model that can be fine-tuned or while a field is invalid (its error shows on Fine-tune).
   */
  fineTuneFit(model: ModelConfig | null): { key: string; model: ModelConfig; batch: number; lora: LoraSettings } | null {
    let settings, lora;
    try {
      if (!model) throw new Error("no model to fine-tune");
      ({ settings, lora } = this.fineTune(model));
    } catch {
      this.fineTuneKey = "";
      $("#lora-memory").hidden = true;
      return null;
    }
    const batch = settings.train.batch_size;
    this.fineTuneKey = `${FINE_TUNE}:${this.key("loaded", model, batch)}:r${lora.rank}:${lora.targets.join(",")}`;
    return { key: this.fineTuneKey, model, batch, lora };
  }

  showMeasured(key: string, ms: number | null, backend: string | null): void {
    const id = key.split(":")[0];
    const node = document.querySelector(`[data-preset-speed="${id}"]`);
    if (!node) return;
    if (ms === null) {
      node.textContent = "time per step: could not measure";
      return;
    }
    this.measured.set(key, ms);
    node.textContent = `≈ ${msPerStep(ms)} per step here (${backend === "webgpu" ? "WebGPU" : "WASM"}, measured)`;
    this.showNote();
  }

  showFit(key: string, fit: Fit): void {
    this.fits.set(key, fit);
    const id = key.split(":")[0];
    if (id === FINE_TUNE) {
      if (key !== this.fineTuneKey) return;
      const node = $("#lora-memory");
      const held = fit.bytes === null ? null : `Fine-tuning the loaded model holds ${bytes(fit.bytes)} (${fit.kind === "webgpu" ? "WebGPU" : "WASM"}).`;
      node.textContent = [held, fit.problem, fit.note].filter(Boolean).join(" ");
      node.hidden = !node.textContent;
      return;
    }
    if (this.memoryKeys.get(id) === key) {
      $(`[data-preset-memory="${id}"]`).textContent = fit.bytes === null ? "" : `${bytes(fit.bytes)} while training (${fit.kind === "webgpu" ? "WebGPU" : "WASM"})`;
    }
    this.showNote();
  }

  /**
   * Says before Start what the chosen run will meet: a limit of this device
   * its shape exceeds (data-problem="yes"), how it runs anyway, and how long it
   * takes at the measured time per step when that is over an hour.
   */
  showNote(): void {
    const node = $("#start-note");
    let key: string;
    let steps: number;
    try {
      key = this.measureKey();
      steps = this.steps();
    } catch {
      node.hidden = true; // the fields' own errors say what is wrong
      return;
    }
    const fit = this.fits.get(key);
    const ms = this.measured.get(key);
    const long = ms !== undefined && ms * steps > facts.app.long_run_s * 1000
      ? `A new run of ${steps} steps takes about ${duration(ms * steps)} here, at ≈ ${msPerStep(ms)} a step.`
      : null;
    const text = [fit?.problem, fit?.note, long].filter(Boolean).join(" ");
    node.textContent = text;
    node.dataset.problem = fit?.problem ? "yes" : "no";
    node.hidden = !text;
  }
}
