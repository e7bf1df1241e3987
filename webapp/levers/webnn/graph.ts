// The forward graphs the WebNN lever runs: the model of tinygpt/model.py written with
// MLGraphBuilder ops, from the current weights as constants, as a KV-cached pair like the
// backends' prefill and decode. The prefill graph covers a whole window (block_size positions,
// the tokens after the text's end padded with 0, which the causal mask hides from the rows before
// them; input `last` picks the row whose logits come out) and also outputs each layer's keys and
// values [block_size, n_embd]. The decode graph runs one token at input `position` against those
// caches and outputs its logits and the caches with its row written in, so a token costs one
// position's work, not the window's. The spec lets a builder build one graph, so each graph holds
// its own copy of the weights.

import { FACTS, tensorLayout } from "../../engine/model";
import type { ModelConfig } from "../../engine/types";
import type { MLGraphBuilderLike, MLOperand, MLOpSupportLimits, MLTensorLimits } from "./ml";

// A score the softmax must give no weight: far below any real one, and -Infinity in float16 too.
const MASKED = -1e9;

/** The names of layer `i`'s key and value caches, as inputs of decode and outputs of both graphs. */
export const cacheNames = (i: number) => [`k${i}`, `v${i}`] as const;

/** The layers' keys and values ([block_size, n_embd] each) the rows attend to, given the rows' own. */
type Cache = (layer: number, k: MLOperand, v: MLOperand) => { k: MLOperand; v: MLOperand };

/**
 * The model from embeddings `x` ([n, C]) to the final LayerNorm's input, for n rows at once,
 * each attending over its layer's cache under `mask` ([n, T]: 0 where a row sees a position).
 * Both graphs are this, so the prefill and the decode cannot compute different models.
 */
function body(b: MLGraphBuilderLike, m: ModelConfig, weight: (name: string) => MLOperand, x: MLOperand, mask: MLOperand, cache: Cache, outputs: Record<string, MLOperand>): MLOperand {
  const T = m.block_size, C = m.n_embd, H = m.n_head, D = C / H;
  const n = x.shape[0];
  const norm = (y: MLOperand, prefix: string) =>
    b.layerNormalization(y, { scale: weight(`${prefix}.weight`), bias: weight(`${prefix}.bias`), axes: [1], epsilon: FACTS.model.layernorm_eps });
  const linear = (y: MLOperand, prefix: string) => b.add(b.matmul(y, weight(`${prefix}.weight`)), weight(`${prefix}.bias`));
  // [rows, C] -> [H, rows, D]: one attention per head, batched by matmul over the leading axis.
  const heads = (y: MLOperand, rows: number) => b.transpose(b.reshape(y, [rows, H, D]), { permutation: [1, 0, 2] });
  const scale = b.constant({ dataType: "float32", shape: [1] }, Float32Array.of(1 / Math.sqrt(D)));
  for (let i = 0; i < m.n_layer; i++) {
    const p = `blocks.${i}`;
    const h = norm(x, `${p}.ln1`);
    const q = heads(linear(h, `${p}.attn.q_proj`), n);
    const kv = cache(i, linear(h, `${p}.attn.k_proj`), linear(h, `${p}.attn.v_proj`));
    const [kName, vName] = cacheNames(i);
    outputs[kName] = kv.k;
    outputs[vName] = kv.v;
    const kT = b.transpose(b.reshape(kv.k, [T, H, D]), { permutation: [1, 2, 0] });
    const att = b.softmax(b.add(b.mul(b.matmul(q, kT), scale), mask), 2);
    const y = b.reshape(b.transpose(b.matmul(att, heads(kv.v, T)), { permutation: [1, 0, 2] }), [n, C]);
    x = b.add(x, linear(y, `${p}.attn.o_proj`));
    x = b.add(x, linear(b.gelu(linear(norm(x, `${p}.ln2`), `${p}.mlp.fc_in`)), `${p}.mlp.fc_out`));
  }
  return x;
}

/** The weights as constants, the causal mask, and the head: what both graphs share around body(). */
function parts(b: MLGraphBuilderLike, m: ModelConfig, params: Float32Array) {
  const T = m.block_size;
  const tensors = new Map(tensorLayout(m).map((t) => [t.name, t]));
  const weight = (name: string) => {
    const t = tensors.get(name)!;
    return b.constant({ dataType: "float32", shape: t.shape }, params.subarray(t.offset, t.offset + t.size));
  };
  const mask = new Float32Array(T * T);
  for (let i = 0; i < T; i++) mask.fill(MASKED, i * T + i + 1, (i + 1) * T);
  const wte = weight("token_embedding.weight");
  // The tied embedding, transposed, gives the logits of the one row [1, C] asked for.
  const head = (row: MLOperand) =>
    b.matmul(b.layerNormalization(row, { scale: weight("ln_final.weight"), bias: weight("ln_final.bias"), axes: [1], epsilon: FACTS.model.layernorm_eps }), b.transpose(wte));
  return { weight, wte, wpe: weight("position_embedding.weight"), causal: b.constant({ dataType: "float32", shape: [T, T] }, mask), head };
}

/**
 * The prefill graph's outputs (logits [1, vocab_size] and each layer's caches) for `params` in the
 * canonical tensor order (facts.json tensors), over inputs `tokens` (int32 [block_size]) and
 * `last` (int32 [1], the row of the window's last real token).
 */
