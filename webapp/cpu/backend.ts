// The WebAssembly CPU backend: the same training step as the reference
// (tinygpt/model.py, tinygpt/train.py) over one linear memory, with the kernels
// of assembly/index.ts. Everything lives in that memory: parameters, gradients,
// Adam moments, transposed-weight scratch, and the activations of one
// micro-batch. A batch whose activations would not fit the budget is run as
// several micro-batches whose gradients add up (the loss is a mean over all
// positions, so the result is the same step).

import facts from "../../tinygpt/facts.json";
import { checkModelConfig, tensorLayout, type TensorInfo } from "../engine/model";
import type { Backend, ModelConfig, ParamState, TrainConfig } from "../engine/types";
import { CONTROL_BYTES, singleThread, threadPool, type Kernels, type Pool, type WorkerLike } from "./threads";
import { withSharedMemory } from "./wasm";

export type OptimizerConfig = Pick<TrainConfig, "beta1" | "beta2" | "eps" | "weight_decay" | "grad_clip">;

export interface CpuBackendOptions {
  /** The compiled cpu.wasm bytes, or an already compiled module (a module always runs on one thread). */
  wasm: BufferSource | WebAssembly.Module;
  /** Threads wanted; more than 1 needs SharedArrayBuffer (a cross-origin isolated page) and a way to start workers. */
  threads: number;
  /** The worker script to start helper threads with (it must call handleCpuThreadMessage first). */
  workerUrl?: string | URL;
  /** Starts one helper worker; overrides workerUrl (Node tests pass worker_threads here). */
  spawn?: () => WorkerLike;
  /** AdamW and clipping settings; facts.optimizer when left out. */
  optimizer?: OptimizerConfig;
  /** How long an idle thread spins before it sleeps, in ms (threads.ts says why). */
  spinMs?: number;
  /** Upper bound on activation memory per micro-batch, in bytes. */
  activationBudget?: number;
}

interface Exports extends Kernels {
  memory: WebAssembly.Memory;
  heap_base(): number;
  embed_backward(dwte: number, dwpe: number, dout: number, tokens: number, T: number, C: number, rows: number): void;
  sumsq(x: number, n: number): number;
}

const PAGE = 65536;
const MAX_PAGES = 65536; // asconfig maximumMemory: the whole 4 GiB a wasm32 memory can address
const SHARED_MAX_PAGES = 32768; // shared memories reserve their maximum up front: keep it to 2 GiB
const DEFAULT_ACTIVATION_BUDGET = 512 * 1024 * 1024;

/** Bump allocator over byte addresses, 64-byte aligned (SIMD loads and cache lines). */
class Arena {
  constructor(public end: number) {}
  take(floats: number): number {
    const at = this.end;
    this.end += Math.ceil((floats * 4) / 64) * 64;
    return at;
  }
}

interface LayerActs {
  res: number; ln1: number; ln1Mean: number; ln1Rstd: number; q: number; k: number; v: number; att: number;
  y: number; mid: number; ln2: number; ln2Mean: number; ln2Rstd: number; h: number; g: number;
}

interface Acts {
  seqs: number;
  layers: LayerActs[];
  res: number; lnf: number; lnfMean: number; lnfRstd: number; logits: number; losses: number; tokens: number; targets: number;
  dres: number; da: number; dq: number; dk: number; dv: number; dh: number; dscratch: number; xT: number;
}

/** Activation buffers for `seqs` sequences of block_size tokens, allocated from `arena`. */
function layoutActs(m: ModelConfig, seqs: number, arena: Arena): Acts {
  const N = seqs * m.block_size, C = m.n_embd, F = 4 * C;
  const t = (n: number) => arena.take(n);
  const layers = Array.from({ length: m.n_layer }, () => ({
    res: t(N * C), ln1: t(N * C), ln1Mean: t(N), ln1Rstd: t(N), q: t(N * C), k: t(N * C), v: t(N * C),
    att: t(seqs * m.n_head * m.block_size * m.block_size), y: t(N * C), mid: t(N * C), ln2: t(N * C),
    ln2Mean: t(N), ln2Rstd: t(N), h: t(N * F), g: t(N * F),
  }));
  return {
    seqs, layers, res: t(N * C), lnf: t(N * C), lnfMean: t(N), lnfRstd: t(N), logits: t(N * m.vocab_size),
    losses: t(N), tokens: t(N), targets: t(N),
    dres: t(N * C), da: t(N * C), dq: t(N * C), dk: t(N * C), dv: t(N * C), dh: t(N * F), dscratch: t(seqs * m.n_head * m.block_size),
    xT: t(N * Math.max(F, m.vocab_size)),
  };
}

