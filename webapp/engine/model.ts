// The model's parameter layout, read from tinygpt/facts.json (the one table of
// tensors), plus the parameter count the UI shows, presets and initial weights.

import facts from "../../tinygpt/facts.json";
import type { ModelConfig, TrainConfig } from "./types";
import { Rng } from "./rng";

export type InitRule = "normal" | "residual" | "ones" | "zeros";

export interface TensorInfo {
  name: string;
  shape: number[];
  /** Offset in floats into the flat parameter array. */
  offset: number;
  size: number;
  init: InitRule;
  /** AdamW decays 2-D tensors only. */
  decay: boolean;
  /** Its true gradient is exactly 0: any computed one is rounding noise (facts.json tensors). */
  noiseGradient: boolean;
}

export interface Preset {
  id: string;
  label: string;
  model: ModelConfig;
  train: TrainConfig;
}

export const FACTS = facts;

function dim(symbol: string, m: ModelConfig): number {
  switch (symbol) {
    case "V": return m.vocab_size;
    case "T": return m.block_size;
    case "C": return m.n_embd;
    case "F": return 4 * m.n_embd;
    default: throw new Error(`facts.tensors uses unknown dimension symbol ${symbol}`);
  }
}

/** A facts.tensors shape (["C", "F"]) in numbers. */
export const shapeOf = (symbols: string[], m: ModelConfig): number[] => symbols.map((s) => dim(s, m));

/** Throws with a message naming the field when a config cannot describe a model. */
export function checkModelConfig(m: ModelConfig): void {
  for (const key of ["vocab_size", "n_layer", "n_embd", "n_head", "block_size"] as const) {
    const v = m[key];
    if (!Number.isInteger(v) || v <= 0 || v > 1 << 20) throw new Error(`model config: ${key} must be a positive integer, got ${JSON.stringify(v)}`);
  }
  if (m.vocab_size !== facts.vocab_size) throw new Error(`model config: vocab_size must be ${facts.vocab_size} (byte tokens), got ${m.vocab_size}`);
  if (m.n_embd % m.n_head !== 0) throw new Error(`model config: n_embd ${m.n_embd} is not divisible by n_head ${m.n_head}`);
}

export function tensorLayout(m: ModelConfig): TensorInfo[] {
  const out: TensorInfo[] = [];
  let offset = 0;
  const add = (name: string, t: { shape: string[]; init: string; gradient?: string }) => {
    const shape = shapeOf(t.shape, m);
    const size = shape.reduce((a, b) => a * b, 1);
    out.push({ name, shape, offset, size, init: t.init as InitRule, decay: shape.length === 2, noiseGradient: t.gradient === "noise" });
    offset += size;
  };
  for (const t of facts.tensors.head) add(t.name, t);
  for (let i = 0; i < m.n_layer; i++) {
    for (const t of facts.tensors.block) add(t.name.replace("{i}", String(i)), t);
  }
  return out;
}

/** Without listing the layers, so an absurd n_layer costs nothing. */
export function paramCount(m: ModelConfig): number {
  const size = (group: { shape: string[] }[]) => group.reduce((a, t) => a + shapeOf(t.shape, m).reduce((x, y) => x * y, 1), 0);
  return size(facts.tensors.head) + m.n_layer * size(facts.tensors.block);
}

/** Parameters initialised by the rules in facts.tensors (N(0, std), residual scaled by 1/sqrt(2 L)). */
export function initParams(m: ModelConfig, seed: number): Float32Array {
  const layout = tensorLayout(m);
  const params = new Float32Array(layout.reduce((a, t) => a + t.size, 0));
  const rng = new Rng(seed);
  const std = facts.model.init_std;
  for (const t of layout) {
    const view = params.subarray(t.offset, t.offset + t.size);
    if (t.init === "ones") view.fill(1);
    else if (t.init === "normal" || t.init === "residual") {
      const s = t.init === "residual" ? std / Math.sqrt(2 * m.n_layer) : std;
      for (let i = 0; i < view.length; i++) view[i] = rng.normal() * s;
    }
  }
  return params;
}

export function defaultTrainConfig(batchSize: number, lr: number, seed = 1337): TrainConfig {
  const o = facts.optimizer;
  return { batch_size: batchSize, lr, beta1: o.beta1, beta2: o.beta2, eps: o.eps, weight_decay: o.weight_decay, grad_clip: o.grad_clip, warmup_steps: o.warmup_steps, seed };
}

export function presets(): Preset[] {
  return facts.presets.map((p) => ({
    id: p.id,
    label: p.label,
    model: { vocab_size: facts.vocab_size, n_layer: p.n_layer, n_embd: p.n_embd, n_head: p.n_head, block_size: p.block_size },
    train: defaultTrainConfig(p.batch_size, p.lr),
  }));
}

/** The shape fields a preset fixes (the vocabulary is everyone's). */
export const SHAPE = ["n_layer", "n_embd", "n_head", "block_size"] as const;

/** The preset of this shape, if one has it. */
export function presetOf(model: ModelConfig): Preset | undefined {
  return presets().find((p) => SHAPE.every((k) => p.model[k] === model[k]));
}

export function preset(id: string): Preset {
  const p = presets().find((x) => x.id === id);
  if (!p) throw new Error(`unknown preset ${JSON.stringify(id)}; known: ${presets().map((x) => x.id).join(", ")}`);
  return p;
}

/** Learning rate at a 0-based step: linear warmup over warmup_steps, then constant. */
export function learningRate(c: TrainConfig, step: number): number {
  return c.warmup_steps > 0 && step < c.warmup_steps ? (c.lr * (step + 1)) / c.warmup_steps : c.lr;
}