export function prefillGraph(b: MLGraphBuilderLike, m: ModelConfig, params: Float32Array): Record<string, MLOperand> {
  const { weight, wte, wpe, causal, head } = parts(b, m, params);
  const tokens = b.input("tokens", { dataType: "int32", shape: [m.block_size] });
  const last = b.input("last", { dataType: "int32", shape: [1] });
  const outputs: Record<string, MLOperand> = {};
  const x = body(b, m, weight, b.add(b.gather(wte, tokens, { axis: 0 }), wpe), causal, (_, k, v) => ({ k, v }), outputs);
  outputs.logits = head(b.gather(x, last, { axis: 0 }));
  return outputs;
}

/**
 * The decode graph's outputs (the logits [1, vocab_size] after `token` and the caches with its
 * keys and values in row `position`) over inputs `token` and `position` (int32 [1]) and each
 * layer's caches (cacheNames, float32 [block_size, n_embd]) holding the positions before it.
 */
export function decodeGraph(b: MLGraphBuilderLike, m: ModelConfig, params: Float32Array): Record<string, MLOperand> {
  const T = m.block_size, C = m.n_embd;
  const { weight, wte, wpe, causal, head } = parts(b, m, params);
  const token = b.input("token", { dataType: "int32", shape: [1] });
  const position = b.input("position", { dataType: "int32", shape: [1] });
  // Row `position` of the identity and of its complement, as columns [T, 1]: the cache update
  // keeps every other row exactly (x * 1 + 0 * y) and takes the new one exactly (x * 0 + 1 * y).
  const eye = new Float32Array(T * T), rest = new Float32Array(T * T).fill(1);
  for (let i = 0; i < T; i++) [eye[i * T + i], rest[i * T + i]] = [1, 0];
  const column = (rows: Float32Array) => b.reshape(b.gather(b.constant({ dataType: "float32", shape: [T, T] }, rows), position, { axis: 0 }), [T, 1]);
  const [put, keep] = [column(eye), column(rest)];
  const write = (cached: MLOperand, row: MLOperand) => b.add(b.mul(cached, keep), b.mul(put, row));
  const outputs: Record<string, MLOperand> = {};
  const x0 = b.add(b.gather(wte, token, { axis: 0 }), b.gather(wpe, position, { axis: 0 }));
  const x = body(b, m, weight, x0, b.gather(causal, position, { axis: 0 }), (i, k, v) => {
    const [kName, vName] = cacheNames(i);
    return { k: write(b.input(kName, { dataType: "float32", shape: [T, C] }), k), v: write(b.input(vName, { dataType: "float32", shape: [T, C] }), v) };
  }, outputs);
  outputs.logits = head(x);
  return outputs;
}

/** The graphs' source, which a gate verdict vouches for (as shaders are for the GPU levers). */
export const GRAPH_SOURCE = [body, parts, prefillGraph, decodeGraph].map(String).join("\n");

/**
 * What the two graphs ask of opSupportLimits(): per op and operand (the spec's names), the data
 * types and the ranks they use. webnn.test.ts checks that the graphs use nothing else.
 */
export const NEEDS: Record<string, Record<string, [dataTypes: string[], minRank: number, maxRank: number]>> = {
  input: { input: [["int32", "float32"], 1, 2] },
  constant: { constant: [["float32"], 1, 2] },
  output: { output: [["float32"], 2, 2] },
  gather: { input: [["float32"], 2, 2], indices: [["int32"], 1, 1], output: [["float32"], 2, 2] },
  add: { a: [["float32"], 2, 3], b: [["float32"], 1, 2], output: [["float32"], 2, 3] },
  mul: { a: [["float32"], 2, 3], b: [["float32"], 1, 2], output: [["float32"], 2, 3] },
  matmul: { a: [["float32"], 2, 3], b: [["float32"], 2, 3], output: [["float32"], 2, 3] },
  layerNormalization: { input: [["float32"], 2, 2], scale: [["float32"], 1, 1], bias: [["float32"], 1, 1], output: [["float32"], 2, 2] },
  gelu: { input: [["float32"], 2, 2], output: [["float32"], 2, 2] },
  softmax: { input: [["float32"], 3, 3], output: [["float32"], 3, 3] },
  reshape: { input: [["float32"], 2, 3], output: [["float32"], 2, 3] },
  transpose: { input: [["float32"], 2, 3], output: [["float32"], 2, 3] },
};

/** The first thing `limits` (a context's opSupportLimits()) does not offer that the graphs need, in words; null: all there. */
export function unsupported(limits: MLOpSupportLimits): string | null {
  for (const [op, operands] of Object.entries(NEEDS)) {
    for (const [operand, [dataTypes, min, max]] of Object.entries(operands)) {
      // input, constant and output are limits of their own; an op's are keyed by operand.
      const l = (op === operand ? limits[op] : (limits[op] as Record<string, unknown> | undefined)?.[operand]) as MLTensorLimits | undefined;
      const what = op === operand ? op : `${op} ${operand}`;
      const missing = dataTypes.find((t) => !l?.dataTypes?.includes(t));
      if (missing) return `no ${missing} ${what}`;
      if (l?.rankRange && (l.rankRange.min > min || l.rankRange.max < max)) return `no ${what} of rank ${min === max ? min : `${min} to ${max}`}`;
    }
  }
  return null;
}
