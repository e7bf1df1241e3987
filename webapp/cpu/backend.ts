// The WebAssembly CPU backend: the same training step as the reference
// (tinygpt/model.py, tinygpt/train.py) over one linear memory, with the kernels
// of assembly/index.ts. Everything lives in that memory: parameters, gradients,
// Adam moments, and the activations of one micro-batch. A
// batch whose activations would not fit the budget is run as several
// micro-batches whose gradients add up (the loss is a mean over all positions,
// so the result is the same step).
//
// A step is a short list of jobs (threads.ts): row-wise kernels chain inside a
// job, and a job ends only where a kernel needs rows other threads wrote. Per
// layer that is twice forward (around attention) and twice backward (around
// attention, and once the weight gradients need every row), so a Small step
// waits at about 20 barriers, not one per kernel call.
//
// Sampling's KV cache is the first sequence's activations: prefill leaves every
// layer's keys and values in its rows, and decode runs one more row through the
// same kernels, except attention: its one query reads the cached rows
// (attention_decode). Jobs of one row give the helper threads nothing, so they
// stay asleep (threads.ts). trainStep and loss reuse the activations, so they
// forget the cache, as setState does.
//
// With sampleInt8 set (the int8 sampling lever, after levers/int8 chooseInt8's held-out check),
// a decode's products read an int8 copy of the weights instead (engine/quantize.ts int8Layout,
// made from the parameters by packInt8 before the first such decode after they changed): each
// input row is quantized once (quantize_rows) and each product summed exactly in i32
// (matvec_i8), a quarter of the bytes. Prefill stays f32, as on the GPU.
//
// Made with a lora option, the backend fine-tunes: the parameters are a frozen base with no
// gradients or moments in memory, and an adapted projection adds u B to its output, where
// u = x (s A) is kept for the backward (s = alpha / rank). Its backward computes no base
// gradient: per adapted projection, e = dout (s B)^T, dx += e A^T, dA = x^T e and dB = u^T dout,
// the last two over every row, so after the next barrier. The adapter's rank is padded to a
// multiple of 4 for SIMD with zero columns of A and rows of B, whose gradients and updates stay
// exactly zero; the scaled and transposed copies the products read are made on the host after
// each update (an adapter is small).

import facts from "../../tinygpt/facts.json";
import { checkModelConfig, tensorLayout, type TensorInfo } from "../engine/model";
import { checkInterrupt } from "../engine/interrupt";
import { int8Layout, packInt8 } from "../engine/quantize";
import { adapterLayout, loraScale, type LoraSettings, type Projection } from "../engine/lora";
import type { AdapterSlot, Backend, Int8Decoding, ModelConfig, ParamState, TrainConfig } from "../engine/types";
import { ID as RELAXED_SIMD, gatedRelaxed } from "../levers/relaxed-simd/lever";
import { workerUrl } from "../trusted";
import { CONTROL_BYTES, singleThread, threadPool, type Call, type KernelName, type Kernels, type Pool, type WorkerLike } from "./threads";
import { withSharedMemory } from "./wasm";

export type OptimizerConfig = Pick<TrainConfig, "beta1" | "beta2" | "eps" | "weight_decay" | "grad_clip">;

export interface CpuBackendOptions {
  /** The built cpu.wasm bytes (the relaxed-SIMD build rides inside, wasm.ts), or a compiled module (then one thread, plain). */
  wasm: BufferSource | WebAssembly.Module;
  /** Threads wanted; more than 1 needs SharedArrayBuffer (a cross-origin isolated page) and a way to start workers. */
  threads: number;
  /** Use the relaxed-SIMD build where the engine supports it and it passes the gate (default true). */
  relaxed?: boolean;
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
  /**
   * A shared flag (engine/interrupt.ts): while it is set, trainStep, loss,
   * prefill and decode stop at the next barrier and reject with Interrupted, before
   * anything they change (a step's optimizer update runs whole or not at all).
   */
  interrupt?: Int32Array;
  /** Fine-tune an adapter with these settings on a frozen base (Backend.adapter). */
  lora?: LoraSettings;
}

/** A Backend on WebAssembly, saying which paths it runs on. */
export interface CpuBackend extends Backend, Int8Decoding {
  readonly threads: number;
  /** Running the relaxed-SIMD (fused multiply-add) build. */
  readonly relaxed: boolean;
}

interface Exports extends Kernels {
  memory: WebAssembly.Memory;
  heap_base(): number;
}

const PAGE = 65536;
const MAX_PAGES = 65536; // asconfig maximumMemory: the whole 4 GiB a wasm32 memory can address
const SHARED_MAX_PAGES = 32768; // shared memories reserve their maximum up front: keep it to 2 GiB
const DEFAULT_ACTIVATION_BUDGET = 512 * 1024 * 1024;
// The interrupt is read between jobs, so a job's length bounds how soon a step
// can be abandoned. The longest job (a block's projection and MLP matmuls,
// forward, or their weight gradients backward) grows with the micro-batch's
// rows: micro-batches are cut so it stays near this many flops, about 0.2 s on
// two busy cores (Huge: one sequence; Tiny and Small: the whole batch).
const JOB_FLOPS = 1e9;
const NORM_BLOCK = 1024; // assembly sumsq's block
/** The id of the int8 sampling lever (facts.levers), in paths while sampling runs on it. */
const INT8 = "int8";

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
  /** u = x (s A) of each adapted projection, [rows, padded rank]. */
  u: Map<Projection, number>;
  res: number; ln1: number; ln1Mean: number; ln1Rstd: number; q: number; k: number; v: number; att: number;
  y: number; mid: number; ln2: number; ln2Mean: number; ln2Rstd: number; h: number; g: number;
}

