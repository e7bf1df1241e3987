// The gallery: a modal dialog with a card per model of /gallery/manifest.json.
// Load fetches one file at a time (download.ts: cached, checked), hands it to
// the worker, which checks it as any import and keeps the current model when
// it refuses, and then sets the sample settings to the card's. The download's
// state is on #gallery-load as data attributes, for people's tools and tests.
import type { WorkerClient } from "./client";
import { $, el } from "./dom";
import { DownloadError, fetchVerified } from "./download";
import * as fmt from "./format";
import type { Setup } from "./setup";

/** A model's sample: the settings that wrote it, and the bytes after the prompt. */
export interface GallerySample {
  prompt: string;
  temperature: number;
  top_k: number;
  top_p: number;
  seed: number;
  tokens: number;
  text: string;
}

/** The keys of a manifest entry the app shows (FIELDS in tinygpt/site_build/gallery.py lists all; the build checks them). */
interface GalleryModel {
  id: string;
  name: string;
  blurb: string;
  corpus: { name: string; licence: string };
  config: { n_layer: number; n_embd: number; n_head: number; block_size: number };
  parameters: number;
  dtype: string;
  file: string;
  bytes: number;
  sha256: string;
  training: { steps: number; wall_time_s: number | null; hardware: string; date: string; command: string };
  val_loss: number;
  sample: GallerySample;
}

type LoadState = "idle" | "downloading" | "checking" | "loading" | "loaded" | "failed" | "cancelled";

const FOCUSABLE = "button, summary, a[href], input, select, textarea";

export class GalleryView {
  private models: GalleryModel[] = [];
  private dialog = $<HTMLDialogElement>("#gallery");
  private box = $("#gallery-load");
  private text = $("#gallery-load-text");
  private bar = $<HTMLProgressElement>("#gallery-progress");
  private cancel = $<HTMLButtonElement>("#gallery-cancel");
  /** The load under way: one at a time. */
  private loading: AbortController | null = null;

  constructor(
    private client: WorkerClient,
    private setup: Setup,
    private mayDiscard: (action: string) => Promise<boolean>,
    private land: (sample: GallerySample) => void,
  ) {
    $("#btn-gallery").addEventListener("click", () => this.dialog.showModal());
    $("#gallery-close").addEventListener("click", () => this.dialog.close());
    this.cancel.addEventListener("click", () => this.loading?.abort());
    // Closing the dialog (Escape too) gives up a download: nothing outside it shows one.
    this.dialog.addEventListener("close", () => this.loading?.abort());
    this.dialog.addEventListener("keydown", (e) => this.trapTab(e));
  }

  async loadManifest(): Promise<void> {
    try {
      const res = await fetch("/gallery/manifest.json");
      this.models = res.ok ? ((await res.json()) as { models: GalleryModel[] }).models : [];
    } catch {
      this.models = [];
    }
    $("#gallery-list").replaceChildren(...this.models.map((m) => this.card(m)));
    $("#btn-gallery").hidden = this.models.length === 0;
  }

  private card(m: GalleryModel): HTMLElement {
    const li = el("li", { class: "gallery-card", "data-model": m.id });
    const facts = el("dl", { class: "gallery-facts" });
    const wall = m.training.wall_time_s === null ? "" : ` in ${fmt.duration(m.training.wall_time_s * 1000)}`;
    const rows: [string, string][] = [
      ["Text", `${m.corpus.name} (${m.corpus.licence})`],
      ["Size", `${fmt.bytes(m.bytes)} (${m.dtype})`],
      ["Parameters", `${fmt.count(m.parameters)}: ${m.config.n_layer} layers × ${m.config.n_embd} wide, ${m.config.n_head} heads, context ${m.config.block_size}`],
      ["Validation loss", fmt.loss(m.val_loss)],
      ["Trained", `${m.training.steps.toLocaleString("en")} steps${wall} on ${m.training.hardware}, ${m.training.date}`],
    ];
    for (const [term, value] of rows) facts.append(el("dt", {}, term), el("dd", {}, value));
    const how = el("details", { class: "gallery-command" });
    how.append(el("summary", {}, "The command"), el("code", {}, m.training.command));
    const s = m.sample;
    const sample = el("figure", { class: "gallery-sample" });
    const pre = el("pre", {});
    pre.append(el("span", { class: "gallery-prompt" }, s.prompt), document.createTextNode(s.text));
    const settings = s.temperature === 0 ? "greedy" : `temperature ${s.temperature}, top-k ${s.top_k || "off"}, top-p ${s.top_p}, seed ${s.seed}`;
    sample.append(el("figcaption", {}, `A sample (${s.tokens} bytes, ${settings}):`), pre);
    const load = el("button", { type: "button", class: "gallery-load-model", "aria-label": `Load ${m.name}` }, "Load");
    load.addEventListener("click", () => void this.load(m));
    li.append(el("h3", {}, m.name), el("p", {}, m.blurb), facts, how, sample, load);
    return li;
  }

