// An event's words, built on the server from the ids a client sent (checked
// against facts.json by schema.ts) and the country the edge saw: "Brazil:
// someone started training Huge on WebGPU +coop-matrix".
import facts from "../tinygpt/facts.json";
import type { Activity, LiveEvent } from "./schema";

const VERBS = { train: "training", finetune: "fine-tuning", sample: "sampling from" } as const;
const regions = new Intl.DisplayNames(["en"], { type: "region", fallback: "none" });

/** The country's English name for a two-letter code the edge gave, else null (none, or XX and T1: unknown and Tor). */
export function countryName(code: string): string | null {
  if (!/^[A-Z]{2}$/.test(code) || code === "XX" || code === "T1") return null;
  try {
    return regions.of(code) ?? null;
  } catch {
    return null;
  }
}

/** A preset's label ("Huge"), or null for custom. */
export function presetName(id: string): string | null {
  return facts.presets.find((p) => p.id === id)?.label ?? null;
}

/** A backend's pill ("WebGPU"). */
export function backendName(id: string): string {
  return facts.backends.find((b) => b.id === id)?.pill ?? id;
}

function pathPill(id: string): string {
  return facts.levers.find((l) => l.id === id)?.pill ?? `+${backendName(id)}`;
}

export function describe(kind: LiveEvent["kind"], a: Activity, country: string): string {
  const name = countryName(country);
  const on = [backendName(a.backend), ...a.paths.map(pathPill)].join(" ");
  const what = `${kind} ${VERBS[a.work]} ${presetName(a.preset) ?? "a custom model"} on ${on}`;
  return name ? `${name}: someone ${what}` : `Someone ${what}`;
}
