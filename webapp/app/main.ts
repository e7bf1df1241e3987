// The app page's script: starts the worker, shows what this device offers,
// and wires the trainer UI to the worker's messages.
import "./app.css";
import { plainWords } from "../worker/errors";
import type { Caps, Status } from "../worker/protocol";
import type { ModelConfig } from "../engine/types";
import type { LoraSettings } from "../engine/lora";
import { type BackendKind, showCaps, showPills } from "./caps";
import { showNudge } from "./nudge";
import { WorkerClient } from "./client";
import { confirmDiscard } from "./confirm";
import { CorpusError, CorpusPicker } from "./corpus";
import { $ } from "./dom";
import { wireMetricExplainers } from "./explainers";
import { FilesView } from "./files";
import { keepFocus } from "./focus";
import { GalleryView } from "./gallery";
import { LiveFeed } from "./live";
import { Messages } from "./messages";
import { ProgressView } from "./progress";
import { SampleView } from "./sample";
import { Setup } from "./setup";

const root = $("#app");
// A dismissed message that held focus hands it to the first run control that can be pressed.
const messages = new Messages($("#messages"), () => document.querySelector<HTMLElement>("#train .buttons button:not(:disabled)"));
const error = (text: string) => messages.show("error", text);
const client = new WorkerClient(root.dataset.worker!, error);
const progress = new ProgressView();
const corpus = new CorpusPicker();
const setup = new Setup(() => measureSelection());
const files = new FilesView(client, setup, error, (text, resume) => messages.show("info", text, [{ label: "Resume training", run: resume }]), (action) => mayDiscard(action));
const sampler = new SampleView(client, error);
const gallery = new GalleryView(client, setup, (action) => mayDiscard(action), (sample) => sampler.use(sample));
const live = new LiveFeed();

const MEASURE_DELAY_MS = 1500;
let status: Status | null = null;
let caps: Caps | null = null;
/** What Best available means here, once the worker has measured it. */
let best: BackendKind | null = null;

/**
 * The pills name what runs: the loaded model's backend and paths, else what a
 * new run of the selected size would get, as the worker worked it out (its fit),
 * or until it has, the backend alone.
 */
function refreshPills(): void {
  if (status?.backend) return showPills({ kind: status.backend as BackendKind, paths: status.paths });
  if (!caps) return;
  let fit;
  try {
    fit = setup.fits.get(setup.measureKey());
  } catch {
    // an invalid custom shape: no fit, the backend alone
  }
  const choice = setup.backend();
  showPills(fit ?? { kind: choice !== "auto" ? choice : best ?? (caps.webgpu ? "webgpu" : "wasm"), paths: [] });
}

function button(id: string): HTMLButtonElement {
  return $<HTMLButtonElement>(`#${id}`);
}

/** A model loaded from a file, with no run yet: Continue training trains it further as a new run. */
function fromFile(): boolean {
  return status !== null && status.model !== null && status.runId === null;
}

/**
 * True when replacing the model in this tab loses nothing, or the user says
 * to go ahead although it has steps that are saved nowhere else.
 */
async function mayDiscard(action: string): Promise<boolean> {
  const n = status?.unsaved ?? 0;
  if (n <= 0) return true;
  const steps = `${n} step${n === 1 ? "" : "s"}`;
  return confirmDiscard(`The model in this tab has ${steps} of training that no checkpoint holds (the last save did not complete). ${action} replaces it and loses them; export it first to keep them.`, `${action} anyway`);
}

function applyStatus(s: Status): void {
  status = s;
  root.dataset.state = s.state;
  const idle = s.state === "empty" || s.state === "ready";
  const loaded = s.model !== null;
  const still = s.state === "ready" || s.state === "paused"; // loaded and not busy
  // A paused run is continued or ended (Stop, Reset) before a new model can start.
  button("btn-start").disabled = !idle;
  button("btn-pause").disabled = s.state !== "training";
  button("btn-stop").disabled = !(s.state === "training" || s.state === "paused");
  button("btn-resume").disabled = !(still && (s.canTrain || fromFile()));
  // Shown on a loaded model that is not an adapter itself, while nothing runs: the row keeps its one line on a desk.
  button("btn-finetune").hidden = !(still && loaded && !s.adapter);
  button("btn-finetune").disabled = s.state !== "ready";
  button("btn-merge").hidden = !s.adapter;
  button("btn-merge").disabled = !(still && s.adapter);
  button("btn-reset").disabled = !(still && loaded);
  button("btn-sample").disabled = !(still && loaded);
  button("btn-sample-stop").disabled = s.state !== "sampling";
  button("btn-export").disabled = !(still && loaded);
  sampler.showAdapter(s.adapter !== null, still && loaded);
  for (const input of document.querySelectorAll<HTMLInputElement | HTMLButtonElement>("#import-file, #btn-gallery")) input.disabled = !idle;
  progress.setStatus(s);
  live.report(s);
  refreshPills();
  setup.showLoaded(still ? s.model : null, s.step, fromFile(), s.adapter);
  if (idle) measureSelection();
}

/**
 * Measures the selected model's time per step on this device, once per shape
 * and backend, while idle; after a pause in clicking, so flicking through the
 * presets (or pressing Start right away) does not keep the device busy.
 */
let measureTimer = 0;
function measureSelection(): void {
  checkSelection();
  clearTimeout(measureTimer);
  measureTimer = window.setTimeout(() => {
    if (caps === null || (status && status.state !== "empty" && status.state !== "ready")) return;
    let key: string;
    try {
      key = setup.measureKey();
    } catch {
      return; // an invalid custom shape: its error is shown beside the fields
    }
    if (setup.measured.has(key) || pendingMeasure.has(key)) return;
    pendingMeasure.add(key);
    const { model, train } = setup.config();
    client.send({ type: "measure", key, model, batch: train.batch_size, backend: setup.backend() });
  }, MEASURE_DELAY_MS);
}
const pendingMeasure = new Set<string>();