/**
 * A Backend on WebAssembly. Asked for several threads where SharedArrayBuffer
 * exists, it starts helper workers on a shared memory; if that fails (no
 * worker, no shared memory this large) it runs on one thread, and `device` says so.
 */
export async function createCpuBackend(model: ModelConfig, opts: CpuBackendOptions): Promise<Backend> {
  checkModelConfig(model);
  const C = model.n_embd, H = model.n_head;
  if (C % 4 !== 0 || (C / H) % 4 !== 0) {
    throw new Error(`cpu backend: n_embd (${C}) and head size n_embd/n_head (${C / H}) must be multiples of 4 for SIMD`);
  }
  if (!Number.isInteger(opts.threads) || opts.threads < 1) throw new Error(`cpu backend: threads must be a positive integer, got ${opts.threads}`);
  const canShare = typeof SharedArrayBuffer !== "undefined" && (globalThis as { crossOriginIsolated?: boolean }).crossOriginIsolated !== false;
  const spawn = opts.spawn ?? (opts.workerUrl !== undefined ? () => new Worker(opts.workerUrl!, { type: "module" }) : null);
  if (opts.threads > 1 && canShare && spawn && !(opts.wasm instanceof WebAssembly.Module)) {
    const helpers: WorkerLike[] = [];
    try {
      while (helpers.length < opts.threads - 1) helpers.push(spawn());
      return await start(model, opts, helpers);
    } catch (err) {
      for (const w of helpers) w.terminate();
      console.warn(`cpu backend: running on one thread (${(err as Error).message})`);
    }
  }
  return start(model, opts, null);
}

