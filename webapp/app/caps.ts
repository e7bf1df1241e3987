// The "This device" panel: what WebGPU offers, which backend will run, and the
// capability pills. A lever's pill shows exactly when the worker's numerics
// gate passed it here (its verdict); every verdict is listed with its reason,
// and detected features of levers with no verdict (not built yet, or for the
// other backend) are listed as available, not used.
import facts from "../../tinygpt/facts.json";
import type { Caps } from "../worker/protocol";
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

  const pills = $("#pills");
  pills.replaceChildren();
  const add = (label: string, key: string, kind: string) => {
    const li = el("li");
    li.append(pill(label, key, kind));
    pills.append(li);
  };
  if (caps.webgpu) add(backendPill("webgpu"), "webgpu", "backend");
  else {
    add(backendPill("wasm"), "wasm", "backend");
    if (caps.crossOriginIsolated && caps.threads > 1) add(`+${backendPill("threads")}`, "threads", "backend");
  }
  for (const lever of facts.levers) if (caps.levers[lever.id]?.pass) add(lever.pill, lever.id, "lever");

  const checked = facts.levers.filter((l) => caps.levers[l.id]);
  if (checked.length) {
    const list = el("ul", { id: "caps-gate" });
    for (const lever of checked) {
      const v = caps.levers[lever.id];
      const item = el("li", { "data-lever": lever.id, "data-verdict": v.pass ? "pass" : "fail", "data-cached": v.cached ? "yes" : "no" },
        `${lever.pill}: ${v.pass ? "on" : "off"}, ${v.reason}${v.cached ? " (remembered from an earlier check)" : ""}`);
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
  box.dataset.backend = caps.webgpu ? "webgpu" : "wasm";
}