/**
 * Asks the worker at once what each size would hold on the chosen backend and
 * whether the selected one fits this device (its answer shows before Start).
 */
function checkSelection(): void {
  let requests;
  try {
    requests = setup.fitRequests();
  } catch {
    return setup.showNote(); // an invalid custom shape or batch: its error is shown beside the fields
  }
  // And what fine-tuning the loaded model would hold, where it can be fine-tuned.
  const tune = setup.fineTuneFit(status?.model && !status.adapter ? status.model : null);
  const asks: { key: string; model: ModelConfig; batch: number; lora?: LoraSettings }[] = [...requests, ...(tune ? [tune] : [])];
  for (const { key, model, batch, lora } of asks) {
    const known = setup.fits.get(key);
    if (known) setup.showFit(key, known);
    else client.send({ type: "check", key, model, batch, backend: setup.backend(), lora });
  }
}

/**
 * A new run on the chosen text: "start" a fresh model, "continueFile" the loaded file's model, or
 * "fineTune" an adapter on the loaded model.
 */
async function start(type: "start" | "continueFile" | "fineTune", trigger: HTMLButtonElement): Promise<void> {
  let settings, lora;
  try {
    ({ settings, lora } = type === "fineTune" ? setup.fineTune(status!.model!) : { settings: setup.settings(), lora: null });
  } catch (e) {
    return void error((e as Error).message);
  }
  if (type === "start" && !(await mayDiscard("Starting a new model"))) return;
  trigger.disabled = true;
  clearTimeout(measureTimer);
  try {
    const text = await corpus.read();
    // A fresh model or adapter starts a new curve; a model trained further gets its history back from the worker.
    if (type !== "continueFile") progress.history([]);
    const data = { name: text.name, bytes: text.bytes };
    client.send(lora ? { type: "fineTune", settings, lora, corpus: data } : { type: type as "start" | "continueFile", settings, corpus: data }, [text.bytes.buffer]);
    // Continue training after a pause goes on to the same target.
    if (lora) setup.showRun(settings.steps, settings.intervals);
    files.persist();
  } catch (e) {
    error(e instanceof CorpusError ? e.message : `The text could not be read: ${plainWords(e)}.`);
    trigger.disabled = false;
  }
}

client.on("message", (m) => {
  const actions = m.resumeRun
    ? [
        // "auto" takes the GPU if it came back and falls back to the CPU, saying so.
        { label: "Resume", run: () => files.open(m.resumeRun!, true, "auto") },
        { label: "Resume on the CPU", run: () => files.open(m.resumeRun!, true, "wasm") },
      ]
    : [];
  messages.show(m.level, m.text, actions);
});
client.on("caps", (m) => {
  caps = m.caps;
  showCaps(m.caps);
  showNudge(m.caps);
  refreshPills();
  measureSelection();
});
client.on("best", (m) => {
  setup.showBest(m.kind, m.reason);
  best = m.kind;
  refreshPills();
  checkSelection();
});
client.on("checked", ({ type: _, key, ...fit }) => {
  setup.showFit(key, fit);
  refreshPills();
});
client.on("status", (m) => applyStatus(m.status));
client.on("progress", (m) => progress.progress(m.progress));
client.on("history", (m) => progress.history(m.history));
client.on("run", (m) => {
  setup.selectModel(m.model);
  if (m.recorded) setup.showRun(m.steps, m.intervals);
  if (m.train) setup.showTrain(m.train);
  progress.elapsed(m.elapsedMs);
});
client.on("saved", (m) => progress.saved(m.step));
client.on("measured", (m) => {
  pendingMeasure.delete(m.key);
  if (m.error !== "busy") setup.showMeasured(m.key, m.msPerStep, m.backend);
});

button("btn-start").addEventListener("click", () => void start("start", button("btn-start")));
button("btn-finetune").addEventListener("click", () => void start("fineTune", button("btn-finetune")));
button("btn-merge").addEventListener("click", () => client.send({ type: "merge" }));
button("btn-pause").addEventListener("click", () => client.request("pause"));
button("btn-stop").addEventListener("click", () => client.request("stop"));
button("btn-reset").addEventListener("click", async () => {
  if (await mayDiscard("Reset")) client.send({ type: "reset" });
});
button("btn-resume").addEventListener("click", () => {
  if (fromFile()) return void start("continueFile", button("btn-resume"));
  try {
    client.send({ type: "resume", steps: setup.steps(), intervals: setup.intervals() });
  } catch (e) {
    error((e as Error).message);
  }
});
$("#backend").addEventListener("change", () => {
  refreshPills();
  measureSelection();
});

wireMetricExplainers();
keepFocus(root);
// ?gate-fail=relaxed-simd (a comma list of lever ids) makes those levers' gates fail: for tests.
const gateFail = new URLSearchParams(location.search).get("gate-fail")?.split(",").filter(Boolean) ?? [];
client.send({ type: "init", wasmUrl: root.dataset.wasm ?? "", control: client.control, gateFail });
client.send({ type: "caps" });
client.send({ type: "listCheckpoints" });
client.ping().then((ms) => {
  const node = $("#worker-status");
  node.textContent = `Worker running (answered in ${ms.toFixed(1)} ms).`;
  node.dataset.ready = "yes";
});
void corpus.loadManifest();
void gallery.loadManifest();
void files.showStorage();
void live.start();