  private show(state: LoadState, text: string, m?: GalleryModel): void {
    this.box.hidden = false;
    this.box.dataset.state = state;
    if (m) this.box.dataset.model = m.id;
    this.text.textContent = text;
    // Once the bytes are in, the load runs to its end: the worker's import cannot be stopped halfway.
    this.cancel.disabled = state !== "downloading";
    for (const b of this.dialog.querySelectorAll<HTMLButtonElement>(".gallery-load-model")) b.disabled = this.loading !== null;
  }

  private async load(m: GalleryModel): Promise<void> {
    if (this.loading || !(await this.mayDiscard(`Loading ${m.name}`))) return;
    const abort = (this.loading = new AbortController());
    const start = performance.now();
    this.box.dataset.received = "0";
    delete this.box.dataset.source;
    this.bar.max = m.bytes;
    this.bar.value = 0;
    this.show("downloading", `${m.name}: looking in this browser's cache…`, m);
    let source: string | undefined;
    try {
      const got = await fetchVerified({ url: new URL(m.file, new URL("/gallery/", location.href)).href, bytes: m.bytes, sha256: m.sha256 }, abort.signal, (received) => {
        this.bar.value = received;
        this.box.dataset.received = String(received);
        const rate = received / Math.max((performance.now() - start) / 1000, 1e-3);
        this.show("downloading", `${m.name}: ${fmt.bytes(received)} of ${fmt.bytes(m.bytes)} · ${fmt.bytes(rate)}/s`);
        if (received === m.bytes) this.show("checking", `${m.name}: checking its sha256…`);
      });
      source = got.source;
      this.box.dataset.source = got.source;
      this.bar.value = m.bytes;
      const notes = [got.repaired ? "the copy kept in this browser was damaged, so it was downloaded again" : "", got.uncached ? "this browser would not keep a copy, so the next load downloads again" : ""].filter(Boolean);
      this.show("loading", `${m.name}: ${got.source === "cache" ? "from this browser's cache" : "downloaded and checked"}${notes.length ? ` (${notes.join("; ")})` : ""}; loading it into the trainer…`);
      const ref = `gallery:${m.id}`;
      const done = new Promise<boolean>((resolve) => {
        const off = this.client.on("imported", (r) => {
          if (r.ref !== ref) return;
          off();
          resolve(r.ok);
        });
      });
      this.client.send({ type: "import", name: m.name, file: new Blob([got.bytes as Uint8Array<ArrayBuffer>]), backend: this.setup.backend(), ref });
      if (!(await done)) {
        this.loading = null;
        return this.show("failed", `${m.name} could not be loaded (the messages say why); the current model is unchanged.`);
      }
    } catch (e) {
      this.loading = null;
      if (abort.signal.aborted) return this.show("cancelled", `${m.name}: download cancelled; the current model is unchanged.`);
      const why = e instanceof DownloadError ? e.message : `could not be downloaded (${(e as Error).message || "the network failed"})`;
      return this.show("failed", `${m.name} ${why}; the current model is unchanged.`);
    }
    this.loading = null;
    this.show("loaded", `${m.name} is loaded (${source === "cache" ? "from this browser's cache" : "downloaded"}).`);
    this.dialog.close();
    this.land(m.sample);
  }

  /** Tab and Shift+Tab go round the dialog's controls instead of leaving for the browser's. */
  private trapTab(e: KeyboardEvent): void {
    if (e.key !== "Tab") return;
    const items = [...this.dialog.querySelectorAll<HTMLElement>(FOCUSABLE)].filter((x) => !(x as HTMLButtonElement).disabled && x.getClientRects().length > 0);
    if (items.length === 0) return;
    const [first, last] = [items[0], items[items.length - 1]];
    const at = document.activeElement;
    const leaving = e.shiftKey ? at === first || !this.dialog.contains(at) : at === last;
    if (!leaving) return;
    e.preventDefault();
    (e.shiftKey ? last : first).focus();
  }
}
