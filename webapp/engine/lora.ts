// LoRA adapters (facts.json lora; tinygpt/lora.py is the reference): which
// tensors an adapter has, in the order its file lists them.
import { FACTS, shapeOf } from "./model";
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

export interface AdapterTensor {
  name: string;
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
        out.push({ name: `blocks.${i}.${projection}.lora_${part}`, shape: [...shape], offset, size });
        offset += size;
      }
    }
  }
  return out;
}
