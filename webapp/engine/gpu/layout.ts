// Where each parameter lives in the GPU's flat parameter buffer (and, the same,
// in the gradient and Adam buffers). Tensors start on the device's storage
// offset alignment so each can be bound alone; 2-D tensors come first so AdamW
// runs as two dispatches (with and without weight decay). Padding stays zero.
// A layout for a packed-half mirror (storage-f16) aligns tensors twice as far in
// floats, so that each tensor's halves, at byte 2·gpuOffset, can be bound alone too.
// A fine-tuning backend lays out its adapter's tensors the same way, in buffers of their own.

import type { ModelConfig } from "../types";
import { type TensorInfo, tensorLayout } from "../model";
import { type AdapterTensor, type LoraSettings, adapterLayout } from "../lora";

/** What a layout places: a tensor of a flat array, and whether AdamW decays it. */
type Flat = Pick<TensorInfo, "name" | "offset" | "size" | "decay">;

export type GpuTensor<T extends Flat = TensorInfo> = T & {
  /** Offset in floats in the GPU buffers. */
  gpuOffset: number;
};

export interface GpuLayout<T extends Flat = TensorInfo> {
  tensors: GpuTensor<T>[];
  byName: Map<string, GpuTensor<T>>;
  /** Floats in the GPU buffers, padding included. */
  total: number;
  /** Floats [0, decayEnd) hold the 2-D (decayed) tensors. */
  decayEnd: number;
  /** Floats in the canonical flat array. */
  canonicalTotal: number;
}

export const gpuLayout = (m: ModelConfig, alignBytes: number, halves = false): GpuLayout => aligned(tensorLayout(m), alignBytes, halves);

export type AdapterGpuLayout = GpuLayout<AdapterTensor & Flat>;
/** Any layout: the parameters' or an adapter's. */
export type FlatLayout = GpuLayout<Flat>;

/** The adapter's tensors (engine/lora.ts adapterLayout), every one decayed (facts.json lora). */
export const adapterGpuLayout = (m: ModelConfig, lora: LoraSettings, alignBytes: number, halves = false): AdapterGpuLayout =>
  aligned(adapterLayout(m, lora).map((t) => ({ ...t, decay: true })), alignBytes, halves);

function aligned<T extends Flat>(canonical: T[], alignBytes: number, halves: boolean): GpuLayout<T> {
  // With halves, at least 4 floats: each tensor starts on a vec2<u32> of the mirror, and a binding of
  // whole vec2s (graph.ts) ends within it.
  const align = halves ? Math.max(4, alignBytes / 2) : Math.max(1, alignBytes / 4);
  const ordered = [...canonical.filter((t) => t.decay), ...canonical.filter((t) => !t.decay)];
  let at = 0;
  let decayEnd = 0;
  const tensors: GpuTensor<T>[] = [];
  for (const t of ordered) {
    at = Math.ceil(at / align) * align;
    tensors.push({ ...t, gpuOffset: at });
    at += t.size;
    if (t.decay) decayEnd = at;
  }
  return {
    tensors,
    byName: new Map(tensors.map((t) => [t.name, t])),
    total: Math.ceil(at / align) * align,
    decayEnd,
    canonicalTotal: canonical.reduce((a, t) => a + t.size, 0),
  };
}

export function toGpuOrder(layout: FlatLayout, flat: Float32Array): Float32Array<ArrayBuffer> {
  const out = new Float32Array(layout.total);
  for (const t of layout.tensors) out.set(flat.subarray(t.offset, t.offset + t.size), t.gpuOffset);
  return out;
}

export function fromGpuOrder(layout: FlatLayout, padded: Float32Array): Float32Array {
  const out = new Float32Array(layout.canonicalTotal);
  for (const t of layout.tensors) out.set(padded.subarray(t.gpuOffset, t.gpuOffset + t.size), t.offset);
  return out;
}
