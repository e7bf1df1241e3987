// Models and storage: saved runs (resume after a reload, delete with undo),
// export to a .tinygpt download, import from a file, and the quota readout.
// What replaces the model in the tab asks first when that model has unsaved
// steps (mayDiscard).
import facts from "../../tinygpt/facts.json";
import type { CheckpointInfo } from "../worker/protocol";
import type { WorkerClient } from "./client";
import { $, el } from "./dom";
import * as fmt from "./format";
import type { Setup } from "./setup";

const UNDO_MS = facts.app.delete_undo_s * 1000;

export class FilesView {
  private list: CheckpointInfo[] = [];
  /** Runs deleted in the list whose files stay until their undo expires. */
  private deleting = new Map<string, number>();

  constructor(
    private client: WorkerClient,
    private setup: Setup,
    private onError: (text: string) => void,
    private onOffer: (text: string, resume: () => void) => void,
    private mayDiscard: (action: string) => Promise<boolean>,
  ) {
    $("#btn-export").addEventListener("click", () => client.send({ type: "export" }));
    client.on("exported", (m) => this.download(m.name, m.bytes));
    const input = $<HTMLInputElement>("#import-file");
    input.addEventListener("change", () => {
      const file = input.files?.[0];
      input.value = "";
      if (file) void this.importFile(file);
    });
    client.on("checkpoints", (m) => this.showRuns(m.list));
    client.on("saved", () => {
      client.send({ type: "listCheckpoints" });
      void this.showStorage();
    });
  }

  private download(name: string, bytes: Uint8Array): void {
    const url = URL.createObjectURL(new Blob([bytes as Uint8Array<ArrayBuffer>], { type: "application/octet-stream" }));
    const a = el("a", { href: url, download: name });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10_000);
  }

  private async importFile(file: File): Promise<void> {
    if (!(await this.mayDiscard(`Loading ${file.name}`))) return;
    // The worker reads and checks the file before it replaces the current model.
    this.client.send({ type: "import", name: file.name, file, backend: this.setup.backend(), ref: "file" });
  }

  private offered = false;
  private recheck = 0;

  private showRuns(list: CheckpointInfo[]): void {
    this.list = list;
    // On arrival, the newest run nobody has open is offered in a message too.
    const newest = list.find((c) => !c.busy && !c.current && !this.deleting.has(c.id));
    if (!this.offered && newest) {
      const what = newest.base ? `an adapter fine-tuning ${newest.base}` : `${newest.model.n_layer} layers × ${newest.model.n_embd}`;
      this.onOffer(`A saved run is waiting: ${what}, ${newest.dataset ?? "no text"}, step ${newest.step}, saved ${fmt.ago(newest.savedAt)}.`, () => this.open(newest.id, true));
    }
    const busy = list.some((c) => c.busy);
    this.offered ||= newest !== undefined || !busy;
    // A run another tab holds frees up when that tab closes (or, after a reload,
    // once the old page's worker has gone): look again shortly.
    clearTimeout(this.recheck);
    if (busy) this.recheck = window.setTimeout(() => this.client.send({ type: "listCheckpoints" }), 1000);
    const box = $("#resume-offer");
    const ul = $("#checkpoint-list");
    ul.replaceChildren();
    box.hidden = list.length === 0;
    for (const c of list) {
      const li = el("li", { "data-run": c.id });
      const shape = `${c.base ? `adapter on ${c.base}, ` : ""}${c.model.n_layer} layers × ${c.model.n_embd}`;
      const about = `${shape} · ${c.dataset ?? "no text"} · step ${c.step} · ${fmt.bytes(c.bytes)}`;
      if (this.deleting.has(c.id)) {
        li.dataset.deleted = "yes";
        li.append(el("span", {}, `Deleted: ${about}. Its files go in ${facts.app.delete_undo_s} s unless you undo.`));
        const undo = el("button", { type: "button", class: "undo-delete" }, "Undo");
        undo.addEventListener("click", () => this.undoDelete(c.id));
        li.append(undo);
        ul.append(li);
        continue;
      }
      li.append(el("span", {}, `${about} · saved ${fmt.ago(c.savedAt)}${c.busy ? " · open in another tab" : ""}${c.current ? " · loaded here" : ""}`));
      const resume = el("button", { type: "button", class: "resume-run" }, "Resume training");
      const load = el("button", { type: "button" }, "Load to sample");
      const del = el("button", { type: "button" }, "Delete");
      for (const b of [resume, load, del]) b.disabled = c.busy || c.current;
      resume.addEventListener("click", () => void this.open(c.id, true));
      load.addEventListener("click", () => void this.open(c.id, false));
      del.addEventListener("click", () => this.delete(c.id));
      li.append(resume, load, del);
      ul.append(li);
    }
  }

  /** Marks a run deleted; its files are removed once the undo has expired (a tab closed before then keeps them). */
  private delete(id: string): void {
    this.deleting.set(id, window.setTimeout(() => {
      this.deleting.delete(id);
      this.client.send({ type: "deleteCheckpoint", id });
    }, UNDO_MS));
    this.showRuns(this.list);
    $<HTMLButtonElement>(`#checkpoint-list li[data-run="${id}"] .undo-delete`).focus();
  }

  private undoDelete(id: string): void {
    clearTimeout(this.deleting.get(id));
    this.deleting.delete(id);
    this.showRuns(this.list);
    $<HTMLButtonElement>(`#checkpoint-list li[data-run="${id}"] .resume-run`).focus();
  }

  async open(id: string, train: boolean, backend = this.setup.backend()): Promise<void> {
    if (!(await this.mayDiscard(train ? "Resuming that run" : "Loading that run"))) return;
    try {
      this.client.send({ type: "openCheckpoint", id, backend, train, steps: this.setup.steps(), intervals: this.setup.intervals() });
    } catch (e) {
      this.onError((e as Error).message);
    }
  }

  /** Asks for persistent storage once training starts (browsers grant it to engaged sites). */
  async persist(): Promise<void> {
    if (navigator.storage?.persist && !(await navigator.storage.persisted())) await navigator.storage.persist();
    await this.showStorage();
  }

  async showStorage(): Promise<void> {
    const node = $("#storage");
    if (!navigator.storage?.estimate) {
      node.textContent = "This browser does not report its storage; checkpoints may not survive a reload.";
      return;
    }
    const [{ usage = 0, quota = 0 }, persisted] = await Promise.all([navigator.storage.estimate(), navigator.storage.persisted()]);
    node.textContent = `Browser storage for this site: ${fmt.bytes(usage)} used of ${fmt.bytes(quota)}. ${persisted ? "Kept until you clear it." : "The browser may clear it when space runs low; export models you want to keep."} Models are ${facts.format.extension} files.`;
  }
}
