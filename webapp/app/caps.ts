// The "This device" panel: what WebGPU and WebAssembly offer here, each
// lever's numerics-gate verdict with its reason, and the pills, which name the
// path that runs: the loaded model's backend and only the paths it runs, or,
// with no model loaded, what a new run of the selected size would get (the
// worker's fit check says: worker/fit.ts). Detected features of levers with no
// verdict (not built yet) are listed as available, not used.
import facts from "../../tinygpt/facts.json";
import type { Caps } from "../worker/protocol";
import { type Verdict, describeErrors } from "../levers/gate";
import { $, el } from "./dom";
import { explainerFor } from "./explainers";

const backendPill = (id: string) => facts.backends.find((b) => b.id === id)!.pill;

function pill(label: string, explainerKey: string, kind: string): HTMLElement {
  const target = explainerFor(explainerKey);
  const node = el(target ? "button" : "span", { class: `pill pill-${kind}` }, label);
  if (target && node instanceof HTMLButtonElement) {
    node.type = "button";
    node.popoverTargetElement = target;
    node.setAttribute("aria-label", `${label}: what this means`);
  }
  return node;
}

export type BackendKind = "webgpu" | "wasm";

/** What runs: a backend and the optional paths (facts.backends threads, facts.levers ids) it runs. */
export interface RunPath {
  kind: BackendKind;
  paths: readonly string[];
}

export function showPills(path: RunPath): void {
  const pills = $("#pills");
  pills.replaceChildren();
  pills.dataset.backend = path.kind;
  const add = (label: string, key: string, kind: string) => {
    const li = el("li");
    li.append(pill(label, key, kind));
    pills.append(li);
  };
  add(backendPill(path.kind), path.kind, "backend");
  for (const id of path.paths) {
    const lever = facts.levers.find((l) => l.id === id);
    if (lever) add(lever.pill, id, "lever");
    else add(`+${backendPill(id)}`, id, "backend");
  }
}

export function showCaps(caps: Caps): void {
  const box = $("#caps");
  const summary = $("#caps-summary", box);
  const details = $("#caps-details", box);
  details.replaceChildren();

  if (caps.webgpu && caps.adapter) {
    const a = caps.adapter;
    const name = [a.vendor, a.architecture, a.device, a.description].filter(Boolean).join(" · ") || "unnamed adapter";
    summary.textContent = `WebGPU is available: ${name}.`;
    details.append(el("dt", {}, "Adapter features"), el("dd", { id: "caps-features" }, caps.features.join(", ") || "none"));
    details.append(el("dt", {}, "Largest storage buffer"), el("dd", {}, `${caps.maxBufferMiB} MiB`));
  } else {
    summary.textContent = `No WebGPU here (${caps.gpuError ?? "no adapter"}); training runs on the CPU through WebAssembly.`;
  }
  const cpu = `${caps.wasmSimd ? "SIMD" : "no SIMD"}, ${caps.crossOriginIsolated ? `up to ${caps.threads} threads` : "one thread (page not cross-origin isolated)"}`;
  details.append(el("dt", {}, "WebAssembly"), el("dd", {}, cpu));

  const checked = facts.levers.filter((l) => caps.levers[l.id]);
  if (checked.length) {
    const list = el("ul", { id: "caps-gate" });
    for (const lever of checked) {
      const v = caps.levers[lever.id];
      const item = el("li", { "data-lever": lever.id, "data-verdict": v.pass ? "pass" : "fail", "data-cached": v.cached ? "yes" : "no" },
        `${lever.pill}: ${verdictText(v)}`);
      list.append(item);
    }
    const dd = el("dd");
    dd.append(list);
    details.append(el("dt", {}, "Numerics gate"), dd);
  }
  const unused = [...new Set(facts.levers.filter((l) => !caps.levers[l.id] && l.feature && caps.features.includes(l.feature)).map((l) => l.feature!))];
  if (unused.length) {
    details.append(el("dt", {}, "Available, not used yet"), el("dd", { id: "caps-unused" }, unused.join(", ")));
  }
  box.dataset.webgpu = caps.webgpu ? "yes" : "no";
  for (const node of document.querySelectorAll<HTMLElement>("[data-gate]")) node.textContent = onThisDevice(node.dataset.gate!, caps);
}

/** A verdict in words: on or off, why, what it runs here where that depends on the adapter, and whether it was remembered. */
const verdictText = (v: Verdict) => `${v.pass ? "on" : "off"}, ${v.reason}${v.detail ? `, on ${v.detail}` : ""}${v.cached ? " (remembered from an earlier check)" : ""}`;

/** A lever's explainer line: its verdict here and the errors its check measured, or why it has none. */
function onThisDevice(id: string, caps: Caps): string {
  const v = caps.levers[id];
  const lever = facts.levers.find((l) => l.id === id)!;
  if (v) {
    const errors = Object.keys(v.errors).length ? ` Measured against the plain path: ${describeErrors(v.errors)}.` : "";
    return `On this device: ${verdictText(v)}.${errors}`;
  }
  if (lever.status === "planned") return "On this device: not built yet.";
  if (lever.status === "experimental") return "On this device: off, the app does not use this lever yet.";
  // A GPU lever the WebAssembly backend runs too (int8, whose CPU kernels are exact: no kernel check there).
  if (lever.also_wasm && !caps.webgpu) return "On this device: on the CPU (WebAssembly) whenever your model's held-out loss on int8 matches f32's, checked before a sample.";
  const has = lever.backend === "wasm" ? caps.wasmSimd : lever.feature ? caps.features.includes(lever.feature) : caps.webgpu;
  // Its feature is here, but the GPU levers were gated without it: something else it needs is not (coop-matrix: shader-f16, a config).
  if (has && lever.backend === "webgpu" && caps.gpuChecked) return "On this device: off, this GPU adapter lacks something else its kernels need.";
  return has ? "On this device: not checked yet." : `On this device: off, ${lever.backend === "wasm" ? "no WebAssembly SIMD here" : lever.feature && caps.webgpu ? `this GPU adapter has no ${lever.feature}` : "no WebGPU here"}.`;
}