interface Acts {
  seqs: number;
  layers: LayerActs[];
  res: number; lnf: number; lnfMean: number; lnfRstd: number; logits: number; losses: number; tokens: number; targets: number;
  attScratch: number;
  /** Gradients w.r.t. the residual stream, in turns: a layer's output and its mid point. */
  dres: [number, number];
  dln1: number; dln2: number; dy: number; dq: number; dk: number; dv: number; dh: number;
  /** Transposed copies of g and dlogits, for weight gradients whose K exceeds M. */
  gT: number; logitsT: number;
  /** e = dout (s B)^T of each adapted projection, [rows, padded rank]: one layer's, until the next barrier but one. */
  e: Map<Projection, number>;
}

/** An adapted projection: where its adapter's tensors lie in the padded flat arrays (floats), and its sizes. */
interface Site {
  a: number; b: number; K: number; M: number;
  /** The tensors' places in adapterLayout's unpadded flat order. */
  flatA: number; flatB: number;
}

/** The adapter's tensors with the rank padded to `rank` (a multiple of 4), by layer and projection. */
function adapterPlan(m: ModelConfig, s: LoraSettings) {
  const rank = Math.ceil(s.rank / 4) * 4;
  const sites = Array.from({ length: m.n_layer }, () => new Map<Projection, Site>());
  const layout = adapterLayout(m, s);
  let floats = 0;
  for (let j = 0; j < layout.length; j += 2) {
    const [a, b] = [layout[j], layout[j + 1]];
    const K = a.shape[0], M = b.shape[1];
    sites[a.layer].set(a.target, { a: floats, b: floats + K * rank, K, M, flatA: a.offset, flatB: b.offset });
    floats += (K + M) * rank;
  }
  return { rank, sites, all: sites.flatMap((m) => [...m.values()]), floats, flatFloats: layout.reduce((n, t) => n + t.size, 0) };
}
type AdapterPlan = ReturnType<typeof adapterPlan>;


/** Activation buffers for `seqs` sequences of block_size tokens, allocated from `arena`. */
function layoutActs(m: ModelConfig, seqs: number, arena: Arena, adapter: AdapterPlan | null): Acts {
  const T = m.block_size, Tp = Math.ceil(T / 4) * 4;
  const N = seqs * T, C = m.n_embd, F = 4 * C, H = m.n_head, D = C / H;
  const t = (n: number) => arena.take(n);
  const perSite = (layer: number) => new Map([...(adapter?.sites[layer] ?? [])].map(([target]) => [target, t(N * adapter!.rank)]));
  const layers = Array.from({ length: m.n_layer }, (_, i) => ({
    u: perSite(i),
    res: t(N * C), ln1: t(N * C), ln1Mean: t(N), ln1Rstd: t(N), q: t(N * C), k: t(N * C), v: t(N * C),
    att: t(seqs * H * T * Tp), y: t(N * C), mid: t(N * C), ln2: t(N * C),
    ln2Mean: t(N), ln2Rstd: t(N), h: t(N * F), g: t(N * F),
  }));
  return {
    seqs, layers, res: t(N * C), lnf: t(N * C), lnfMean: t(N), lnfRstd: t(N), logits: t(N * m.vocab_size),
    losses: t(N), tokens: t(N), targets: t(N), attScratch: t(seqs * H * (D + 4) * Tp),
    dres: [t(N * C), t(N * C)], dln1: t(N * C), dln2: t(N * C), dy: t(N * C), dq: t(N * C), dk: t(N * C), dv: t(N * C),
    dh: t(N * F), gT: F > C && !adapter ? t(N * F) : 0, logitsT: m.vocab_size > C && !adapter ? t(N * m.vocab_size) : 0,
    e: perSite(0),
  };
}

/**
 * A Backend on WebAssembly. Asked for several threads where SharedArrayBuffer
 * exists, it starts helper workers on a shared memory; if that fails (no
 * worker, no shared memory this large) it runs on one thread, and `device` says so.
 */