async function start(model: ModelConfig, opts: CpuBackendOptions, helpers: WorkerLike[] | null): Promise<Backend> {
  const C = model.n_embd, H = model.n_head;
  const shared = helpers !== null;
  const module = opts.wasm instanceof WebAssembly.Module ? opts.wasm
    : await WebAssembly.compile(shared ? withSharedMemory(opts.wasm) : opts.wasm);
  const memory = new WebAssembly.Memory({ initial: 1, maximum: shared ? SHARED_MAX_PAGES : MAX_PAGES, shared });
  const instance = await WebAssembly.instantiate(module, { env: { memory } });
  const ex = instance.exports as unknown as Exports;

  const layout = tensorLayout(model);
  const P = layout.reduce((a, t) => a + t.size, 0);
  const F = 4 * C, V = model.vocab_size;
  const fixed = new Arena(Math.ceil(ex.heap_base() / 64) * 64);
  const control = fixed.take(CONTROL_BYTES / 4);
  const params = fixed.take(P), grads = fixed.take(P), mom1 = fixed.take(P), mom2 = fixed.take(P);
  const wT = fixed.take(Math.max(C * F, C * V));
  const decayed = layout.filter((t) => t.decay);
  const decayRanges = fixed.take(2 * decayed.length);
  const actsBase = fixed.end;
  const oneSeq = new Arena(0);
  layoutActs(model, 1, oneSeq);
  const maxSeqs = Math.max(1, Math.floor((opts.activationBudget ?? DEFAULT_ACTIVATION_BUDGET) / oneSeq.end));

  let f32 = new Float32Array(0), i32 = new Int32Array(0);
  const ensureBytes = (end: number) => {
    const pages = Math.ceil(end / PAGE);
    const have = memory.buffer.byteLength / PAGE;
    if (pages > (shared ? SHARED_MAX_PAGES : MAX_PAGES)) throw new Error(`cpu backend: needs ${(end / 2 ** 30).toFixed(2)} GiB, more than WebAssembly memory allows`);
    if (pages > have) memory.grow(pages - have);
    if (f32.buffer !== memory.buffer || f32.length * 4 !== memory.buffer.byteLength) {
      f32 = new Float32Array(memory.buffer);
      i32 = new Int32Array(memory.buffer);
    }
  };
  ensureBytes(actsBase);
  i32.set(decayed.flatMap((t) => [t.offset, t.offset + t.size]), decayRanges / 4);
  const pool: Pool = helpers ? await threadPool(ex, module, memory, control, helpers, opts.spinMs) : singleThread(ex);

  const opt = opts.optimizer ?? facts.optimizer;
  const eps = facts.model.layernorm_eps;
  const scale = 1 / Math.sqrt(C / H);
  const byName = new Map(layout.map((t) => [t.name, t]));
  const off = (name: string) => (byName.get(name) as TensorInfo).offset * 4;
  const p = (name: string) => params + off(name);
  const g = (name: string) => grads + off(name);
  const blk = (i: number, name: string) => `blocks.${i}.${name}`;
  let step = 0;
  let acts: Acts | null = null;

  const actsFor = (seqs: number): Acts => {
    if (!acts || acts.seqs < seqs) {
      const arena = new Arena(actsBase);
      acts = layoutActs(model, seqs, arena);
      ensureBytes(arena.end);
    }
    return acts;
  };

  const run = pool.run.bind(pool);
  /** out[rows, M] (+)= inp[rows, K] @ w[K, M] + b */
  const linear = (out: number, inp: number, w: number, b: number, rows: number, K: number, M: number, acc: number, lo = 0) =>
    run("matmul", [out, inp, w, b, K, 1, K, M, acc], lo, rows, 4);
  /**
   * dw[K, M] += x^T @ dout. With K > M the strided reads of x (K floats apart,
   * often a power of two) fight over the same cache sets, so x is transposed
   * into scratch first; measured faster there, no better otherwise.
   */
  const weightGrad = (a: Acts, dw: number, x: number, dout: number, rows: number, K: number, M: number) => {
    if (K > M) {
      run("transpose", [a.xT, x, rows, K], 0, rows, 16);
      run("matmul", [dw, a.xT, dout, 0, rows, 1, rows, M, 1], 0, K, 4);
    } else {
      run("matmul", [dw, x, dout, 0, 1, K, rows, M, 1], 0, K, 4);
    }
  };
  /** Gradients of out = inp @ w + b: dw += inp^T @ dout, db += colsum(dout), dinp (+)= dout @ w^T. */
  const linearBackward = (a: Acts, dinp: number, accInp: number, dw: number, db: number, dout: number, inp: number, w: number,
    rows: number, K: number, M: number) => {
    weightGrad(a, dw, inp, dout, rows, K, M);
    run("colsum", [db, dout, rows, M], 0, M / 4);
    run("transpose", [wT, w, K, M], 0, K);
    run("matmul", [dinp, dout, wT, 0, M, 1, M, K, accInp], 0, rows, 4);
  };

  const loadTokens = (a: Acts, x: Int32Array, y: Int32Array | null, from: number, rows: number) => {
    i32.set(x.subarray(from, from + rows), a.tokens / 4);
    if (y) i32.set(y.subarray(from, from + rows), a.targets / 4);
  };

  /** Forward through every block; the final LayerNorm and head run on rows [headLo, rows). */
  const forward = (a: Acts, rows: number, T: number, headLo = 0) => {
    const seqs = rows / T;
    run("embed_forward", [a.layers[0].res, a.tokens, p("token_embedding.weight"), p("position_embedding.weight"), T, C], 0, rows);
    for (let i = 0; i < model.n_layer; i++) {
      const l = a.layers[i];
      const out = i + 1 < model.n_layer ? a.layers[i + 1].res : a.res;
      run("layernorm_forward", [l.ln1, l.ln1Mean, l.ln1Rstd, l.res, p(blk(i, "ln1.weight")), p(blk(i, "ln1.bias")), C, eps], 0, rows);
      linear(l.q, l.ln1, p(blk(i, "attn.q_proj.weight")), p(blk(i, "attn.q_proj.bias")), rows, C, C, 0);
      linear(l.k, l.ln1, p(blk(i, "attn.k_proj.weight")), p(blk(i, "attn.k_proj.bias")), rows, C, C, 0);
      linear(l.v, l.ln1, p(blk(i, "attn.v_proj.weight")), p(blk(i, "attn.v_proj.bias")), rows, C, C, 0);
      run("attention_forward", [l.y, l.att, l.q, l.k, l.v, T, C, H, scale], 0, seqs * H);
      f32.copyWithin(l.mid / 4, l.res / 4, l.res / 4 + rows * C);
      linear(l.mid, l.y, p(blk(i, "attn.o_proj.weight")), p(blk(i, "attn.o_proj.bias")), rows, C, C, 1);
      run("layernorm_forward", [l.ln2, l.ln2Mean, l.ln2Rstd, l.mid, p(blk(i, "ln2.weight")), p(blk(i, "ln2.bias")), C, eps], 0, rows);
      linear(l.h, l.ln2, p(blk(i, "mlp.fc_in.weight")), p(blk(i, "mlp.fc_in.bias")), rows, C, F, 0);
      run("gelu_forward", [l.g, l.h], 0, rows * F, 4);
      f32.copyWithin(out / 4, l.mid / 4, l.mid / 4 + rows * C);
      linear(out, l.g, p(blk(i, "mlp.fc_out.weight")), p(blk(i, "mlp.fc_out.bias")), rows, F, C, 1);
    }
    run("layernorm_forward", [a.lnf, a.lnfMean, a.lnfRstd, a.res, p("ln_final.weight"), p("ln_final.bias"), C, eps], headLo, rows);
    run("transpose", [wT, p("token_embedding.weight"), V, C], 0, V);
    linear(a.logits, a.lnf, wT, 0, rows, C, V, 0, headLo);
  };

  /** Backward from dlogits (left in a.logits by crossentropy), adding into the gradients. */
  const backward = (a: Acts, rows: number, T: number) => {
    const seqs = rows / T;
    weightGrad(a, g("token_embedding.weight"), a.logits, a.lnf, rows, V, C);
    run("matmul", [a.da, a.logits, p("token_embedding.weight"), 0, V, 1, V, C, 0], 0, rows, 4);
    f32.fill(0, a.dres / 4, a.dres / 4 + rows * C);
    run("layernorm_backward", [a.dres, a.da, a.res, p("ln_final.weight"), a.lnfMean, a.lnfRstd, C], 0, rows);
    run("layernorm_param_grads", [g("ln_final.weight"), g("ln_final.bias"), a.da, a.res, a.lnfMean, a.lnfRstd, rows, C], 0, C / 4);
    for (let i = model.n_layer - 1; i >= 0; i--) {
      const l = a.layers[i];
      linearBackward(a, a.dh, 0, g(blk(i, "mlp.fc_out.weight")), g(blk(i, "mlp.fc_out.bias")), a.dres, l.g, p(blk(i, "mlp.fc_out.weight")), rows, F, C);
      run("gelu_backward", [a.dh, l.h], 0, rows * F, 4);
      linearBackward(a, a.da, 0, g(blk(i, "mlp.fc_in.weight")), g(blk(i, "mlp.fc_in.bias")), a.dh, l.ln2, p(blk(i, "mlp.fc_in.weight")), rows, C, F);
      run("layernorm_backward", [a.dres, a.da, l.mid, p(blk(i, "ln2.weight")), l.ln2Mean, l.ln2Rstd, C], 0, rows);
      run("layernorm_param_grads", [g(blk(i, "ln2.weight")), g(blk(i, "ln2.bias")), a.da, l.mid, l.ln2Mean, l.ln2Rstd, rows, C], 0, C / 4);
      linearBackward(a, a.da, 0, g(blk(i, "attn.o_proj.weight")), g(blk(i, "attn.o_proj.bias")), a.dres, l.y, p(blk(i, "attn.o_proj.weight")), rows, C, C);
      run("attention_backward", [a.dq, a.dk, a.dv, a.dscratch, a.da, l.q, l.k, l.v, l.att, T, C, H, scale], 0, seqs * H);
      linearBackward(a, a.da, 0, g(blk(i, "attn.q_proj.weight")), g(blk(i, "attn.q_proj.bias")), a.dq, l.ln1, p(blk(i, "attn.q_proj.weight")), rows, C, C);
      linearBackward(a, a.da, 1, g(blk(i, "attn.k_proj.weight")), g(blk(i, "attn.k_proj.bias")), a.dk, l.ln1, p(blk(i, "attn.k_proj.weight")), rows, C, C);
      linearBackward(a, a.da, 1, g(blk(i, "attn.v_proj.weight")), g(blk(i, "attn.v_proj.bias")), a.dv, l.ln1, p(blk(i, "attn.v_proj.weight")), rows, C, C);
      run("layernorm_backward", [a.dres, a.da, l.res, p(blk(i, "ln1.weight")), l.ln1Mean, l.ln1Rstd, C], 0, rows);
      run("layernorm_param_grads", [g(blk(i, "ln1.weight")), g(blk(i, "ln1.bias")), a.da, l.res, l.ln1Mean, l.ln1Rstd, rows, C], 0, C / 4);
    }
    ex.embed_backward(g("token_embedding.weight"), g("position_embedding.weight"), a.dres, a.tokens, T, C, rows);
  };

  const checkBatch = (what: string, x: Int32Array, y: Int32Array): number => {
    const T = model.block_size;
    if (x.length !== y.length) throw new Error(`cpu backend ${what}: x has ${x.length} tokens, y has ${y.length}`);
    if (x.length === 0 || x.length % T !== 0) throw new Error(`cpu backend ${what}: ${x.length} tokens is not a whole number of block_size ${T} windows`);
    for (const [arr, name] of [[x, "x"], [y, "y"]] as const) {
      for (let i = 0; i < arr.length; i++) {
        if (!(arr[i] >= 0 && arr[i] < V)) throw new Error(`cpu backend ${what}: ${name}[${i}] = ${arr[i]} is outside [0, ${V})`);
      }
    }
    return x.length / T;
  };

  /** Sum of per-position losses over the batch, optionally adding gradients of their mean. */
  const batchLoss = (x: Int32Array, y: Int32Array, seqs: number, withGrads: boolean): number => {
    const T = model.block_size;
    const a = actsFor(Math.min(seqs, maxSeqs));
    const gradScale = withGrads ? 1 / (seqs * T) : 0;
    let total = 0;
    for (let s = 0; s < seqs; s += a.seqs) {
      const rows = Math.min(a.seqs, seqs - s) * T;
      loadTokens(a, x, y, s * T, rows);
      forward(a, rows, T);
      run("crossentropy", [a.logits, a.losses, a.targets, V, gradScale], 0, rows);
      for (let r = 0; r < rows; r++) total += f32[a.losses / 4 + r];
      if (withGrads) backward(a, rows, T);
    }
    return total;
  };

  const state = (from: number) => f32.slice(from / 4, from / 4 + P);

  return {
    kind: "wasm",
    device: `${pool.threads} thread${pool.threads > 1 ? "s" : ""}, SIMD`,

    async setState(s: ParamState) {
      for (const [name, arr] of [["params", s.params], ["m", s.m], ["v", s.v]] as const) {
        if (arr && arr.length !== P) throw new Error(`cpu backend setState: ${name} has ${arr.length} floats, the model has ${P} parameters`);
      }
      if (!Number.isInteger(s.step) || s.step < 0) throw new Error(`cpu backend setState: step must be a non-negative integer, got ${s.step}`);
      f32.set(s.params, params / 4);
      if (s.m) f32.set(s.m, mom1 / 4); else f32.fill(0, mom1 / 4, mom1 / 4 + P);
      if (s.v) f32.set(s.v, mom2 / 4); else f32.fill(0, mom2 / 4, mom2 / 4 + P);
      step = s.step;
    },

    async getState() {
      return { params: state(params), m: state(mom1), v: state(mom2), step };
    },

    async trainStep(x: Int32Array, y: Int32Array, lr: number) {
      const seqs = checkBatch("trainStep", x, y);
      f32.fill(0, grads / 4, grads / 4 + P);
      const loss = batchLoss(x, y, seqs, true) / x.length;
      const norm = Math.sqrt(ex.sumsq(grads, P));
      const clip = norm > opt.grad_clip ? opt.grad_clip / norm : 1;
      step += 1;
      const bc1 = 1 - opt.beta1 ** step, bc2 = 1 - opt.beta2 ** step;
      run("adamw", [params, grads, mom1, mom2, decayRanges, decayed.length, lr, opt.beta1, opt.beta2, opt.eps, opt.weight_decay,
        bc1, bc2, clip], 0, P, 64);
      return loss;
    },

    async loss(x: Int32Array, y: Int32Array) {
      const seqs = checkBatch("loss", x, y);
      return batchLoss(x, y, seqs, false) / x.length;
    },

    async nextLogits(tokens: Int32Array) {
      if (tokens.length === 0) throw new Error("cpu backend nextLogits: needs at least one token");
      const ctx = tokens.subarray(Math.max(0, tokens.length - model.block_size));
      for (let i = 0; i < ctx.length; i++) {
        if (!(ctx[i] >= 0 && ctx[i] < V)) throw new Error(`cpu backend nextLogits: token ${ctx[i]} is outside [0, ${V})`);
      }
      const a = actsFor(1);
      const T = ctx.length;
      loadTokens(a, ctx, null, 0, T);
      forward(a, T, T, T - 1);
      return f32.slice(a.logits / 4 + (T - 1) * V, a.logits / 4 + T * V);
    },

    dispose() {
      pool.dispose();
    },
  };
}
