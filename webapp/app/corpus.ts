// Choosing the text to train on: a bundled corpus (checked against its
// manifest's sha256), an uploaded file, or pasted text. Refusals explain why.
import facts from "../../tinygpt/facts.json";
import { sha256Hex } from "../engine/data";
import { $, el } from "./dom";
import { bytes as fmtBytes } from "./format";

const LIMIT = facts.data.max_upload_bytes;

function tooBig(what: string, n: number): string {
  const exact = (b: number) => `${fmtBytes(b)} (${b.toLocaleString("en")} bytes)`;
  return `${what} is ${exact(n)}; the limit is ${exact(LIMIT)}.`;
}

export interface BundledCorpus {
  id: string;
  name: string;
  file: string;
  bytes: number;
  sha256: string;
  license: string;
  source: string;
}

export class CorpusError extends Error {}

/** Text a byte-level model can learn from: non-empty, within the limit, UTF-8 without NUL bytes. */
export function checkText(what: string, data: Uint8Array): void {
  if (data.length === 0) throw new CorpusError(`${what} is empty: there is nothing to learn from.`);
  if (data.length > LIMIT) throw new CorpusError(tooBig(what, data.length));
  if (data.includes(0)) throw new CorpusError(`${what} looks binary (it contains NUL bytes); choose a text file.`);
  try {
    new TextDecoder("utf-8", { fatal: true }).decode(data);
  } catch {
    throw new CorpusError(`${what} is not UTF-8 text; choose a text file.`);
  }
}

export class CorpusPicker {
  private bundled: BundledCorpus[] = [];
  private select = $<HTMLSelectElement>("#corpus-select");
  private status = $("#corpus-status");

  constructor() {
    for (const radio of document.querySelectorAll<HTMLInputElement>("input[name=corpus-source]")) {
      radio.addEventListener("change", () => this.showSource());
    }
    this.select.addEventListener("change", () => this.describe());
    $<HTMLInputElement>("#corpus-file").addEventListener("change", () => this.preview());
    this.showSource();
  }

  private source(): string {
    return document.querySelector<HTMLInputElement>("input[name=corpus-source]:checked")?.value ?? "bundled";
  }

  private showSource(): void {
    const s = this.source();
    $("#corpus-bundled").hidden = s !== "bundled";
    $("#corpus-upload").hidden = s !== "upload";
    $("#corpus-paste").hidden = s !== "paste";
    this.status.textContent = "";
  }

  async loadManifest(): Promise<void> {
    try {
      const res = await fetch("/corpora/manifest.json");
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      this.bundled = ((await res.json()) as { corpora: BundledCorpus[] }).corpora;
    } catch (e) {
      this.bundled = [];
      this.status.textContent = `The bundled corpora could not be listed (${(e as Error).message}); upload or paste a text instead.`;
    }
    this.select.replaceChildren(...this.bundled.map((c) => el("option", { value: c.id }, `${c.name} (${fmtBytes(c.bytes)})`)));
    if (!this.bundled.length) this.select.append(el("option", { value: "" }, "none available"));
    this.describe();
  }

  private describe(): void {
    const c = this.bundled.find((x) => x.id === this.select.value);
    $("#corpus-about").textContent = c ? `${c.source} · ${c.license}` : "";
  }

  private preview(): void {
    const file = $<HTMLInputElement>("#corpus-file").files?.[0];
    if (!file) return;
    this.status.textContent = file.size > LIMIT ? tooBig(file.name, file.size) : `${file.name}: ${fmtBytes(file.size)}`;
  }

  /** The chosen text as bytes, or a CorpusError saying what is wrong with it. */
  async read(): Promise<{ name: string; bytes: Uint8Array }> {
    const s = this.source();
    if (s === "upload") {
      const file = $<HTMLInputElement>("#corpus-file").files?.[0];
      if (!file) throw new CorpusError("Choose a text file to upload first.");
      // Refuse by size before reading, so a huge file is never loaded.
      if (file.size > LIMIT) throw new CorpusError(tooBig(file.name, file.size));
      const data = new Uint8Array(await file.arrayBuffer());
      checkText(file.name, data);
      return { name: file.name, bytes: data };
    }
    if (s === "paste") {
      const data = new TextEncoder().encode($<HTMLTextAreaElement>("#corpus-text").value);
      checkText("The pasted text", data);
      return { name: "pasted text", bytes: data };
    }
    const c = this.bundled.find((x) => x.id === this.select.value);
    if (!c) throw new CorpusError("No bundled corpus is available; upload or paste a text instead.");
    this.status.textContent = `Downloading ${c.name}…`;
    const res = await fetch(new URL(c.file, new URL("/corpora/", location.href)));
    if (!res.ok) throw new CorpusError(`${c.name} could not be downloaded (HTTP ${res.status}).`);
    const data = new Uint8Array(await res.arrayBuffer());
    if ((await sha256Hex(data)) !== c.sha256) throw new CorpusError(`${c.name} arrived damaged (its sha256 does not match the manifest); reload and try again.`);
    this.status.textContent = `${c.name}: ${fmtBytes(data.length)}, checked.`;
    return { name: c.name, bytes: data };
  }
}
