// Where each parameter lives in the GPU's flat parameter buffer (and, the same,
// in the gradient and Adam buffers). Tensors start on the device's storage
// offset alignment so each can be bound alone; 2-D tensors come first so AdamW
// runs as two dispatches (with and without weight decay). Padding stays zero.
// A layout for a packed-half mirror (storage-f16) aligns tensors twice as far in
// floats, so that each tensor's halves, at byte 2·gpuOffset, can be bound alone too.

import type { ModelConfig } from "../types";
import { type TensorInfo, tensorLayout } from "../model";

export interface GpuTensor extends TensorInfo {
  /** Offset in floats in the GPU buffers. */
  gpuOffset: number;
}

export interface GpuLayout {
  tensors: GpuTensor[];
  byName: Map<string, GpuTensor>;
  /** Floats in the GPU buffers, padding included. */
  total: number;
  /** Floats [0, decayEnd) hold the 2-D (decayed) tensors. */
  decayEnd: number;
  /** Floats in the canonical flat array. */
  canonicalTotal: number;
}

export function gpuLayout(m: ModelConfig, alignBytes: number, halves = false): GpuLayout {
  // With halves, at least 4 floats: each tensor starts on a vec2<u32> of the mirror, and a binding of
  // whole vec2s (graph.ts) ends within it.
  const align = halves ? Math.max(4, alignBytes / 2) : Math.max(1, alignBytes / 4);
  const canonical = tensorLayout(m);
  const ordered = [...canonical.filter((t) => t.decay), ...canonical.filter((t) => !t.decay)];
  let at = 0;
  let decayEnd = 0;
  const tensors: GpuTensor[] = [];
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

export function toGpuOrder(layout: GpuLayout, flat: Float32Array): Float32Array<ArrayBuffer> {
  const out = new Float32Array(layout.total);
  for (const t of layout.tensors) out.set(flat.subarray(t.offset, t.offset + t.size), t.gpuOffset);
  return out;
}

export function fromGpuOrder(layout: GpuLayout, padded: Float32Array): Float32Array {
  const out = new Float32Array(layout.canonicalTotal);
  for (const t of layout.tensors) out.set(padded.subarray(t.gpuOffset, t.gpuOffset + t.size), t.offset);
  return out;
}
