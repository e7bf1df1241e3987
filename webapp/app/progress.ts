// The training readout: stats, the GPU activity badge and the loss chart,
// fed by the worker's status and per-step progress messages.
import type { HistoryPoint } from "../engine/types";
import type { Progress, Status } from "../worker/protocol";
import { LossChart } from "./chart";
import { $, el } from "./dom";
import * as fmt from "./format";

export function backendName(kind: string | null): string {
  return kind === "webgpu" ? "WebGPU" : kind === "wasm" ? "WebAssembly (CPU)" : "–";
}

export class ProgressView {
  readonly chart = new LossChart($<HTMLCanvasElement>("#loss-chart"));
  private status: Status | null = null;
  private lastVal: number | undefined;
  private badge = $("#gpu-badge");

  // The text alternative to the chart, rendered only while its <details> is open.
  private points: HistoryPoint[] = [];
  private table = $<HTMLDetailsElement>("#loss-table-box");
  private rows = $("#loss-table tbody");

  constructor() {
    const log = $<HTMLInputElement>("#log-scale");
    log.addEventListener("change", () => this.chart.setLog(log.checked));
    this.table.addEventListener("toggle", () => this.renderTable());
  }

  private row(p: HistoryPoint): HTMLTableRowElement {
    const tr = el("tr", { "data-step": String(p.step) });
    tr.append(el("td", {}, String(p.step)), el("td", {}, fmt.loss(p.train)), el("td", {}, p.val === undefined ? "" : fmt.loss(p.val)));
    return tr;
  }

  private renderTable(): void {
    this.rows.replaceChildren(...(this.table.open ? this.points.map((p) => this.row(p)) : []));
  }

  private record(step: number, train: number, val?: number): void {
    const last = this.points[this.points.length - 1];
    if (last && last.step === step) {
      if (val !== undefined) last.val = val;
      if (this.table.open) this.rows.lastElementChild?.replaceWith(this.row(last));
      return;
    }
    const p: HistoryPoint = val === undefined ? { step, train } : { step, train, val };
    this.points.push(p);
    if (this.table.open) this.rows.append(this.row(p));
  }

  saved(step: number): void {
    $("#save-status").textContent = `Checkpoint saved at step ${step} (${new Date().toLocaleTimeString()}).`;
    $("#save-status").dataset.step = String(step);
  }

  setStatus(s: Status): void {
    this.status = s;
    // The memory is the backend's own count of what it holds (Backend.residentBytes).
    const held = s.residentBytes === null ? "" : ` · holds ${fmt.bytes(s.residentBytes)}`;
    $("#stat-backend").textContent = s.backend ? `${backendName(s.backend)}${s.device ? ` · ${s.device}` : ""}${held}` : "–";
    $("#stat-backend").dataset.backend = s.backend ?? "";
    if (s.model) $("#stat-step").textContent = s.steps ? `${s.step} / ${s.steps}` : String(s.step);
    if (s.state !== "training") this.badge.hidden = true;
  }

  /** A loaded run's training time so far. */
  elapsed(ms: number): void {
    $("#stat-elapsed").textContent = ms > 0 ? fmt.duration(ms) : "–";
  }

  history(points: readonly HistoryPoint[]): void {
    this.chart.reset(points);
    this.points = points.map((p) => ({ ...p }));
    this.renderTable();
    const last = points[points.length - 1];
    this.lastVal = [...points].reverse().find((p) => p.val !== undefined)?.val;
    $("#stat-loss").textContent = fmt.loss(last?.train);
    $("#stat-val").textContent = fmt.loss(this.lastVal);
    if (!points.length) for (const id of ["stat-step", "stat-tps", "stat-elapsed", "stat-eta"]) $(`#${id}`).textContent = "–";
  }

  progress(p: Progress): void {
    this.chart.add(p.step, p.loss, p.val);
    this.record(p.step, p.loss, p.val);
    if (p.val !== undefined) this.lastVal = p.val;
    $("#stat-step").textContent = `${p.step} / ${p.steps}`;
    $("#stat-loss").textContent = fmt.loss(p.loss);
    $("#stat-val").textContent = fmt.loss(this.lastVal);
    $("#stat-tps").textContent = p.tokPerSec ? fmt.rate(p.tokPerSec) : "–";
    $("#stat-elapsed").textContent = fmt.duration(p.elapsedMs);
    $("#stat-eta").textContent = p.etaMs ? fmt.duration(p.etaMs) : "–";
    const onGpu = this.status?.state === "training" && this.status.backend === "webgpu";
    this.badge.hidden = !onGpu;
    if (onGpu && p.tokPerSec) this.badge.textContent = `GPU active · ${fmt.rate(p.tokPerSec)} tok/s`;
    else if (onGpu) this.badge.textContent = "GPU active";
  }
}