export async function createCpuBackend(model: ModelConfig, opts: CpuBackendOptions): Promise<CpuBackend> {
  checkModelConfig(model);
  const C = model.n_embd, H = model.n_head;
  if (C % 4 !== 0 || (C / H) % 4 !== 0) {
    throw new Error(`cpu backend: n_embd (${C}) and head size n_embd/n_head (${C / H}) must be multiples of 4 for SIMD`);
  }
  if (!Number.isInteger(opts.threads) || opts.threads < 1) throw new Error(`cpu backend: threads must be a positive integer, got ${opts.threads}`);
  const compiled = opts.wasm instanceof WebAssembly.Module;
  const relaxed = !compiled && opts.relaxed !== false ? (await gatedRelaxed(opts.wasm as BufferSource)).module : null;
  const bytes = compiled ? null : relaxed ?? (opts.wasm as BufferSource);
  const canShare = typeof SharedArrayBuffer !== "undefined" && (globalThis as { crossOriginIsolated?: boolean }).crossOriginIsolated !== false;
  const spawn = opts.spawn ?? (opts.workerUrl !== undefined ? () => new Worker(workerUrl(opts.workerUrl!), { type: "module" }) : null);
  if (opts.threads > 1 && canShare && spawn && bytes) {
    const helpers: WorkerLike[] = [];
    try {
      while (helpers.length < opts.threads - 1) helpers.push(spawn());
      const module = await WebAssembly.compile(withSharedMemory(bytes));
      return await start(model, opts, module, relaxed !== null, helpers);
    } catch (err) {
      for (const w of helpers) w.terminate();
      console.warn(`cpu backend: running on one thread (${(err as Error).message})`);
    }
  }
  const module = bytes ? await WebAssembly.compile(bytes) : (opts.wasm as WebAssembly.Module);
  return start(model, opts, module, relaxed !== null, null);
}

/** Where everything but the activations lives in the linear memory, and how many sequences a micro-batch holds. */
function memoryPlan(model: ModelConfig, heapBase: number, activationBudget = DEFAULT_ACTIVATION_BUDGET, lora?: LoraSettings) {
  const C = model.n_embd, F = 4 * C, T = model.block_size;
  const layout = tensorLayout(model);
  const P = layout.reduce((a, t) => a + t.size, 0);
  const fixed = new Arena(Math.ceil(heapBase / 64) * 64);
  const control = fixed.take(CONTROL_BYTES / 4);
  const adapter = lora ? adapterPlan(model, lora) : null;
  // A frozen base has no gradients or moments: the adapter has its own, and copies of its
  // tensors scaled (s A) and transposed (A^T, and (s B)^T at B's place) for the products.
  const trained = adapter ? adapter.floats : P;
  const params = fixed.take(P), grads = fixed.take(trained), mom1 = fixed.take(trained), mom2 = fixed.take(trained);
  const adapterParams = adapter ? fixed.take(trained) : 0, adapterScaled = adapter ? fixed.take(trained) : 0, adapterT = adapter ? fixed.take(trained) : 0;
  const normBlocks = Math.ceil(trained / NORM_BLOCK);
  const norms = fixed.take(2 * normBlocks);
  const decayed = layout.filter((t) => t.decay);
  // The optimizer decays these ranges of what it updates: the base's 2-D tensors, or all of an adapter.
  const decayRanges = fixed.take(2 * (adapter ? 1 : decayed.length));
  // The int8 copy of the weights (its blocks on cache lines), and a decode's rows quantized:
  // row r's K bytes at r * K (K up to 4 n_embd), its scale at r.
  const int8 = int8Layout(model, 64);
  const int8Words = fixed.take(int8.words);
  const rowsQ = fixed.take((T * F) / 4), rowScales = fixed.take(T);
  const oneSeq = new Arena(0);
  layoutActs(model, 1, oneSeq, adapter);
  const jobFlops = T * (2 * C * (C + 2 * F) + 4 * T * C);
  const maxSeqs = Math.max(1, Math.min(Math.floor(activationBudget / oneSeq.end), Math.floor(JOB_FLOPS / jobFlops)));
  return { layout, P, adapter, trained, control, params, grads, mom1, mom2, adapterParams, adapterScaled, adapterT, normBlocks, norms,
    decayed, decayRanges, int8, int8Words, rowsQ, rowScales, actsBase: fixed.end, maxSeqs };
}

/**
 * The WebAssembly memory a backend for `model` takes to train batches of
 * `batch` sequences (fine-tuning with `lora`; the module's own few kilobytes of data aside), from the
 * layout it allocates by, and the most a memory may hold: shared between
 * threads, or one thread's.
 */
export function cpuMemory(model: ModelConfig, batch: number, activationBudget?: number, lora?: LoraSettings): { bytes: number; sharedLimit: number; limit: number } {
  const plan = memoryPlan(model, 0, activationBudget, lora);
  const acts = new Arena(plan.actsBase);
  layoutActs(model, Math.min(batch, plan.maxSeqs), acts, plan.adapter);
  return { bytes: acts.end, sharedLimit: SHARED_MAX_PAGES * PAGE, limit: MAX_PAGES * PAGE };
}

