// The forward graph the WebNN lever runs: the model of tinygpt/model.py written with MLGraphBuilder
// ops, from the current weights as constants. One graph covers a whole window (block_size
// positions, the tokens after the text's end padded with 0, which the causal mask hides from the
// rows before them); input `last` picks the row whose next-token logits come out, so a
// shorter window needs no graph of its own. No KV cache: every token runs the whole window.

import { FACTS, tensorLayout } from "../../engine/model";
import type { ModelConfig } from "../../engine/types";
import type { MLGraphBuilderLike, MLOperand, MLOpSupportLimits, MLTensorLimits } from "./ml";

// A score the softmax must give no weight: far below any real one, and -Infinity in float16 too.
const MASKED = -1e9;

/**
 * The graph's outputs ({ logits: [1, vocab_size] }) for `params` in the canonical tensor order
 * (facts.json tensors), over inputs `tokens` (int32 [block_size]) and `last` (int32 [1], the row
 * of the window's last real token).
 */
export function forwardGraph(b: MLGraphBuilderLike, m: ModelConfig, params: Float32Array): Record<string, MLOperand> {
  const T = m.block_size, C = m.n_embd, H = m.n_head, D = C / H;
  const tensors = new Map(tensorLayout(m).map((t) => [t.name, t]));
  const weight = (name: string) => {
    const t = tensors.get(name)!;
    return b.constant({ dataType: "float32", shape: t.shape }, params.subarray(t.offset, t.offset + t.size));
  };
  const scalar = (v: number) => b.constant({ dataType: "float32", shape: [1] }, Float32Array.of(v));
  const norm = (x: MLOperand, prefix: string) =>
    b.layerNormalization(x, { scale: weight(`${prefix}.weight`), bias: weight(`${prefix}.bias`), axes: [1], epsilon: FACTS.model.layernorm_eps });
  const linear = (x: MLOperand, prefix: string) => b.add(b.matmul(x, weight(`${prefix}.weight`)), weight(`${prefix}.bias`));
  // [T, C] -> [H, T, D]: one attention per head, batched by matmul over the leading axis.
  const heads = (x: MLOperand) => b.transpose(b.reshape(x, [T, H, D]), { permutation: [1, 0, 2] });

  const mask = new Float32Array(T * T);
  for (let i = 0; i < T; i++) mask.fill(MASKED, i * T + i + 1, (i + 1) * T);
  const causal = b.constant({ dataType: "float32", shape: [T, T] }, mask);
  const scale = scalar(1 / Math.sqrt(D));

  const tokens = b.input("tokens", { dataType: "int32", shape: [T] });
  const last = b.input("last", { dataType: "int32", shape: [1] });
  const wte = weight("token_embedding.weight");
  let x = b.add(b.gather(wte, tokens, { axis: 0 }), weight("position_embedding.weight"));
  for (let i = 0; i < m.n_layer; i++) {
    const p = `blocks.${i}`;
    const h = norm(x, `${p}.ln1`);
    const q = heads(linear(h, `${p}.attn.q_proj`));
    const kT = b.transpose(b.reshape(linear(h, `${p}.attn.k_proj`), [T, H, D]), { permutation: [1, 2, 0] });
    const v = heads(linear(h, `${p}.attn.v_proj`));
    const att = b.softmax(b.add(b.mul(b.matmul(q, kT), scale), causal), 2);
    const y = b.reshape(b.transpose(b.matmul(att, v), { permutation: [1, 0, 2] }), [T, C]);
    x = b.add(x, linear(y, `${p}.attn.o_proj`));
    x = b.add(x, linear(b.gelu(linear(norm(x, `${p}.ln2`), `${p}.mlp.fc_in`)), `${p}.mlp.fc_out`));
  }
  // The head only for the one row asked for: the tied embedding, transposed, gives its logits.
  const row = norm(b.gather(x, last, { axis: 0 }), "ln_final");
  return { logits: b.matmul(row, b.transpose(wte)) };
}

/**
 * What forwardGraph asks of opSupportLimits(): per op and operand (the spec's names), the data
 * type and the ranks it uses. webnn.test.ts checks that the graph uses nothing else.
 */
export const NEEDS: Record<string, Record<string, [dataType: string, minRank: number, maxRank: number]>> = {
  input: { input: ["int32", 1, 1] },
  constant: { constant: ["float32", 1, 2] },
  output: { output: ["float32", 2, 2] },
  gather: { input: ["float32", 2, 2], indices: ["int32", 1, 1], output: ["float32", 2, 2] },
  add: { a: ["float32", 2, 3], b: ["float32", 1, 2], output: ["float32", 2, 3] },
  mul: { a: ["float32", 3, 3], b: ["float32", 1, 1], output: ["float32", 3, 3] },
  matmul: { a: ["float32", 2, 3], b: ["float32", 2, 3], output: ["float32", 2, 3] },
  layerNormalization: { input: ["float32", 2, 2], scale: ["float32", 1, 1], bias: ["float32", 1, 1], output: ["float32", 2, 2] },
  gelu: { input: ["float32", 2, 2], output: ["float32", 2, 2] },
  softmax: { input: ["float32", 3, 3], output: ["float32", 3, 3] },
  reshape: { input: ["float32", 2, 3], output: ["float32", 2, 3] },
  transpose: { input: ["float32", 2, 3], output: ["float32", 2, 3] },
};

/** The first thing `limits` (a context's opSupportLimits()) does not offer that the graph needs, in words; null: all there. */
export function unsupported(limits: MLOpSupportLimits): string | null {
  for (const [op, operands] of Object.entries(NEEDS)) {
    for (const [operand, [dataType, min, max]] of Object.entries(operands)) {
      // input, constant and output are limits of their own; an op's are keyed by operand.
      const l = (op === operand ? limits[op] : (limits[op] as Record<string, unknown> | undefined)?.[operand]) as MLTensorLimits | undefined;
      const what = op === operand ? op : `${op} ${operand}`;
      if (!l?.dataTypes?.includes(dataType)) return `no ${dataType} ${what}`;
      if (l.rankRange && (l.rankRange.min > min || l.rankRange.max < max)) return `no ${what} of rank ${min === max ? min : `${min} to ${max}`}`;
    }
  }
  return null;
}
