// The WebGPU backend options the Node tools run with: Dawn's adapter, and the GPU levers gated
// on it as the app gates them. --levers all (the default) gates every shipped lever and runs
// those that pass; none runs the plain f32 kernels; a,b gates only those (an experimental one
// too) and stops if one does not pass (a figure for a lever that did not run is no figure).
// The int8 sampling lever counts among them (id int8): its kernels are gated as the app's, and
// a backend made with them decodes on int8 once told to (GpuBackend.sampleInt8).
// --dawn-f16-toggle sets Dawn's vulkan_enable_f16_on_nvidia adapter toggle, for our benchmark
// hosts: Dawn hides shader-f16 on NVIDIA without it (a browser decides that itself; the app
// never sets a toggle).

import { create, globals } from "webgpu";
import type { BackendOptions } from "../engine/index";
import { BUILT_LEVERS, GPU_LEVERS, type GpuLever, gpuLevers, leverFeatures } from "../levers/gpu";
import type { Verdict } from "../levers/gate";
import { ID as INT8, gatedInt8 } from "../levers/int8/lever";

/** What a lever needs of an adapter, in words. */
const needs = (lever: GpuLever) => [...leverFeatures(lever), ...(lever.wgslFeatures ?? []), ...("forAdapter" in lever ? ["a table for this adapter"] : [])].join(", ");

export interface DawnGpu {
  /** For createBackend("webgpu", ...): the adapter and the tables of the levers that passed. */
  options: BackendOptions;
  verdicts: Record<string, Verdict>;
}

/** `wanted`: the --levers value; `fail` reports a usage error and exits. */
export async function dawnGpu(wanted: string, toggle: boolean, fail: (message: string) => never, log: (line: string) => void): Promise<DawnGpu> {
  const known = [...BUILT_LEVERS.map((l) => l.id), INT8];
  const chosen = wanted === "all" ? [...GPU_LEVERS.map((l) => l.id), INT8] : wanted === "none" ? [] : wanted.split(",");
  for (const id of chosen) if (!known.includes(id)) fail(`--levers: no GPU lever ${JSON.stringify(id)} (there are: ${known.join(", ") || "none"})`);
  Object.assign(globalThis, globals);
  // Dawn rounds timestamps (a browser's defence against timing attacks); a profile wants them whole.
  const gpu = create(["disable-dawn-features=timestamp_quantization", ...(toggle ? ["enable-dawn-features=allow_unsafe_apis,vulkan_enable_f16_on_nvidia"] : [])]);
  const adapter = await gpu.requestAdapter({ powerPreference: "high-performance" });
  if (!adapter) fail("Dawn found no WebGPU adapter (on Linux set VK_ICD_FILENAMES to a Vulkan driver)");
  const gated = await gpuLevers({ gpu }, adapter, BUILT_LEVERS.filter((l) => chosen.includes(l.id)), gpu.wgslLanguageFeatures);
  // The int8 sampling lever: its kernels gated here; the sample CLI samples on them (it has no held-out text to check a model on).
  const int8 = chosen.includes(INT8) ? await gatedInt8({ gpu }, adapter, gpu.wgslLanguageFeatures) : null;
  if (int8) gated.verdicts[INT8] = int8.verdict;
  for (const [id, v] of Object.entries(gated.verdicts)) log(`lever ${id}: ${v.pass ? "on" : "off"}, ${v.reason}${v.detail ? ` (${v.detail})` : ""}`);
  if (wanted !== "all") {
    const off = chosen.filter((id) => !gated.verdicts[id]?.pass);
    if (off.length) fail(`--levers ${wanted}: ${off.map((id) => `${id} ${gated.verdicts[id] ? "did not pass its gate" : `needs what this adapter lacks (${id === INT8 ? "the WGSL language feature packed_4x8_integer_dot_product" : needs(BUILT_LEVERS.find((l) => l.id === id)!)})`}`).join("; ")}`);
  }
  const levers = Object.keys(gated.verdicts).filter((id) => id !== INT8 && gated.verdicts[id].pass);
  return { options: { gpu, adapter, kernels: gated.kernels, features: gated.features, levers, int8: int8?.kernels ?? undefined }, verdicts: gated.verdicts };
}
