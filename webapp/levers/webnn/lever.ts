// The WebNN lever (facts.levers "webnn"): sampling's next-token logits from the browser's neural-
// network API (an NPU or GPU, as the browser sees fit) instead of the training backend. The
// feature is navigator.ml giving a context whose opSupportLimits() cover the prefill and decode
// graphs (graph.ts NEEDS); the gate runs them for a small seeded model beside the f32 path (the
// CPU backend in the worker: worker/webnn.ts), prefilling windows of two lengths and decoding to
// a full one, and their logits must match within facts.gate. Built to the spec, not verified on hardware: no browser here runs WebNN
// (content/docs/browser-notes.md). Training never uses it.

import { Rng } from "../../engine/rng";
import { tensorLayout } from "../../engine/model";
import type { CachedLogits, ModelConfig } from "../../engine/types";
import { type Outcome, type Verdict, browserVersion, gate, gateErrors, shaderHash, withinBudget, worst } from "../gate";
import { GRAPH_SOURCE, NEEDS, cacheNames, decodeGraph, prefillGraph, unsupported } from "./graph";
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
 * Next-token logits from the compiled prefill and decode graphs of a model's weights, with the
 * keys and values kept on the device between dispatches. The spec's dispatch refuses a tensor
 * bound as both input and output, so the caches are two sets of tensors: a decode reads one and
 * writes the other (the whole cache, a device-side copy of block_size rows per layer, but no
 * read-back to JS and no recomputation), and they swap. A failure marks it broken and is thrown
 * on, so the sampler's caller (engine/trainer.ts) goes on with the backend.
 */
export class WebnnSampler implements CachedLogits {
  /** Logits it gave, from prefills and decodes. */
  produced = 0;
  broken = false;
  /** Positions the caches hold (the next decode's position); 0: none to decode against. */
  private length = 0;

  private constructor(
    private context: MLContextLike,
    private graphs: Record<"prefill" | "decode", MLGraph>,
    private io: Record<"tokens" | "last" | "token" | "position" | "logits", MLTensor>,
    private caches: [Record<string, MLTensor>, Record<string, MLTensor>],
    private model: ModelConfig,
  ) {}

  static async create(context: MLContextLike, newBuilder: NewBuilder, model: ModelConfig, params: Float32Array): Promise<WebnnSampler> {
    const T = model.block_size;
    // A builder builds one graph (the spec), so each graph has its own.
    const build = (graph: typeof prefillGraph) => {
      const builder = newBuilder(context);
      return builder.build(graph(builder, model, params));
    };
    const [prefill, decode] = await Promise.all([build(prefillGraph), build(decodeGraph)]);
    const int = (shape: number[]) => context.createTensor({ dataType: "int32", shape, writable: true });
    const names = Array.from({ length: model.n_layer }, (_, i) => cacheNames(i)).flat();
    const cacheSet = async () => Object.fromEntries(await Promise.all(names.map(async (n) => [n, await context.createTensor({ dataType: "float32", shape: [T, model.n_embd] })])));
    const [tokens, last, token, position, logits, a, b] = await Promise.all([
      int([T]), int([1]), int([1]), int([1]),
      context.createTensor({ dataType: "float32", shape: [1, model.vocab_size], readable: true }),
      cacheSet(), cacheSet(),
    ]);
    return new WebnnSampler(context, { prefill, decode }, { tokens, last, token, position, logits }, [a, b], model);
  }

  /** Frees the graphs and their tensors on the device (the spec's destroy(); the context stays). */
  dispose(): void {
    for (const g of Object.values(this.graphs)) g.destroy?.();
    for (const t of [...Object.values(this.io), ...this.caches.flatMap(Object.values)]) t.destroy?.();
  }

  /** The logits after `window`'s last token; the caches then hold the window. */
  async prefill(window: Int32Array): Promise<Float32Array> {
    const T = this.model.block_size;
    if (window.length < 1 || window.length > T) throw new Error(`a window of ${window.length} tokens (1 to ${T})`);
    return this.run(() => {
      const tokens = new Int32Array(T);
      tokens.set(window);
      this.context.writeTensor(this.io.tokens, tokens);
      this.context.writeTensor(this.io.last, Int32Array.of(window.length - 1));
      this.context.dispatch(this.graphs.prefill, { tokens: this.io.tokens, last: this.io.last }, { logits: this.io.logits, ...this.caches[0] });
      this.length = window.length;
    });
  }

  /** The logits after `token`, next after what the caches hold, which then hold it too. */
  async decode(token: number): Promise<Float32Array> {
    const T = this.model.block_size;
    if (this.length < 1 || this.length >= T) throw new Error(`a decode at position ${this.length} (1 to ${T - 1})`);
    return this.run(() => {
      this.context.writeTensor(this.io.token, Int32Array.of(token));
      this.context.writeTensor(this.io.position, Int32Array.of(this.length));
      const [from, to] = this.caches;
      this.context.dispatch(this.graphs.decode, { token: this.io.token, position: this.io.position, ...from }, { logits: this.io.logits, ...to });
      this.caches = [to, from];
      this.length++;
    });
  }

  private async run(dispatch: () => void): Promise<Float32Array> {
    try {
      dispatch();
      const out = new Float32Array(await this.context.readTensor(this.io.logits));
      this.produced++;
      return out;
    } catch (e) {
      this.broken = true;
      this.length = 0;
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

function gateInputs(): { params: Float32Array; text: Int32Array } {
  const rng = new Rng(GATE_SEED);
  const n = tensorLayout(GATE_MODEL).reduce((a, t) => a + t.size, 0);
  const params = Float32Array.from({ length: n }, () => rng.normal() * 0.3);
  return { params, text: Int32Array.from({ length: GATE_MODEL.block_size }, () => rng.int(GATE_MODEL.vocab_size)) };
}

// Prefills of one token and of a partial window, then decodes to a full one: the mask, the row
// picked, the cache written and read at every position after the prefill.
const GATE_PREFILLS = [1, 7];

/** Whether this context's logits match the f32 path's on the gate's model, and how closely. */
export async function webnnAgrees(context: MLContextLike, newBuilder: NewBuilder, reference: Reference): Promise<Outcome> {
  const { params, text } = gateInputs();
  const sampler = await WebnnSampler.create(context, newBuilder, GATE_MODEL, params);
  const from = GATE_PREFILLS[GATE_PREFILLS.length - 1];
  const decoded = Array.from({ length: text.length - from }, (_, i) => from + i + 1);
  const lengths = [...GATE_PREFILLS, ...decoded];
  const want = await reference(GATE_MODEL, params, lengths.map((len) => text.subarray(0, len)));
  const got: Float32Array[] = [];
  try {
    for (const len of GATE_PREFILLS) got.push(await sampler.prefill(text.subarray(0, len)));
    for (const len of decoded) got.push(await sampler.decode(text[len - 1]));
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
  // The graphs' code is what the verdict vouches for, as shaders are for the GPU levers.
  const key = { adapter: `webnn ${POWER}`, browser: browserVersion(), shaders: await shaderHash(GRAPH_SOURCE, JSON.stringify(NEEDS)) };
  const verdict = await gate(ID, key, () => webnnAgrees(context, host.newBuilder, reference));
  if (!verdict.pass) context.destroy?.();
  return { verdict, context: verdict.pass ? context : null };
}