async function start(model: ModelConfig, opts: CpuBackendOptions, module: WebAssembly.Module, relaxed: boolean,
  helpers: WorkerLike[] | null): Promise<CpuBackend> {
  const C = model.n_embd, H = model.n_head;
  const shared = helpers !== null;
  const memory = new WebAssembly.Memory({ initial: 1, maximum: shared ? SHARED_MAX_PAGES : MAX_PAGES, shared });
  const instance = await WebAssembly.instantiate(module, { env: { memory } });
  const ex = instance.exports as unknown as Exports;

  const { layout, P, adapter, trained, control, params, grads, mom1, mom2, adapterParams, adapterScaled, adapterT, normBlocks, norms,
    decayed, decayRanges, int8, int8Words, rowsQ, rowScales, actsBase, maxSeqs } = memoryPlan(model, ex.heap_base(), opts.activationBudget, opts.lora);
  const F = 4 * C, V = model.vocab_size;

  let f32 = new Float32Array(0), i32 = new Int32Array(0), f64 = new Float64Array(0);
  const ensureBytes = (end: number) => {
    const pages = Math.ceil(end / PAGE);
    const have = memory.buffer.byteLength / PAGE;
    if (pages > (shared ? SHARED_MAX_PAGES : MAX_PAGES)) throw new Error(`cpu backend: needs ${(end / 2 ** 30).toFixed(2)} GiB, more than WebAssembly memory allows`);
    if (pages > have) memory.grow(pages - have);
    if (f32.buffer !== memory.buffer || f32.length * 4 !== memory.buffer.byteLength) {
      f32 = new Float32Array(memory.buffer);
      i32 = new Int32Array(memory.buffer);
      f64 = new Float64Array(memory.buffer);
    }
  };
  ensureBytes(actsBase);
  i32.set(adapter ? [0, trained] : decayed.flatMap((t) => [t.offset, t.offset + t.size]), decayRanges / 4);
  const pool: Pool = helpers ? await threadPool(ex, module, memory, control, helpers, opts.spinMs) : singleThread(ex);

  const opt = opts.optimizer ?? facts.optimizer;
  const eps = facts.model.layernorm_eps;
  const scale = 1 / Math.sqrt(C / H);
  const byName = new Map(layout.map((t) => [t.name, t]));
  const tensor = (name: string) => byName.get(name) as TensorInfo;
  const p = (name: string) => params + tensor(name).offset * 4;
  const g = (name: string) => grads + tensor(name).offset * 4;
  const blk = (i: number, name: string) => `blocks.${i}.${name}`;
  let step = 0;
  // Fine-tuning: the adapter's step count, and whether loss, prefill and decode add it.
  let adapterStep = 0, adapterOn = true;
  let acts: Acts | null = null;
  // Tokens the KV cache holds: their keys and values are rows [0, cached) of the first
  // sequence's l.k and l.v, where prefill and decode left them. 0 when there are none: trainStep
  // and loss reuse those activations, and setState changes the parameters they came from.
  let cached = 0;
  // The int8 decoding path: on or off, whether the copy predates the parameters, their version.
  let sampleInt8 = false, int8Stale = true, paramsVersion = 0, int8RefreshMs = 0;
  const int8Block = (name: string) => int8Words + int8.blocks.get(name)!.offset * 4;
  /** The parameters changed: the int8 copy is stale, and they decode on it only once checked (levers/int8 chooseInt8). */
  const paramsChanged = () => {
    paramsVersion++;
    int8Stale = true;
    sampleInt8 = false;
  };
  const refreshInt8 = () => {
    if (!int8Stale) return;
    const t0 = performance.now();
    packInt8(int8, (name) => f32.subarray(p(name) / 4, p(name) / 4 + tensor(name).size), new Uint32Array(memory.buffer, int8Words, int8.words));
    int8Stale = false;
    int8RefreshMs = performance.now() - t0;
  };

  const actsFor = (seqs: number): Acts => {
    if (!acts || acts.seqs < seqs) {
      const arena = new Arena(actsBase);
      acts = layoutActs(model, seqs, arena, adapter);
      ensureBytes(arena.end);
    }
    return acts;
  };

  let job: Call[] = [];
  const call = (kernel: KernelName, args: number[], lo: number, hi: number, align = 4) => {
    if (hi > lo) job.push({ kernel, args, lo, hi, align });
  };
  /**
   * Ends the job: from here on every thread sees what every other wrote. The
   * interrupt is checked here, between jobs (a Huge step has about 30), except
   * after the optimizer's job, which must not be abandoned once it has run.
   */
  const sync = (interruptible = true) => {
    if (job.length) pool.run(job);
    job = [];
    if (interruptible) checkInterrupt(opts.interrupt);
  };

  /**
   * The kernels of one micro-batch of `rows` rows in sequences of T. With `lo` > 0 (one
   * sequence) rows [0, lo) are the KV cache and the forward runs rows [lo, rows): a decode, one,
   * whose products read the int8 copy of the weights with `q8`. With `adapted` the adapter's
   * terms are added (it must exist); the backward is then the adapter's alone.
   */
  const passes = (a: Acts, rows: number, T: number, lo = 0, q8 = false, adapted = false) => {
    const items = (rows / T) * H;
    /** A row-wise call: every one of these gives each thread the same rows. */
    const rowwise = (kernel: KernelName, args: number[]) => call(kernel, args, lo, rows);
    /** out[rows, M] = c + inp[rows, K] @ w[K, M] + b */
    const linear = (out: number, inp: number, w: number, b: number, c: number, K: number, M: number) =>
      rowwise("matmul", [out, inp, w, b, c, K, 1, K, M]);
    /** out [rows, M] = c + inp [rows, K] W^T, W [M, K] read in place. */
    const linearT = (out: number, inp: number, w: string, c: number, K: number, M: number) =>
      rowwise("matmul_nt", [out, inp, p(w), c, K, M]);
    /**
     * dw[K, M] += x^T @ dout, over all rows. With K > M the strided reads of x
     * (K floats apart, often a power of two) fight over the same cache sets, so
     * x arrives transposed (xT, written row-wise before the barrier).
     */
    const weightGrad = (dw: number, x: number, xT: number, dout: number, K: number, M: number) => {
      if (xT) call("matmul", [dw, xT, dout, 0, dw, rows, 1, rows, M], 0, K);
      else call("matmul", [dw, x, dout, 0, dw, 1, K, rows, M], 0, K);
    };
    const biasGrad = (db: number, dout: number, M: number) => call("colsum", [db, dout, rows, M], 0, M / 4, 8);
    const lnParamGrads = (w: string, b: string, dout: number, x: number, mean: number, rstd: number) =>
      call("layernorm_param_grads", [g(w), g(b), dout, x, mean, rstd, rows, C], 0, C / 4);
    /**
     * out = c + inp @ the weight `name` + b: linear, or with q8 matvec_i8 on the weight's int8
     * block, inp's rows quantized first unless `quantized` (q, k and v share ln1's).
     */
    const product = (out: number, inp: number, name: string, b: number, c: number, K: number, M: number, quantized = false) => {
      if (!q8) return linear(out, inp, p(name), b, c, K, M);
      if (!quantized) rowwise("quantize_rows", [rowsQ, rowScales, inp, K]);
      rowwise("matvec_i8", [out, rowsQ, rowScales, int8Block(name), b, c, K, M]);
    };
    const site = (i: number, target: Projection) => (adapted ? adapter!.sites[i].get(target) : undefined);
    const rank = adapter?.rank ?? 0;
    /** The adapter's term on layer i's projection `target`, where adapted: u = x (s A), out += u B. */
    const adapt = (i: number, target: Projection, out: number, x: number) => {
      const at = site(i, target);
      if (!at) return;
      const u = a.layers[i].u.get(target)!;
      rowwise("matmul", [u, x, adapterScaled + at.a * 4, 0, 0, at.K, 1, at.K, rank]);
      rowwise("matmul", [out, u, adapterParams + at.b * 4, 0, out, rank, 1, rank, at.M]);
    };
    /** Backward through that term: e = dout (s B)^T, and dx += e A^T where dx is wanted. */
    const adaptBack = (i: number, target: Projection, dout: number, dx: number) => {
      const at = site(i, target);
      if (!at) return;
      const e = a.e.get(target)!;
      rowwise("matmul", [e, dout, adapterT + at.b * 4, 0, 0, at.M, 1, at.M, rank]);
      if (dx) rowwise("matmul", [dx, e, adapterT + at.a * 4, 0, dx, rank, 1, rank, at.K]);
    };
    /** dA += x^T e, over every row of e: after the barrier that completes it. */
    const gradA = (i: number, target: Projection, x: number) => {
      const at = site(i, target);
      if (at) call("matmul", [grads + at.a * 4, x, a.e.get(target)!, 0, grads + at.a * 4, 1, at.K, rows, rank], 0, at.K);
    };
    /** dB += u^T dout, over every row of dout. */
    const gradB = (i: number, target: Projection, dout: number) => {
      const at = site(i, target);
      if (at) call("matmul", [grads + at.b * 4, a.layers[i].u.get(target)!, dout, 0, grads + at.b * 4, 1, rank, rows, at.M], 0, rank);
    };

    /** Forward through every block; the final LayerNorm and head run on rows [headLo, rows). Leaves the last job open. */
    const forward = (headLo: number) => {
      rowwise("embed_forward", [a.layers[0].res, a.tokens, p("token_embedding.weight"), p("position_embedding.weight"), T, C]);
      for (let i = 0; i < model.n_layer; i++) {
        const l = a.layers[i];
        const w = (name: string) => p(blk(i, name));
        rowwise("layernorm_forward", [l.ln1, l.ln1Mean, l.ln1Rstd, l.res, w("ln1.weight"), w("ln1.bias"), C, eps]);
        product(l.q, l.ln1, blk(i, "attn.q_proj.weight"), w("attn.q_proj.bias"), 0, C, C);
        product(l.k, l.ln1, blk(i, "attn.k_proj.weight"), w("attn.k_proj.bias"), 0, C, C, true);
        product(l.v, l.ln1, blk(i, "attn.v_proj.weight"), w("attn.v_proj.bias"), 0, C, C, true);
        for (const [target, out] of [["q", l.q], ["k", l.k], ["v", l.v]] as const) adapt(i, target, out, l.ln1);
        sync();
        if (lo) rowwise("attention_decode", [l.y, l.att, l.q, l.k, l.v, T, C, H, scale]);
        else call("attention_forward", [l.y, l.att, a.attScratch, l.q, l.k, l.v, T, C, H, scale], 0, items, 1);
        sync();
        const out = i + 1 < model.n_layer ? a.layers[i + 1].res : a.res;
        product(l.mid, l.y, blk(i, "attn.o_proj.weight"), w("attn.o_proj.bias"), l.res, C, C);
        adapt(i, "o", l.mid, l.y);
        rowwise("layernorm_forward", [l.ln2, l.ln2Mean, l.ln2Rstd, l.mid, w("ln2.weight"), w("ln2.bias"), C, eps]);
        product(l.h, l.ln2, blk(i, "mlp.fc_in.weight"), w("mlp.fc_in.bias"), 0, C, F);
        adapt(i, "fc_in", l.h, l.ln2);
        rowwise("gelu_forward", [l.g, l.h, F]);
        product(out, l.g, blk(i, "mlp.fc_out.weight"), w("mlp.fc_out.bias"), l.mid, F, C);
        adapt(i, "fc_out", out, l.g);
      }
      if (headLo > lo) sync(); // the head's rows are cut differently from the blocks' rows
      call("layernorm_forward", [a.lnf, a.lnfMean, a.lnfRstd, a.res, p("ln_final.weight"), p("ln_final.bias"), C, eps], headLo, rows);
      if (q8) {
        rowwise("quantize_rows", [rowsQ, rowScales, a.lnf, C]);
        rowwise("matvec_i8", [a.logits, rowsQ, rowScales, int8Block("token_embedding.weight"), 0, 0, C, V]);
      } else call("matmul_nt", [a.logits, a.lnf, p("token_embedding.weight"), 0, C, V], headLo, rows);
    };

    /**
     * Backward from dlogits (crossentropy's, in a.logits), adding into the
     * gradients; continues the forward's open job. Weight gradients sum over
     * every row, so each joins the job after the barrier that completes its
     * inputs, beside attention (the buffers it reads stay untouched until then).
     * Fine-tuning, the base's gradients are skipped, and so is the input gradient
     * of the first block, which nothing trains.
     */
    const backward = () => {
      const full = !adapted;
      let [dres, dmid] = a.dres;
      const wte = "token_embedding.weight";
      linear(a.dln1, a.logits, p(wte), 0, 0, V, C); // dlnf, kept in dln1 until the next barrier
      rowwise("layernorm_backward", [dres, 0, a.dln1, a.res, p("ln_final.weight"), a.lnfMean, a.lnfRstd, C]);
      if (full && a.logitsT) rowwise("transpose", [a.logitsT, a.logits, rows, V]);
      let pending = () => {
        if (!full) return;
        weightGrad(g(wte), a.logits, a.logitsT, a.lnf, V, C);
        lnParamGrads("ln_final.weight", "ln_final.bias", a.dln1, a.res, a.lnfMean, a.lnfRstd);
      };
      for (let i = model.n_layer - 1; i >= 0; i--) {
        const l = a.layers[i];
        const name = (n: string) => blk(i, n);
        linearT(a.dh, dres, name("mlp.fc_out.weight"), 0, C, F);
        adaptBack(i, "fc_out", dres, a.dh);
        rowwise("gelu_backward", [a.dh, l.h, F]);
        linearT(a.dln2, a.dh, name("mlp.fc_in.weight"), 0, F, C);
        adaptBack(i, "fc_in", a.dh, a.dln2);
        rowwise("layernorm_backward", [dmid, dres, a.dln2, l.mid, p(name("ln2.weight")), l.ln2Mean, l.ln2Rstd, C]);
        linearT(a.dy, dmid, name("attn.o_proj.weight"), 0, C, C);
        adaptBack(i, "o", dmid, a.dy);
        if (full && a.gT) rowwise("transpose", [a.gT, l.g, rows, F]);
        sync();
        pending();
        call("attention_backward", [a.dq, a.dk, a.dv, a.attScratch, a.dy, l.q, l.k, l.v, l.att, T, C, H, scale], 0, items, 1);
        if (full) {
          weightGrad(g(name("mlp.fc_out.weight")), l.g, a.gT, dres, F, C);
          biasGrad(g(name("mlp.fc_out.bias")), dres, C);
          weightGrad(g(name("mlp.fc_in.weight")), l.ln2, 0, a.dh, C, F);
          biasGrad(g(name("mlp.fc_in.bias")), a.dh, F);
          lnParamGrads(name("ln2.weight"), name("ln2.bias"), a.dln2, l.mid, l.ln2Mean, l.ln2Rstd);
          weightGrad(g(name("attn.o_proj.weight")), l.y, 0, dmid, C, C);
          biasGrad(g(name("attn.o_proj.bias")), dmid, C);
        }
        for (const [target, x, dout] of [["fc_out", l.g, dres], ["fc_in", l.ln2, a.dh], ["o", l.y, dmid]] as const) {
          gradA(i, target, x);
          gradB(i, target, dout);
        }
        sync();
        const inputGrad = full || i > 0;
        if (inputGrad) {
          linearT(a.dln1, a.dq, name("attn.q_proj.weight"), 0, C, C);
          linearT(a.dln1, a.dk, name("attn.k_proj.weight"), a.dln1, C, C);
          linearT(a.dln1, a.dv, name("attn.v_proj.weight"), a.dln1, C, C);
        }
        const qkv = [["q", a.dq], ["k", a.dk], ["v", a.dv]] as const;
        for (const [target, d] of qkv) adaptBack(i, target, d, inputGrad ? a.dln1 : 0);
        // The gradient w.r.t. this block's input, in place over dmid (its last reader was before the barrier).
        if (inputGrad) rowwise("layernorm_backward", [dmid, dmid, a.dln1, l.res, p(name("ln1.weight")), l.ln1Mean, l.ln1Rstd, C]);
        for (const [target, d] of qkv) {
          if (full) {
            weightGrad(g(name(`attn.${target}_proj.weight`)), l.ln1, 0, d, C, C);
            biasGrad(g(name(`attn.${target}_proj.bias`)), d, C);
          }
          gradB(i, target, d);
        }
        // e of q, k and v is complete only after the next barrier.
        pending = () => {
          if (full) lnParamGrads(name("ln1.weight"), name("ln1.bias"), a.dln1, l.res, l.ln1Mean, l.ln1Rstd);
          for (const [target] of qkv) gradA(i, target, l.ln1);
        };
        [dres, dmid] = [dmid, dres];
      }
      sync();
      pending();
      if (full) call("embed_backward", [g(wte), g("position_embedding.weight"), dres, a.tokens, T, C, rows], 0, C / 4, 1);
    };

    return { forward, backward };
  };

  const loadTokens = (a: Acts, x: Int32Array, y: Int32Array | null, from: number, rows: number) => {
    i32.set(x.subarray(from, from + rows), a.tokens / 4);
    if (y) i32.set(y.subarray(from, from + rows), a.targets / 4);
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

  /** Sum of per-position losses over the batch, optionally adding gradients of their mean (of the adapter's tensors, fine-tuning). */
  const batchLoss = (x: Int32Array, y: Int32Array, seqs: number, withGrads: boolean): number => {
    const adapted = adapter !== null && (withGrads || adapterOn);
    const T = model.block_size;
    cached = 0;
    const a = actsFor(Math.min(seqs, maxSeqs));
    const gradScale = withGrads ? 1 / (seqs * T) : 0;
    if (withGrads) call("zero", [grads], 0, trained, 16);
    let total = 0;
    for (let s = 0; s < seqs; s += a.seqs) {
      const rows = Math.min(a.seqs, seqs - s) * T;
      loadTokens(a, x, y, s * T, rows);
      const { forward, backward } = passes(a, rows, T, 0, false, adapted);
      forward(0);
      call("crossentropy", [a.logits, a.losses, a.targets, V, gradScale], 0, rows);
      if (withGrads) backward();
      sync();
      for (let r = 0; r < rows; r++) total += f32[a.losses / 4 + r];
    }
    return total;
  };

  const state = (from: number) => f32.slice(from / 4, from / 4 + P);

  /** The copies of the adapter the products read: s A at A's place, and A^T and (s B)^T at A's and B's. */
  const prepareAdapter = () => {
    const s = loraScale(opts.lora!), R = adapter!.rank;
    const [w, scaled, tr] = [adapterParams / 4, adapterScaled / 4, adapterT / 4];
    for (const site of adapter!.all) {
      for (let k = 0; k < site.K; k++) {
        for (let r = 0; r < R; r++) {
          const v = f32[w + site.a + k * R + r];
          f32[scaled + site.a + k * R + r] = s * v;
          f32[tr + site.a + r * site.K + k] = v;
        }
      }
      for (let r = 0; r < R; r++) {
        for (let m = 0; m < site.M; m++) f32[tr + site.b + m * R + r] = s * f32[w + site.b + r * site.M + m];
      }
    }
  };

  /**
   * Between the flat adapterLayout order and the padded arrays (sites): `flat` into `to` with
   * toPadded, else out of `from`; the padding is zero.
   */
  const padded = (flat: Float32Array, at: number, toPadded: boolean) => {
    const R = adapter!.rank, r = opts.lora!.rank, base = at / 4;
    for (const site of adapter!.all) {
      for (let k = 0; k < site.K; k++) {
        for (let j = 0; j < R; j++) {
          const i = base + site.a + k * R + j;
          if (toPadded) f32[i] = j < r ? flat[site.flatA + k * r + j] : 0;
          else if (j < r) flat[site.flatA + k * r + j] = f32[i];
        }
      }
      const [b, n] = [base + site.b, r * site.M];
      if (toPadded) {
        f32.set(flat.subarray(site.flatB, site.flatB + n), b);
        f32.fill(0, b + n, b + R * site.M);
      } else flat.set(f32.subarray(b, b + n), site.flatB);
    }
  };

  const adapterSlot: AdapterSlot | undefined = adapter ? {
    settings: opts.lora!,
    get enabled() {
      return adapterOn;
    },
    set enabled(on: boolean) {
      adapterOn = on;
      cached = 0;
    },
    async setState(s: ParamState) {
      for (const [name, arr] of [["params", s.params], ["m", s.m], ["v", s.v]] as const) {
        if (arr && arr.length !== adapter.flatFloats) throw new Error(`cpu backend adapter setState: ${name} has ${arr.length} floats, the adapter has ${adapter.flatFloats}`);
      }
      if (!Number.isInteger(s.step) || s.step < 0) throw new Error(`cpu backend adapter setState: step must be a non-negative integer, got ${s.step}`);
      const none = new Float32Array(adapter.flatFloats);
      padded(s.params, adapterParams, true);
      padded(s.m ?? none, mom1, true);
      padded(s.v ?? none, mom2, true);
      adapterStep = s.step;
      prepareAdapter();
      cached = 0;
      paramsChanged();
    },
    async getState() {
      const out = () => new Float32Array(adapter.flatFloats);
      const [params_, m, v] = [out(), out(), out()];
      padded(params_, adapterParams, false);
      padded(m, mom1, false);
      padded(v, mom2, false);
      return { params: params_, m, v, step: adapterStep };
    },
  } : undefined;

  return {
    kind: "wasm",
    device: `${pool.threads} thread${pool.threads > 1 ? "s" : ""}, ${relaxed ? "relaxed SIMD" : "SIMD"}`,
    threads: pool.threads,
    relaxed,
    get paths() {
      return [...(pool.threads > 1 ? ["threads"] : []), ...(relaxed ? [RELAXED_SIMD] : []), ...(sampleInt8 ? [INT8] : [])];
    },
    adapter: adapterSlot,
    hasInt8: true,
    get sampleInt8() {
      return sampleInt8;
    },
    set sampleInt8(on: boolean) {
      sampleInt8 = on;
    },
    get paramsVersion() {
      return paramsVersion;
    },
    get int8RefreshMs() {
      return int8RefreshMs;
    },
    /** Everything lives in the one WebAssembly memory, which helper threads share. */
    get residentBytes() {
      return memory.buffer.byteLength;
    },

    async setState(s: ParamState) {
      for (const [name, arr] of [["params", s.params], ["m", s.m], ["v", s.v]] as const) {
        if (arr && arr.length !== P) throw new Error(`cpu backend setState: ${name} has ${arr.length} floats, the model has ${P} parameters`);
      }
      if (!Number.isInteger(s.step) || s.step < 0) throw new Error(`cpu backend setState: step must be a non-negative integer, got ${s.step}`);
      if (adapter && (s.m || s.v)) throw new Error("cpu backend setState: the base is frozen while fine-tuning: it takes no Adam moments");
      f32.set(s.params, params / 4);
      if (!adapter) {
        if (s.m) f32.set(s.m, mom1 / 4); else f32.fill(0, mom1 / 4, mom1 / 4 + P);
        if (s.v) f32.set(s.v, mom2 / 4); else f32.fill(0, mom2 / 4, mom2 / 4 + P);
      }
      step = s.step;
      cached = 0;
      paramsChanged();
    },

    async getState() {
      return adapter ? { params: state(params), step } : { params: state(params), m: state(mom1), v: state(mom2), step };
    },

    async trainStep(x: Int32Array, y: Int32Array, lr: number) {
      const seqs = checkBatch("trainStep", x, y);
      const loss = batchLoss(x, y, seqs, true) / x.length;
      call("sumsq", [grads, trained, norms], 0, normBlocks, 1);
      sync();
      let sq = 0;
      for (let b = 0; b < normBlocks; b++) sq += f64[norms / 8 + b];
      const norm = Math.sqrt(sq);
      const clip = norm > opt.grad_clip ? opt.grad_clip / norm : 1;
      const t = adapter ? ++adapterStep : ++step;
      const bc1 = 1 - opt.beta1 ** t, bc2 = 1 - opt.beta2 ** t;
      call("adamw", [adapter ? adapterParams : params, grads, mom1, mom2, decayRanges, adapter ? 1 : decayed.length, lr, opt.beta1, opt.beta2,
        opt.eps, opt.weight_decay, bc1, bc2, clip], 0, trained, 64);
      sync(false);
      if (adapter) prepareAdapter();
      paramsChanged();
      return loss;
    },

    async loss(x: Int32Array, y: Int32Array) {
      const seqs = checkBatch("loss", x, y);
      return batchLoss(x, y, seqs, false) / x.length;
    },

    async prefill(tokens: Int32Array) {
      const T = tokens.length;
      if (!(T >= 1 && T <= model.block_size)) throw new Error(`cpu backend prefill: takes 1 to ${model.block_size} tokens, got ${T}`);
      for (let i = 0; i < T; i++) {
        if (!(tokens[i] >= 0 && tokens[i] < V)) throw new Error(`cpu backend prefill: token ${tokens[i]} is outside [0, ${V})`);
      }
      cached = 0;
      const a = actsFor(1);
      loadTokens(a, tokens, null, 0, T);
      passes(a, T, T, 0, false, adapter !== null && adapterOn).forward(T - 1);
      sync();
      cached = T;
      return f32.slice(a.logits / 4 + (T - 1) * V, a.logits / 4 + T * V);
    },

    async decode(token: number) {
      const t = cached;
      if (!(Number.isInteger(token) && token >= 0 && token < V)) throw new Error(`cpu backend decode: token ${token} is not an integer in [0, ${V})`);
      if (t === 0) throw new Error("cpu backend decode: nothing is cached (no prefill since the last trainStep, loss or setState): prefill first");
      if (t === model.block_size) throw new Error(`cpu backend decode: the cache is full (block_size ${t} tokens): prefill again`);
      const a = actsFor(1);
      i32[a.tokens / 4 + t] = token;
      if (sampleInt8) refreshInt8();
      passes(a, t + 1, t + 1, t, sampleInt8, adapter !== null && adapterOn).forward(t);
      sync();
      // Counted only now: an abandoned decode wrote nothing but row t, which the cache does not hold yet.
      cached = t + 1;
      return f32.slice(a.logits / 4 + t * V, a.logits / 4 + (t + 1) * V);
    },

    dispose() {
      pool.dispose();
    },
  };
}
