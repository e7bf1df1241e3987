// LoRA adapters (facts.json lora; tinygpt/lora.py is the reference): which
// tensors an adapter has, in the order its file lists them, how a new one
// starts, and how one folds into its base.
import { FACTS, shapeOf, tensorLayout } from "./model";
import { Rng } from "./rng";
import { sha256Hex } from "./data";
import type { ModelConfig } from "./types";

export const LORA = FACTS.lora;
export type Projection = keyof typeof LORA.projections;
export const PROJECTIONS = Object.keys(LORA.projections) as Projection[];

/** An adapter's settings as its file records them (header.adapter). */
export interface AdapterInfo {
  rank: number;
  alpha: number;
  targets: Projection[];
  /** The sha256 of its base's weights (facts.json format.adapter). */
  base_sha256: string;
}

/** What a backend fine-tunes with: an adapter's settings, less the base it belongs to. */
export type LoraSettings = Pick<AdapterInfo, "rank" | "alpha" | "targets">;

/** The factor on an adapter's term: y = x W + b + scale (x A) B. */
export const loraScale = (s: Pick<LoraSettings, "rank" | "alpha">) => s.alpha / s.rank;

export interface AdapterTensor {
  name: string;
  layer: number;
  target: Projection;
  shape: number[];
  /** Offset in floats into the adapter's flat array. */
  offset: number;
  size: number;
}

const BLOCK = new Map(FACTS.tensors.block.map((t) => [t.name, t.shape]));

/** The base projection's [in, out], from facts.tensors. */
export function projectionShape(m: ModelConfig, projection: string): number[] {
  return shapeOf(BLOCK.get(`blocks.{i}.${projection}.weight`)!, m);
}

/** Every adapter tensor: per layer, the targets in the projections' order, A ([in, rank]) before B ([rank, out]). */
export function adapterLayout(m: ModelConfig, a: Pick<AdapterInfo, "rank" | "targets">): AdapterTensor[] {
  const out: AdapterTensor[] = [];
  let offset = 0;
  for (let i = 0; i < m.n_layer; i++) {
    for (const target of PROJECTIONS.filter((p) => a.targets.includes(p))) {
      const projection = LORA.projections[target];
      const [dIn, dOut] = projectionShape(m, projection);
      for (const [part, shape] of [["a", [dIn, a.rank]], ["b", [a.rank, dOut]]] as const) {
        const size = shape[0] * shape[1];
        out.push({ name: `blocks.${i}.${projection}.lora_${part}`, layer: i, target, shape: [...shape], offset, size });
        offset += size;
      }
    }
  }
  return out;
}

/** A new adapter, flat in adapterLayout order: A from N(0, 1/in), B zero, so it changes no output yet (facts.json lora). */
export function initAdapter(m: ModelConfig, s: LoraSettings, seed: number): Float32Array {
  const layout = adapterLayout(m, s);
  const out = new Float32Array(layout.reduce((n, t) => n + t.size, 0));
  const rng = new Rng(seed);
  for (const t of layout) {
    if (!t.name.endsWith(".lora_a")) continue;
    const std = 1 / Math.sqrt(t.shape[0]);
    for (let i = t.offset; i < t.offset + t.size; i++) out[i] = rng.normal() * std;
  }
  return out;
}

/** The base's parameters with the adapter folded in (W + scale A B on each adapted projection): a plain model. */
export function mergeAdapter(m: ModelConfig, base: Float32Array, s: LoraSettings, adapter: Float32Array): Float32Array {
  const merged = base.slice();
  const weights = new Map(tensorLayout(m).map((t) => [t.name, t]));
  const scale = loraScale(s);
  const layout = adapterLayout(m, s);
  for (let j = 0; j < layout.length; j += 2) {
    const [a, b] = [layout[j], layout[j + 1]];
    const w = weights.get(a.name.replace(/lora_a$/, "weight"))!;
    const [dIn, rank] = a.shape, dOut = b.shape[1];
    for (let i = 0; i < dIn; i++) {
      for (let o = 0; o < dOut; o++) {
        let sum = 0;
        for (let r = 0; r < rank; r++) sum += adapter[a.offset + i * rank + r] * adapter[b.offset + r * dOut + o];
        merged[w.offset + i * dOut + o] += scale * sum;
      }
    }
  }
  return merged;
}

/** The sha256 of a model's weights as float32 little-endian in canonical order: what an adapter names its base by (header.adapter.base_sha256). */
export const weightsSha256 = (params: Float32Array) => sha256Hex(new Uint8Array(params.buffer, params.byteOffset, params.byteLength));
