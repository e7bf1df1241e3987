// The WebNN lever (facts.levers "webnn"): sampling's next-token logits from the browser's neural-
// network API (an NPU or GPU, as the browser sees fit) instead of the training backend. The
// feature is navigator.ml giving a context whose opSupportLimits() cover the graph (graph.ts
// NEEDS); the gate runs the graph of a small seeded model beside the f32 path (the CPU backend in
// the worker: worker/webnn.ts) on windows of several lengths, and its logits must match within
// facts.gate. Built to the spec, not verified on hardware: no browser here runs WebNN
// (content/docs/browser-notes.md). Training never uses it.

import { Rng } from "../../engine/rng";
import { tensorLayout } from "../../engine/model";
import type { ModelConfig, WindowLogits } from "../../engine/types";
import { type Outcome, type Verdict, browserVersion, gate, gateErrors, shaderHash, withinBudget, worst } from "../gate";
import { NEEDS, forwardGraph, unsupported } from "./graph";
import type { MLContextLike, MLGraph, MLLike, MLTensor, NewBuilder } from "./ml";

export const ID = "webnn";

// Sampling is latency-bound: the fastest unit the browser has, which may be a GPU or an NPU.
const POWER = "high-performance";

/** Where WebNN comes from: navigator.ml and MLGraphBuilder in a browser, fake-ml.ts in tests. */
export interface WebnnHost {
  ml: MLLike | undefined;
  newBuilder: NewBuilder;
}

/** The browser's WebNN, where it has one. */
export function browserHost(): WebnnHost {
  const g = globalThis as { navigator?: { ml?: MLLike }; MLGraphBuilder?: new (context: MLContextLike) => ReturnType<NewBuilder> };
  const Builder = g.MLGraphBuilder;
  return { ml: Builder ? g.navigator?.ml : undefined, newBuilder: (context) => new Builder!(context) };
}

/** A context that can run the graph, or why there is none. */
export async function webnnContext(host: WebnnHost): Promise<{ context: MLContextLike; reason: null } | { context: null; reason: string }> {
  if (!host.ml) return { context: null, reason: "this browser has no WebNN (navigator.ml)" };
  let context: MLContextLike;
  try {
    context = await host.ml.createContext({ powerPreference: POWER });
  } catch (e) {
    return { context: null, reason: `WebNN gave no context (${(e as Error).message || (e as Error).name})` };
  }
  const lacks = unsupported(context.opSupportLimits());
  if (lacks) {
    context.destroy?.();
    return { context: null, reason: `this WebNN context has ${lacks}` };
  }
  return { context, reason: null };
}

/**
 * Next-token logits of a window from one compiled graph of a model's weights. A failure marks it
 * broken and is thrown on, so the sampler's caller (engine/trainer.ts) goes on with the backend.
 */
export class WebnnSampler implements WindowLogits {
  /** Windows it gave logits for. */
  produced = 0;
  broken = false;

  private constructor(private context: MLContextLike, private graph: MLGraph, private tensors: Record<"tokens" | "last" | "logits", MLTensor>, private model: ModelConfig) {}

  static async create(context: MLContextLike, newBuilder: NewBuilder, model: ModelConfig, params: Float32Array): Promise<WebnnSampler> {
    const builder = newBuilder(context);
    const graph = await builder.build(forwardGraph(builder, model, params));
    const [tokens, last, logits] = await Promise.all([
      context.createTensor({ dataType: "int32", shape: [model.block_size], writable: true }),
      context.createTensor({ dataType: "int32", shape: [1], writable: true }),
      context.createTensor({ dataType: "float32", shape: [1, model.vocab_size], readable: true }),
    ]);
    return new WebnnSampler(context, graph, { tokens, last, logits }, model);
  }

  /** Frees the graph and its tensors on the device (the spec's destroy(); the context stays). */
  dispose(): void {
    this.graph.destroy?.();
    for (const t of Object.values(this.tensors)) t.destroy?.();
  }

  async logits(window: Int32Array): Promise<Float32Array> {
    const T = this.model.block_size;
    if (window.length < 1 || window.length > T) throw new Error(`a window of ${window.length} tokens (1 to ${T})`);
    try {
      const tokens = new Int32Array(T);
      tokens.set(window);
      this.context.writeTensor(this.tensors.tokens, tokens);
      this.context.writeTensor(this.tensors.last, Int32Array.of(window.length - 1));
      this.context.dispatch(this.graph, { tokens: this.tensors.tokens, last: this.tensors.last }, { logits: this.tensors.logits });
      const out = new Float32Array(await this.context.readTensor(this.tensors.logits));
      this.produced++;
      return out;
    } catch (e) {
      this.broken = true;
      throw e;
    }
  }
}

/** The f32 path's next-token logits for each window of a model with `params` (the CPU backend's prefill in the worker). */
export type Reference = (model: ModelConfig, params: Float32Array, windows: Int32Array[]) => Promise<Float32Array[]>;

// The gate's model: small enough to build in milliseconds, with several heads and layers, and
// every weight drawn (LayerNorm gains and all biases too), so no op can hide behind a 1 or a 0.
export const GATE_MODEL: ModelConfig = { vocab_size: 256, n_layer: 2, n_embd: 32, n_head: 4, block_size: 16 };
const GATE_SEED = 20261203;

function gateInputs(): { params: Float32Array; windows: Int32Array[] } {
  const rng = new Rng(GATE_SEED);
  const n = tensorLayout(GATE_MODEL).reduce((a, t) => a + t.size, 0);
  const params = Float32Array.from({ length: n }, () => rng.normal() * 0.3);
  // One token, a partial window and a full one: the mask, the row picked, every position.
  const windows = [1, 7, GATE_MODEL.block_size].map((len) => Int32Array.from({ length: len }, () => rng.int(GATE_MODEL.vocab_size)));
  return { params, windows };
}

/** Whether this context's logits match the f32 path's on the gate's model, and how closely. */
export async function webnnAgrees(context: MLContextLike, newBuilder: NewBuilder, reference: Reference): Promise<Outcome> {
  const { params, windows } = gateInputs();
  const sampler = await WebnnSampler.create(context, newBuilder, GATE_MODEL, params);
  const want = await reference(GATE_MODEL, params, windows);
  const got: Float32Array[] = [];
  try {
    for (const w of windows) got.push(await sampler.logits(w));
  } finally {
    sampler.dispose();
  }
  const errors = worst(...got.map((g, i) => gateErrors(g, want[i])));
  return { failure: withinBudget(errors) ? null : "its logits differ from the f32 path's", errors };
}

/** The lever's verdict, and its context when it passed. */
export interface Gated {
  verdict: Verdict;
  context: MLContextLike | null;
}

/**
 * WebNN's context if this browser offers one that covers the graph and passes the gate against
 * `reference`; otherwise null and why. Asked again, the same answer without a second check.
 */
export async function gatedWebnn(host: WebnnHost, reference: Reference): Promise<Gated> {
  const found = await webnnContext(host);
  if (!found.context) return { verdict: { pass: false, reason: found.reason, errors: {}, cached: false }, context: null };
  const context = found.context;
  // The graph's code is what the verdict vouches for, as shaders are for the GPU levers.
  const key = { adapter: `webnn ${POWER}`, browser: browserVersion(), shaders: await shaderHash(forwardGraph.toString(), JSON.stringify(NEEDS)) };
  const verdict = await gate(ID, key, () => webnnAgrees(context, host.newBuilder, reference));
  if (!verdict.pass) context.destroy?.();
  return { verdict, context: verdict.pass ? context : null };
}
