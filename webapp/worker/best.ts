// What "Best available" means on this device: the faster backend. A GPU
// adapter that is a software renderer (SwiftShader, which Chromium offers
// where it finds no usable GPU) trains about 100 times slower than the CPU
// backend, so it is passed over: when the adapter says so itself
// (isFallbackAdapter), or when a measured Tiny step on it is far slower than
// on the CPU. The user can still choose WebGPU.
import facts from "../../tinygpt/facts.json";
import { preset } from "../engine/index";
import type { BackendKind } from "../engine/types";
import type { Backends } from "./backends";
import { requestAdapter } from "./caps";
import { measureStep } from "./measure";

export interface BestBackend {
  kind: BackendKind;
  /** Why the CPU, in one line, when a GPU adapter was passed over; null otherwise. */
  reason: string | null;
}

export async function chooseBest(backends: Backends, cancelled: () => boolean): Promise<BestBackend | null> {
  const { adapter } = await requestAdapter();
  if (!adapter) return { kind: "wasm", reason: null };
  const name = adapter.info.description || adapter.info.architecture || adapter.info.vendor || "this adapter";
  const choose = " Best available trains on the CPU (WebAssembly); choose WebGPU under Backend to use the GPU anyway.";
  if (adapter.info.isFallbackAdapter) return { kind: "wasm", reason: `The GPU adapter here (${name}) is a software renderer, far slower than the CPU.${choose}` };
  const tiny = preset("tiny");
  const gpu = await measureStep(backends, tiny.model, tiny.train.batch_size, "webgpu", cancelled).catch(() => null);
  const cpu = gpu && (await measureStep(backends, tiny.model, tiny.train.batch_size, "wasm", cancelled).catch(() => null));
  // Cut short for a command that needs the device: decided again by the adapter alone next time.
  if (!gpu || !cpu) return null;
  const ratio = gpu.msPerStep / cpu.msPerStep;
  if (ratio < facts.app.software_gpu_factor) return { kind: "webgpu", reason: null };
  return { kind: "wasm", reason: `The GPU adapter here (${name}) trained Tiny ${Math.round(ratio)} times slower than the CPU, as a software renderer does.${choose}` };
}
