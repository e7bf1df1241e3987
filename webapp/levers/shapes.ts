// The models a GPU lever's gate trains (levers/gpu.ts kernelTableAgrees), apart from gpu.ts so
// that a lever's own file can build on them while gpu.ts lists the levers.
import type { ModelConfig } from "../engine/types";

export interface GateShape {
  model: ModelConfig;
  batch: number;
}

/**
 * A shape with aligned sizes (the vec4 matmuls, 64-wide tiles at this size),
 * and one with none (n_embd 18: the scalar matmuls; head size 6; a context of 7).
 */
export const GATE_SHAPES: GateShape[] = [
  { model: { vocab_size: 256, n_layer: 1, n_embd: 32, n_head: 2, block_size: 9 }, batch: 3 },
  { model: { vocab_size: 256, n_layer: 1, n_embd: 18, n_head: 3, block_size: 7 }, batch: 2 },
];

/**
 * A shape whose grids fill 128 blocks of 128 (8192 rows; fc_in's 256 columns, the head's 256
 * logits), so that a lever replacing the 128-wide vec4 matmuls, what large models run, has them gated.
 */
export const WIDE_SHAPE: GateShape = { model: { vocab_size: 256, n_layer: 1, n_embd: 64, n_head: 2, block_size: 64 }, batch: 128 };
