// The model as a fixed sequence of kernel dispatches (llm.c style: one
// forward and one backward function per layer kind, flat buffers). The
// activations for a batch of B sequences of T tokens are allocated once and
// reused every step; backward overwrites every gradient it owns, so gradients
// need no clearing between steps.
//
// With an adapter (fine-tuning: ParamBuffers.adapter) the parameters are a frozen base. An
// adapted projection y = x W + b adds s (x A) B (s = alpha / rank): u = x A, then s u as the
// product of the 1x1 matrix [s] with u (a matmul of K = 1: no kernel of its own), kept for the
// backward, and y += (s u) B. The backward computes no gradient of the base: per adapted
// projection, dB = (s u)ᵀ dy, e = [s] (dy Bᵀ), dA = xᵀ e and dx += e Aᵀ, beside the base's dx,
// down to the lowest block's projections and no further. Forward and decode take the adapter's
// terms or not (`adapted`): a backend records both plans and runs the one its adapter's switch
// asks for.

import type { ModelConfig } from "../types";
import { FACTS } from "../model";
import type { LoraSettings } from "../lora";
import { ACCUMULATE, BIAS, GRAD_A, GRAD_B, type Kernel, type KernelTable, type Op, type Sizes, attentionOp, colsumOp, elementwiseOp, matmulOp, weightGradOp } from "./kernels";
import type { Binding, Recorder } from "./recorder";
import type { AdapterGpuLayout, GpuLayout } from "./layout";
import type { Int8Layout } from "../quantize";
import { int8Binding, int8Span } from "./int8";

const EPS = FACTS.model.layernorm_eps;
// Gradients summed over every position of the batch (a weight gradient's K, the rows of a bias
// or LayerNorm parameter gradient) have small grids. One whose grid is below FILL workgroups is
// cut into runs of at least MIN_RUN rows (or k steps) summed apart, into the partials buffer,
// and colsum adds the partials in a fixed order: enough workgroups to keep a large GPU's
// multiprocessors busy (the H200 has 132), for the price of writing and reading the partials.
const FILL = 512;
const MIN_RUN = 256;
const MAX_SPLITS = 64;
/** A matmul's sizes: out[M,N] over K. */
type MNK = { M: number; N: number; K: number };
const COLSUM_MAX_N = 64 * 65535; // colsum's one-dimensional grid
// A matvec's params beyond a matmul's (matvec.wgsl): LayerNorm's eps, one product at stride 0.
const ONE_PRODUCT = { eps: EPS, products: 1, b_stride: 0, bias_stride: 0, c_stride: 0 };

/**
 * The runs `kernel` cuts a reduction of `run` rows (or k steps) into at `sizes`: 1 where it cannot
 * split or its grid already fills the GPU. Its `outputs` sums a run are added by colsum, whose
 * grid bounds them.
 */
export function splitsFor(kernel: Kernel, sizes: Sizes, run: number, outputs: number): number {
  if (!kernel.split || outputs > COLSUM_MAX_N) return 1;
  const grid = kernel.workgroups({ ...sizes, splits: 1 }).reduce((a, b) => a * b);
  return Math.max(1, Math.min(MAX_SPLITS, Math.ceil(FILL / grid), Math.floor(run / MIN_RUN)));
}
// Tokens and targets are u32; the split partials, the parameters and the loss stay f32 whatever
// the kernels' activations are.
const U32 = 4;
const F32 = 4;

export interface ParamBuffers {
  params: GPUBuffer;
  /** The gradients and Adam moments of what trains: the parameters, or, fine-tuning, the adapter's tensors in its layout. */
  grads: GPUBuffer;
  m: GPUBuffer;
  v: GPUBuffer;
  /** The parameters as packed halves at the same element offsets, for kernels marked weightsFromMirror; null without such. */
  mirror: GPUBuffer | null;
  /** The int8 copy of the weights decoding multiplies, for kernels marked weightsInt8; null without such. */
  int8?: { buffer: GPUBuffer; layout: Int8Layout } | null;
  /** The adapter of a backend that fine-tunes (the parameters are then frozen), or null. */
  adapter: AdapterBuffers | null;
}

/** An adapter's tensors on the GPU, f32 like the parameters, laid out as layout.ts adapterGpuLayout says. */
export interface AdapterBuffers {
  settings: LoraSettings;
  layout: AdapterGpuLayout;
  params: GPUBuffer;
  /** Its tensors as packed halves, where the table reads weights from a mirror (ParamBuffers.mirror); AdamW refreshes it. */
  mirror: GPUBuffer | null;
  /** The 1x1 matrix [s], s = alpha / rank (engine/lora.ts loraScale). */
  scale: GPUBuffer;
}

/** An adapted projection: its A [K, rank] and B [rank, N]. */
interface Site {
  a: AdapterGpuLayout["tensors"][number];
  b: AdapterGpuLayout["tensors"][number];
  K: number;
  N: number;
}

/**
 * q, k and v (or their gradients), one after another in one buffer: each bindable alone, and
 * `stacked` where nothing pads them apart, so that one dispatch of stacked products
 * (lib/matmul_block.wgsl) can write or read all three through `all`.
 */
interface Qkv {
  all: GPUBuffer;
  q: GPUBufferBinding; k: GPUBufferBinding; v: GPUBufferBinding;
  stacked: boolean;
}

interface LayerActs {
  resIn: GPUBuffer; // the residual stream entering the block
  ln1: GPUBuffer; ln1Mean: GPUBuffer; ln1Rstd: GPUBuffer;
  qkv: Qkv;
  att: GPUBuffer; lse: GPUBuffer;
  resMid: GPUBuffer; // after attention
  ln2: GPUBuffer; ln2Mean: GPUBuffer; ln2Rstd: GPUBuffer;
  fc: GPUBuffer; gelu: GPUBuffer;
}

/** The gradients of the activations (one layer's at a time) and the split reductions' partials. */
interface GradActs {
  res: GPUBuffer; ln: GPUBuffer; att: GPUBuffer; qkv: Qkv; delta: GPUBuffer;
  gelu: GPUBuffer; fc: GPUBuffer; logits: GPUBuffer; partials: GPUBuffer;
}

/** Activations (and, for training, gradient scratch) of one batch shape. */
export class Graph {
  readonly tokens: GPUBuffer;
  readonly targets: GPUBuffer;
  readonly logits: GPUBuffer;
  readonly loss: GPUBuffer;
  private readonly layers: LayerActs[] = [];
  private readonly resOut: GPUBuffer;
  private readonly lnf: GPUBuffer;
  private readonly lnfMean: GPUBuffer;
  private readonly lnfRstd: GPUBuffer;
  private readonly scratch: GPUBuffer; // projection outputs before the residual add
  private readonly losses: GPUBuffer;
  private readonly lse: GPUBuffer;
  private readonly owned: GPUBuffer[] = [];
  private grad: GradActs | null = null;
  /**
   * Decoding's state (sample.wgsl): [position, token] for decode.wgsl, then the tokens drawn, the
   * first one's counter and the logits row sample_token reads; null for training.
   */
  readonly at: GPUBuffer | null = null;
  /** The tokens sample_token picked since the host zeroed at[2] (block_size + 1 at the most). */
  readonly drawn: GPUBuffer | null = null;
  /** A decoding step's q, k and v, each at a bindable offset (qkvRow floats apart), before attention_decode appends k and v. */
  private readonly qkv: GPUBuffer | null = null;
  /** Fine-tuning: no gradient of the parameters is computed, only what reaches the adapter's. */
  private readonly frozen: boolean;
  /** Training with an adapter: s u of each adapted projection (by its prefix), which its backward reads. */
  private readonly kept = new Map<string, GPUBuffer>();
  /** With an adapter, [rows, rank] scratch: u (or dy Bᵀ in the backward), and s u where not kept (or e). */
  private readonly loraU: GPUBuffer | null = null;
  private readonly loraE: GPUBuffer | null = null;

  constructor(
    private readonly device: GPUDevice,
    private readonly kernels: KernelTable,
    private readonly model: ModelConfig,
    private readonly layout: GpuLayout,
    private readonly p: ParamBuffers,
    readonly B: number,
    training: boolean,
  ) {
    const { n_layer: L, n_embd: C, n_head: H, block_size: T, vocab_size: V } = model;
    const BT = B * T;
    if (BT > 65535) throw new Error(`batch ${B} x block ${T} = ${BT} rows exceeds the 65535 rows one dispatch can cover`);
    // The activations and their gradients, as the table's kernels read and write them.
    const sizes = new Set(Object.values(kernels).map((k) => k.elementBytes));
    if (sizes.size !== 1) throw new Error(`the kernel table mixes element sizes (${[...sizes].join(", ")} bytes): its kernels share the activation buffers`);
    const [elementBytes] = sizes;
    const buf = (label: string, elements: number) => this.alloc(label, elements, elementBytes);
    this.frozen = p.adapter !== null;
    this.tokens = this.alloc("tokens", BT, U32);
    this.targets = this.alloc("targets", BT, U32);
    for (let l = 0; l < L; l++) {
      this.layers.push({
        resIn: buf(`res${l}`, BT * C),
        ln1: buf(`ln1.${l}`, BT * C), ln1Mean: buf(`ln1mean.${l}`, BT), ln1Rstd: buf(`ln1rstd.${l}`, BT),
        qkv: this.qkvBuffers(`qkv.${l}`, BT * C, elementBytes),
        att: buf(`att.${l}`, BT * C), lse: buf(`attlse.${l}`, B * H * T),
        resMid: buf(`resmid.${l}`, BT * C),
        ln2: buf(`ln2.${l}`, BT * C), ln2Mean: buf(`ln2mean.${l}`, BT), ln2Rstd: buf(`ln2rstd.${l}`, BT),
        fc: buf(`fc.${l}`, BT * 4 * C), gelu: buf(`gelu.${l}`, BT * 4 * C),
      });
    }
    this.resOut = buf("res_out", BT * C);
    this.lnf = buf("lnf", BT * C);
    this.lnfMean = buf("lnfmean", BT);
    this.lnfRstd = buf("lnfrstd", BT);
    this.scratch = buf("proj", BT * C);
    this.logits = buf("logits", BT * V);
    this.losses = buf("losses", BT);
    this.lse = buf("lse", BT);
    this.loss = this.alloc("loss", 4, F32); // the backend reads it back as f32
    if (training) {
      this.grad = {
        res: buf("dres", BT * C), ln: buf("dln", BT * C), att: buf("datt", BT * C),
        qkv: this.qkvBuffers("dqkv", BT * C, elementBytes), delta: buf("delta", B * H * T),
        gelu: buf("dgelu", BT * 4 * C), fc: buf("dfc", BT * 4 * C), logits: buf("dlogits", BT * V),
        partials: this.alloc("split partials", this.partialFloats(), F32),
      };
    } else {
      this.at = this.alloc("decode state", 5, U32);
      this.drawn = this.alloc("drawn tokens", T + 1, U32);
      this.qkv = buf("decode q, k, v", 3 * this.qkvRow());
    }
    if (p.adapter) {
      const R = p.adapter.settings.rank;
      [this.loraU, this.loraE] = [buf("lora u", BT * R), buf("lora e", BT * R)];
      for (const t of training ? p.adapter.layout.tensors : []) {
        if (t.name.endsWith(".lora_a")) this.kept.set(t.name.replace(/\.lora_a$/, ""), buf(`lora s u ${t.name}`, BT * R));
      }
    }
  }

  /** A Qkv of `elements` each, each starting on a bindable offset. */
  private qkvBuffers(label: string, elements: number, elementBytes: number): Qkv {
    const align = this.device.limits.minStorageBufferOffsetAlignment;
    const stride = Math.ceil((elements * elementBytes) / align) * align;
    const all = this.alloc(label, (2 * stride) / elementBytes + elements, elementBytes);
    const [q, k, v] = [0, 1, 2].map((i) => ({ buffer: all, offset: i * stride, size: elements * elementBytes }));
    return { all, q, k, v, stacked: stride === elements * elementBytes };
  }

  /** Floats from one of a decoding step's q, k and v to the next: n_embd, padded to a bindable offset. */
  private qkvRow(): number {
    const align = this.device.limits.minStorageBufferOffsetAlignment / F32;
    return Math.ceil(this.model.n_embd / align) * align;
  }

  /** Runs `op` of this graph's table cuts its reduction into (splitsFor). */
  private splits(op: Op, sizes: Sizes, run: number, outputs: number): number {
    return splitsFor(this.kernels[op], sizes, run, outputs);
  }

  /** Runs K is cut into for C[M,N] = Aᵀ·B (a weight gradient), of `products` stacked ones. */
  private kSplits(op: Op, M: number, N: number, K: number, products = 1): number {
    return this.splits(op, { M, N, K, flags: 0, products }, K, products * M * N);
  }

  /** Runs the rows are cut into for the column sums of [rows, N] (a bias gradient), of `products` stacked ones. */
  private colsumSplits(rows: number, N: number, products = 1): number {
    return this.splits(colsumOp(N), { M: rows, N, K: 0, flags: 0, products }, rows, N);
  }

  /** Runs the rows are cut into for LayerNorm's parameter gradients. */
  private layernormSplits(rows: number, C: number): number {
    return this.splits("layernorm_backward_params", { rows, C }, rows, C);
  }

  /**
   * Runs the positions are cut into for the token embedding's gradient: its grid (a workgroup per
   * token and 64 columns) fills the GPU, but each workgroup scans every position for its token,
   * so the runs are cut by length alone.
   */
  private wteSplits(rows: number): number {
    return this.kernels.embedding_backward_wte.split ? Math.max(1, Math.min(MAX_SPLITS, Math.floor(rows / MIN_RUN))) : 1;
  }

  /** The largest partials buffer a split reduction needs in this graph. */
  private partialFloats(): number {
    const { n_embd: C, vocab_size: V, block_size: T } = this.model;
    const rows = this.B * T;
    const weightPartials = (M: number, N: number, P: number) => this.kSplits(weightGradOp(this.kernels, M, N, rows), M, N, rows, P) * P * M * N;
    // A frozen base's gradients are not computed: only the adapter's tensors', [in, rank] and [rank, out].
    if (this.p.adapter) return Math.max(16, ...this.p.adapter.layout.tensors.map((t) => weightPartials(t.shape[0], t.shape[1], 1)));
    const weights = [[C, C, 3], [C, C, 1], [C, 4 * C, 1], [4 * C, C, 1], [V, C, 1]].map(([M, N, P]) => weightPartials(M, N, P));
    const biases = [[C, 1], [4 * C, 1], [C, 3]].map(([N, P]) => this.colsumSplits(rows, N, P) * P * N);
    const S = this.layernormSplits(rows, C);
    return Math.max(16, ...weights, ...biases, this.lnBiasOffset(S) / F32 + S * C, this.wteSplits(rows) * V * C);
  }

  /** Where LayerNorm's bias partials start, after its weight partials, at a bindable offset (bytes). */
  private lnBiasOffset(S: number): number {
    const align = this.device.limits.minStorageBufferOffsetAlignment;
    return Math.ceil((S * this.model.n_embd * F32) / align) * align;
  }

  private partials(floats: number, offset = 0): GPUBufferBinding {
    return { buffer: this.grad!.partials, offset, size: floats * F32 };
  }

  /** Bytes of every buffer this graph allocated. */
  get bytes(): number {
    return this.owned.reduce((n, b) => n + b.size, 0);
  }

  private alloc(label: string, elements: number, elementBytes: number): GPUBuffer {
    const bytes = elements * elementBytes;
    const limit = this.device.limits.maxStorageBufferBindingSize;
    if (bytes > limit) throw new Error(`the ${label} activations need ${(bytes / 2 ** 20).toFixed(0)} MiB, more than this GPU binds at once (${(limit / 2 ** 20).toFixed(0)} MiB): use a smaller batch or model`);
    const b = this.device.createBuffer({ label, size: Math.max(16, Math.ceil(bytes / 16) * 16), usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST });
    this.owned.push(b);
    return b;
  }

  /** Whether tensors `names` lie one after another in the layout, as stacked products take them. */
  private adjacent(names: string[]): boolean {
    const ts = names.map((n) => this.layout.byName.get(n)!);
    return ts.slice(1).every((t, i) => t.gpuOffset === ts[i].gpuOffset + ts[i].size);
  }

  /** The floats [offset, offset + size) of tensor `names`, or of adjacent ones. */
  private span(names: string | string[]): { offset: number; size: number } {
    const list = typeof names === "string" ? [names] : names;
    if (!this.adjacent(list)) throw new Error(`${list.join(", ")} are not adjacent in the parameter layout`);
    const ts = list.map((n) => this.layout.byName.get(n)!);
    return { offset: ts[0].gpuOffset, size: ts.reduce((n, t) => n + t.size, 0) };
  }

  private w(names: string | string[]): GPUBufferBinding {
    const t = this.span(names);
    return { buffer: this.p.params, offset: t.offset * F32, size: t.size * F32 };
  }

  /** Where weight `names` lies: an adapter tensor in the adapter's buffers, else in the parameters' ones. */
  private weightSpan(names: string | string[]): { offset: number; size: number; f32: GPUBuffer; halves: GPUBuffer | null } {
    const lora = typeof names === "string" ? this.p.adapter?.layout.byName.get(names) : undefined;
    if (lora) return { offset: lora.gpuOffset, size: lora.size, f32: this.p.adapter!.params, halves: this.p.adapter!.mirror };
    return { ...this.span(names), f32: this.p.params, halves: this.p.mirror };
  }

  /**
   * The weight `name` (a parameter or an adapter tensor) as `r`'s op reads it: its f32 slice or its
   * halves in the mirror (2 bytes each, in whole vec2<u32>s) at binding 2, or its int8 block at binding 5.
   */
  private weight(r: Recorder, op: Op, name: string | string[]): Record<number, Binding> {
    const kernel = r.kernels[op];
    if (kernel.weightsInt8) {
      if (typeof name !== "string") throw new Error(`${op} reads one int8 weight, not ${name.join(", ")}`);
      return { 5: int8Binding(this.p.int8!.buffer, this.p.int8!.layout, name) };
    }
    const t = this.weightSpan(name);
    if (!kernel.weightsFromMirror) return { 2: { buffer: t.f32, offset: t.offset * F32, size: t.size * F32 } };
    return { 2: { buffer: t.halves!, offset: t.offset * 2, size: Math.ceil(t.size / 4) * 8 } };
  }

  /** A matmul whose B (binding 2) is the weight `weight` (or stacked weights); nn and nt, the orientations that take one. */
  private mm(r: Recorder, o: "nn" | "nt", sizes: { M: number; N: number; K: number; flags: number; products?: number }, weight: string | string[], bindings: Record<number, Binding>): void {
    const op = matmulOp(o, sizes.M, sizes.N, sizes.K);
    r.op(op, { ...ONE_PRODUCT, ...sizes }, { ...bindings, ...this.weight(r, op, weight) });
  }

  private g(names: string | string[]): GPUBufferBinding {
    const t = this.span(names);
    return { buffer: this.p.grads, offset: t.offset * F32, size: t.size * F32 };
  }

  /** The adapter tensor `t`'s slice of the gradients (fine-tuning, they are the adapter's). */
  private adapterGrad(t: Site["a"]): GPUBufferBinding {
    return { buffer: this.p.grads, offset: t.gpuOffset * F32, size: t.size * F32 };
  }

  /**
   * out[M,N] = x[M,K]·W + b, and with `adapted` the adapter's term where it adapts `prefix`; every
   * linear helper takes its sizes by name, as the matmul's M, N, K.
   */
  private linear(r: Recorder, x: Binding, prefix: string, out: Binding, { M, N, K }: MNK, adapted = false): void {
    this.mm(r, "nn", { M, N, K, flags: BIAS }, `${prefix}.weight`, { 1: x, 3: this.w(`${prefix}.bias`), 4: out });
    if (adapted) this.adapt(r, prefix, x, out, M);
  }

  /** The adapter's tensors on projection `prefix`, or null where it has none there. */
  private site(prefix: string): Site | null {
    const byName = this.p.adapter?.layout.byName;
    const [a, b] = [byName?.get(`${prefix}.lora_a`), byName?.get(`${prefix}.lora_b`)];
    return a && b ? { a, b, K: a.shape[0], N: b.shape[1] } : null;
  }

  /** out = s·x for x and out of n elements: the product of the 1x1 matrix [s] and x as [1, n] (plain f32 in every table: no lever replaces the scalar matmul_tn). */
  private scaled(r: Recorder, x: Binding, out: Binding, n: number, flags: number): void {
    const scale = this.p.adapter!.scale;
    r.op(matmulOp("tn", 1, n, 1), { M: 1, N: n, K: 1, flags }, { 1: scale, 2: x, 3: scale, 4: out });
  }

  /** out[rows, N] += s (x A) B of the adapter on `prefix`, if any; s x A is kept for the backward where training. */
  private adapt(r: Recorder, prefix: string, x: Binding, out: Binding, rows: number): void {
    const site = this.site(prefix);
    if (!site) return;
    const R = this.p.adapter!.settings.rank;
    const su = this.kept.get(prefix) ?? this.loraE!;
    this.mm(r, "nn", { M: rows, N: R, K: site.K, flags: 0 }, site.a.name, { 1: x, 3: x, 4: this.loraU! });
    this.scaled(r, this.loraU!, su, rows * R, 0);
    this.mm(r, "nn", { M: rows, N: site.N, K: R, flags: ACCUMULATE }, site.b.name, { 1: su, 3: su, 4: out });
  }

  /** The backward of the adapter on `prefix`, if any, from its projection's x and dy: its tensors' gradients, and e·Aᵀ added to dx where given. */
  private adaptBackward(r: Recorder, prefix: string, x: Binding, dy: Binding, dx: Binding | null, rows: number): void {
    const site = this.site(prefix);
    if (!site) return;
    const R = this.p.adapter!.settings.rank;
    const [dyB, e] = [this.loraU!, this.loraE!];
    this.weightGrad(r, this.kept.get(prefix)!, dy, this.adapterGrad(site.b), { M: R, N: site.N, K: rows }, GRAD_B);
    this.mm(r, "nt", { M: rows, N: R, K: site.N, flags: GRAD_A }, site.b.name, { 1: dy, 3: dy, 4: dyB });
    this.scaled(r, dyB, e, rows * R, GRAD_B);
    this.weightGrad(r, x, e, this.adapterGrad(site.a), { M: site.K, N: R, K: rows }, GRAD_B);
    if (dx) this.mm(r, "nt", { M: rows, N: site.K, K: R, flags: GRAD_A | ACCUMULATE }, site.a.name, { 1: e, 3: e, 4: dx });
  }

  /** dW = xᵀ·dy, db = column sums of dy (not of a frozen base); dx = dy·Wᵀ (added to dx with `accumulate`); then the adapter's part, if any. */
  private linearBackward(r: Recorder, x: Binding, dy: Binding, prefix: string, dx: Binding | null, { M, N, K }: MNK, accumulate = false): void {
    if (!this.frozen) {
      this.weightGrad(r, x, dy, this.g(`${prefix}.weight`), { M: K, N, K: M }, GRAD_B);
      this.columnSums(r, dy, M, N, this.g(`${prefix}.bias`));
    }
    if (dx) this.mm(r, "nt", { M, N: K, K: N, flags: GRAD_A | (accumulate ? ACCUMULATE : 0) }, `${prefix}.weight`, { 1: dy, 3: dy, 4: dx });
    this.adaptBackward(r, prefix, x, dy, dx, M);
  }

  /**
   * linearBackward of q, k and v from their gradients `dy`, dx (where given) overwritten by q's
   * part and added to by k's and v's: their weight gradients as stacked products where dy and the
   * weights allow.
   */
  private qkvBackward(r: Recorder, x: Binding, dy: Qkv, pre: string, dx: Binding | null, { M, N, K }: MNK): void {
    const { prefixes, weights, biases } = this.qkvProj(pre);
    const dys = [dy.q, dy.k, dy.v];
    if (this.frozen || !dx || !dy.stacked || !this.adjacent(weights)) {
      prefixes.forEach((prefix, i) => this.linearBackward(r, x, dys[i], prefix, dx, { M, N, K }, i > 0));
      return;
    }
    this.weightGrad(r, x, dy.all, this.g(weights), { M: K, N, K: M }, GRAD_B, 3);
    if (this.adjacent(biases)) this.columnSums(r, dy.all, M, N, this.g(biases), 3);
    else prefixes.forEach((prefix, i) => this.columnSums(r, dys[i], M, N, this.g(`${prefix}.bias`)));
    prefixes.forEach((prefix, i) => {
      this.mm(r, "nt", { M, N: K, K: N, flags: GRAD_A | (i > 0 ? ACCUMULATE : 0) }, `${prefix}.weight`, { 1: dys[i], 3: dys[i], 4: dx });
    });
  }

  /**
   * out[M,N] = aᵀ·b over K rows (or `products` of them, stacked: b's and out's one after another),
   * split along K when the grid alone is too small; `grad` says which operand is a gradient (GRAD_A
   * or GRAD_B).
   */
  private weightGrad(r: Recorder, a: Binding, b: Binding, out: Binding, { M, N, K }: MNK, grad: number, products = 1): void {
    const op = weightGradOp(this.kernels, M, N, K);
    const S = this.kSplits(op, M, N, K, products);
    if (S === 1) {
      r.op(op, { M, N, K, flags: grad, products }, { 1: a, 2: b, 3: a, 4: out });
      return;
    }
    const partials = this.partials(S * products * M * N);
    r.op(op, { M, N, K, flags: grad, splits: S, products }, { 1: a, 2: b, 3: a, 4: partials });
    r.op(colsumOp(products * M * N), { M: S, N: products * M * N, K: 0, flags: 0 }, { 1: partials, 4: out });
  }

  /**
   * Bias gradient: the column sums of dy [rows, N] (or of `products` such stacked, into as many
   * adjacent biases), split along the rows when there are many.
   */
  private columnSums(r: Recorder, dy: Binding, rows: number, N: number, out: Binding, products = 1): void {
    const S = this.colsumSplits(rows, N, products);
    if (S === 1) {
      r.op(colsumOp(N), { M: rows, N, K: 0, flags: 0, products }, { 1: dy, 4: out });
      return;
    }
    const partials = this.partials(products * S * N);
    r.op(colsumOp(N), { M: rows, N, K: 0, flags: 0, splits: S, products }, { 1: dy, 4: partials });
    r.op(colsumOp(N), { M: S, N, K: 0, flags: 0, products }, { 1: partials, 4: out });
  }

  /** LayerNorm of x, or with `sumOf`, of x = sumOf[0] + sumOf[1] written to x on the way: the residual stream's add. */
  private layernorm(r: Recorder, x: GPUBuffer, prefix: string, out: GPUBuffer, mean: GPUBuffer, rstd: GPUBuffer, rows = this.B * this.model.block_size, sumOf: [GPUBuffer, GPUBuffer] | null = null): void {
    const sizes = { rows, C: this.model.n_embd, eps: EPS, flags: 0 };
    const bindings = { 2: this.w(`${prefix}.weight`), 3: this.w(`${prefix}.bias`), 4: out, 5: mean, 6: rstd };
    if (sumOf) r.op("layernorm_forward_residual", sizes, { ...bindings, 1: sumOf[0], 11: sumOf[1], 12: x });
    else r.op("layernorm_forward", sizes, { ...bindings, 1: x });
  }

  private layernormBackward(r: Recorder, x: GPUBuffer, prefix: string, mean: GPUBuffer, rstd: GPUBuffer, dout: GPUBuffer, dx: GPUBuffer, accumulate: boolean): void {
    const sizes = { rows: this.B * this.model.block_size, C: this.model.n_embd, eps: EPS, flags: accumulate ? ACCUMULATE : 0 };
    if (!this.frozen) this.layernormParamGrads(r, x, prefix, mean, rstd, dout, sizes);
    r.op("layernorm_backward_dx", sizes, { 1: x, 2: this.w(`${prefix}.weight`), 5: mean, 6: rstd, 7: dout, 8: dx });
  }

  private layernormParamGrads(r: Recorder, x: GPUBuffer, prefix: string, mean: GPUBuffer, rstd: GPUBuffer, dout: GPUBuffer, sizes: Sizes): void {
    const S = this.layernormSplits(sizes.rows, sizes.C);
    const [dw, db] = [this.g(`${prefix}.weight`), this.g(`${prefix}.bias`)];
    if (S === 1) {
      r.op("layernorm_backward_params", sizes, { 1: x, 5: mean, 6: rstd, 7: dout, 9: dw, 10: db });
    } else {
      const pw = this.partials(S * sizes.C);
      const pb = this.partials(S * sizes.C, this.lnBiasOffset(S));
      r.op("layernorm_backward_params", { ...sizes, splits: S }, { 1: x, 5: mean, 6: rstd, 7: dout, 9: pw, 10: pb });
      const both = [`${prefix}.weight`, `${prefix}.bias`];
      // Both partials' sums in one dispatch where they lie one after the other, as do the gradients.
      if (this.lnBiasOffset(S) === S * sizes.C * F32 && this.adjacent(both)) {
        r.op(colsumOp(sizes.C), { M: S, N: sizes.C, K: 0, flags: 0, products: 2 }, { 1: this.partials(2 * S * sizes.C), 4: this.g(both) });
      } else {
        r.op(colsumOp(sizes.C), { M: S, N: sizes.C, K: 0, flags: 0 }, { 1: pw, 4: dw });
        r.op(colsumOp(sizes.C), { M: S, N: sizes.C, K: 0, flags: 0 }, { 1: pb, 4: db });
      }
    }
  }

  /** Block `pre`'s q, k and v projections: their prefixes, and their weights' and biases' names. */
  private qkvProj(pre: string): { prefixes: string[]; weights: string[]; biases: string[] } {
    const prefixes = ["q", "k", "v"].map((x) => `${pre}.attn.${x}_proj`);
    return { prefixes, weights: prefixes.map((p) => `${p}.weight`), biases: prefixes.map((p) => `${p}.bias`) };
  }

  /** Tokens -> logits for every position, with the adapter's terms where `adapted`. */
  forward(r: Recorder, adapted = false): void {
    const { n_layer: L, n_embd: C, n_head, block_size: T, vocab_size: V } = this.model;
    const B = this.B;
    const BT = B * T;
    const first = this.layers[0]?.resIn ?? this.resOut;
    r.op("embedding_forward", { B, T, C, V, flags: 0 }, { 1: this.tokens, 2: this.w("token_embedding.weight"), 3: this.w("position_embedding.weight"), 4: first });
    // Each residual add is the LayerNorm's after it (layernorm_forward_residual): the add closing
    // attention is ln2's, the one closing the MLP (its output in scratch) the next ln1's or ln_final's.
    const closing = (l: number): [GPUBuffer, GPUBuffer] | null => (l > 0 ? [this.layers[l - 1].resMid, this.scratch] : null);
    for (let l = 0; l < L; l++) {
      const a = this.layers[l];
      const pre = `blocks.${l}`;
      this.layernorm(r, a.resIn, `${pre}.ln1`, a.ln1, a.ln1Mean, a.ln1Rstd, BT, closing(l));
      const qkv = this.qkvProj(pre);
      if (a.qkv.stacked && this.adjacent(qkv.weights) && this.adjacent(qkv.biases)) {
        this.mm(r, "nn", { M: BT, N: C, K: C, flags: BIAS, products: 3 }, qkv.weights, { 1: a.ln1, 3: this.w(qkv.biases), 4: a.qkv.all });
      } else {
        qkv.prefixes.forEach((prefix, i) => this.linear(r, a.ln1, prefix, [a.qkv.q, a.qkv.k, a.qkv.v][i], { M: BT, K: C, N: C }));
      }
      if (adapted) qkv.prefixes.forEach((prefix, i) => this.adapt(r, prefix, a.ln1, [a.qkv.q, a.qkv.k, a.qkv.v][i], BT));
      r.op(attentionOp(this.kernels, "attention_forward", C / n_head), { B, T, C, n_head }, { 1: a.qkv.q, 2: a.qkv.k, 3: a.qkv.v, 4: a.att, 5: a.lse });
      this.linear(r, a.att, `${pre}.attn.o_proj`, this.scratch, { M: BT, K: C, N: C }, adapted);
      this.layernorm(r, a.resMid, `${pre}.ln2`, a.ln2, a.ln2Mean, a.ln2Rstd, BT, [a.resIn, this.scratch]);
      this.linear(r, a.ln2, `${pre}.mlp.fc_in`, a.fc, { M: BT, K: C, N: 4 * C }, adapted);
      r.op(elementwiseOp("gelu_forward", BT * 4 * C), { n: BT * 4 * C }, { 1: a.fc, 2: a.gelu });
      this.linear(r, a.gelu, `${pre}.mlp.fc_out`, this.scratch, { M: BT, K: 4 * C, N: C }, adapted);
    }
    this.layernorm(r, this.resOut, "ln_final", this.lnf, this.lnfMean, this.lnfRstd, BT, closing(L));
    this.mm(r, "nt", { M: BT, N: V, K: C, flags: 0 }, "token_embedding.weight", { 1: this.lnf, 3: this.lnf, 4: this.logits });
  }

  /**
   * The token in `at` at its position, against the keys and values forward left in this graph's
   * k and v (the KV cache), to which it adds its own: its logits into row 0 of `logits`. Every
   * other activation's row 0 is scratch here. The residual stream stays in one row that o_proj
   * and fc_out add into (ACCUMULATE), which saves a decode the residual adds' dispatches: for
   * one row, what a dispatch costs to encode and launch is most of its cost. With `adapted`, the
   * adapter's terms too: a product it adapts runs unfused from its LayerNorm, whose output it reads.
   */
  decode(r: Recorder, adapted = false): void {
    const { n_layer: L, n_embd: C, n_head, vocab_size: V } = this.model;
    const row = { M: 1, K: C, N: C };
    const x = this.layers[0]?.resIn ?? this.resOut;
    const addInto = (input: Binding, prefix: string, K: number) => {
      this.mm(r, "nn", { M: 1, N: C, K, flags: BIAS | ACCUMULATE }, `${prefix}.weight`, { 1: input, 3: this.w(`${prefix}.bias`), 4: x });
      if (adapted) this.adapt(r, prefix, input, x, 1);
    };
    const adapts = (...prefixes: string[]) => adapted && prefixes.some((prefix) => this.site(prefix));
    const Q = this.qkvRow();
    const [q, k, v] = [0, 1, 2].map((i): GPUBufferBinding => ({ buffer: this.qkv!, offset: i * Q * F32, size: C * F32 }));
    // A row's LayerNorm in the product that takes it (matvec_*_ln), where the row fits its workgroup.
    const normed = matmulOp("nn", 1, C, C) === "matvec_nn" && C <= r.kernels.matvec_nn_ln.constants.MAX_K;
    const ln = (name: string) => ({ 6: this.w(`${name}.weight`), 7: this.w(`${name}.bias`) });
    r.op("embedding_decode", { C, n_head }, { 6: x, 7: this.at!, 8: this.w("token_embedding.weight"), 9: this.w("position_embedding.weight") });
    for (let l = 0; l < L; l++) {
      const a = this.layers[l];
      const pre = `blocks.${l}`;
      const { prefixes } = this.qkvProj(pre);
      const qkv = normed && !adapts(...prefixes) && this.qkvAtEqualStrides(r, pre);
      if (qkv) {
        r.op("matvec_nn_ln", { ...row, flags: BIAS, eps: EPS, ...qkv.strides }, { 1: x, ...qkv.weights, 3: qkv.biases, 4: this.qkv!, ...ln(`${pre}.ln1`) });
      } else {
        this.layernorm(r, x, `${pre}.ln1`, a.ln1, a.ln1Mean, a.ln1Rstd, 1);
        prefixes.forEach((prefix, i) => this.linear(r, a.ln1, prefix, [q, k, v][i], row, adapted));
      }
      r.op("attention_decode", { C, n_head }, { 1: q, 2: k, 3: v, 4: a.qkv.k, 5: a.qkv.v, 6: a.att, 7: this.at! });
      addInto(a.att, `${pre}.attn.o_proj`, C);
      if (normed && !adapts(`${pre}.mlp.fc_in`)) {
        r.op("matvec_nn_ln_gelu", { ...ONE_PRODUCT, M: 1, K: C, N: 4 * C, flags: BIAS, eps: EPS }, { 1: x, ...this.weight(r, "matvec_nn_ln_gelu", `${pre}.mlp.fc_in.weight`), 3: this.w(`${pre}.mlp.fc_in.bias`), 4: a.gelu, ...ln(`${pre}.ln2`) });
      } else {
        this.layernorm(r, x, `${pre}.ln2`, a.ln2, a.ln2Mean, a.ln2Rstd, 1);
        this.linear(r, a.ln2, `${pre}.mlp.fc_in`, a.fc, { M: 1, K: C, N: 4 * C }, adapted);
        r.op("gelu_forward", { n: 4 * C }, { 1: a.fc, 2: a.gelu });
      }
      addInto(a.gelu, `${pre}.mlp.fc_out`, 4 * C);
    }
    if (normed) {
      r.op("matvec_nt_ln", { ...ONE_PRODUCT, M: 1, N: V, K: C, flags: 0, eps: EPS }, { 1: x, ...this.weight(r, "matvec_nt_ln", "token_embedding.weight"), 3: x, 4: this.logits, ...ln("ln_final") });
    } else {
      this.layernorm(r, x, "ln_final", this.lnf, this.lnfMean, this.lnfRstd, 1);
      this.mm(r, "nt", { M: 1, N: V, K: C, flags: 0 }, "token_embedding.weight", { 1: this.lnf, 3: this.lnf, 4: this.logits });
    }
  }

  /**
   * Block `pre`'s q, k and v projections as one matvec_nn_ln of three products: bindings that span
   * their weights and their biases, which gpuLayout puts one after another at equal strides, and
   * the strides (vec4s) in them and in `qkv`; null where the strides differ. Where `r`'s kernel reads
   * int8 weights, their blocks, which int8.ts lays out at equal strides (words).
   */
  private qkvAtEqualStrides(r: Recorder, pre: string): { weights: Record<number, Binding>; biases: GPUBufferBinding; strides: Sizes } | null {
    const { weights, biases } = this.qkvProj(pre);
    const span = (names: string[]) => {
      const [q, k, v] = names.map((n) => this.layout.byName.get(n)!);
      const stride = k.gpuOffset - q.gpuOffset;
      if (v.gpuOffset - k.gpuOffset !== stride || stride % 4) return null;
      return { binding: { buffer: this.p.params, offset: q.gpuOffset * F32, size: (2 * stride + v.size) * F32 }, stride: stride / 4 };
    };
    const [w, b] = [span(weights), span(biases)];
    if (!w || !b) return null;
    const strides = { products: 3, b_stride: w.stride, bias_stride: b.stride, c_stride: this.qkvRow() / 4 };
    if (!r.kernels.matvec_nn_ln.weightsInt8) return { weights: { 2: w.binding }, biases: b.binding, strides };
    const q8 = int8Span(this.p.int8!.buffer, this.p.int8!.layout, weights);
    return { weights: { 5: q8.binding }, biases: b.binding, strides: { ...strides, b_stride: q8.stride } };
  }

  /** The next token from the logits row at[4] into at and drawn (sample.wgsl), by the draw in `sizes`. */
  sample(r: Recorder, sizes: { temperature: number; top_k: number; top_p: number; seed: number }): number {
    return r.op("sample_token", { V: this.model.vocab_size, ...sizes }, { 1: this.logits, 2: this.at!, 3: this.drawn! });
  }

  /** Per-position cross-entropy and its mean into `loss`. */
  lossForward(r: Recorder): void {
    const rows = this.B * this.model.block_size;
    const V = this.model.vocab_size;
    r.op("crossentropy_forward", { rows, V }, { 1: this.logits, 2: this.targets, 3: this.losses, 4: this.lse });
    r.op("crossentropy_mean", { rows, V }, { 7: this.losses, 8: this.loss });
  }

  /**
   * Gradients of the mean loss for every parameter, into the grads buffer; fine-tuning, for the
   * adapter's tensors alone, with its terms in the forward.
   */
  backward(r: Recorder): void {
    const d = this.grad!;
    const { n_layer: L, n_embd: C, n_head, block_size: T, vocab_size: V } = this.model;
    const B = this.B;
    const BT = B * T;
    r.op("crossentropy_backward", { rows: BT, V }, { 1: this.logits, 2: this.targets, 5: this.lse, 6: d.logits });
    // Tied head: logits = lnf·wteᵀ, so dwte = dlogitsᵀ·lnf (the embedding adds its part below).
    if (!this.frozen) this.weightGrad(r, d.logits, this.lnf, this.g("token_embedding.weight"), { M: V, N: C, K: BT }, GRAD_A);
    this.mm(r, "nn", { M: BT, N: C, K: V, flags: GRAD_A }, "token_embedding.weight", { 1: d.logits, 3: d.logits, 4: d.ln });
    this.layernormBackward(r, this.resOut, "ln_final", this.lnfMean, this.lnfRstd, d.ln, d.res, false);
    for (let l = L - 1; l >= 0; l--) {
      const a = this.layers[l];
      const pre = `blocks.${l}`;
      this.linearBackward(r, a.gelu, d.res, `${pre}.mlp.fc_out`, d.gelu, { M: BT, K: 4 * C, N: C });
      r.op(elementwiseOp("gelu_backward", BT * 4 * C), { n: BT * 4 * C }, { 1: a.fc, 3: d.gelu, 4: d.fc });
      this.linearBackward(r, a.ln2, d.fc, `${pre}.mlp.fc_in`, d.ln, { M: BT, K: C, N: 4 * C });
      this.layernormBackward(r, a.resMid, `${pre}.ln2`, a.ln2Mean, a.ln2Rstd, d.ln, d.res, true);
      this.linearBackward(r, a.att, d.res, `${pre}.attn.o_proj`, d.att, { M: BT, K: C, N: C });
      const sizes = { B, T, C, n_head };
      r.op("attention_backward_delta", sizes, { 6: d.att, 11: a.att, 7: d.delta });
      r.op(attentionOp(this.kernels, "attention_backward_dq", C / n_head), sizes, { 1: a.qkv.q, 2: a.qkv.k, 3: a.qkv.v, 6: d.att, 12: a.lse, 13: d.delta, 8: d.qkv.q });
      r.op(attentionOp(this.kernels, "attention_backward_dkdv", C / n_head), sizes, { 1: a.qkv.q, 2: a.qkv.k, 3: a.qkv.v, 6: d.att, 12: a.lse, 13: d.delta, 9: d.qkv.k, 10: d.qkv.v });
      // Fine-tuning, the lowest block's input gradient would reach only the frozen embeddings.
      const below = !this.frozen || l > 0;
      this.qkvBackward(r, a.ln1, d.qkv, pre, below ? d.ln : null, { M: BT, K: C, N: C });
      if (below) this.layernormBackward(r, a.resIn, `${pre}.ln1`, a.ln1Mean, a.ln1Rstd, d.ln, d.res, true);
    }
    if (this.frozen) return;
    const dwte = this.g("token_embedding.weight");
    const S = this.wteSplits(BT);
    if (S === 1) {
      r.op("embedding_backward_wte", { B, T, C, V, flags: ACCUMULATE }, { 1: this.tokens, 5: d.res, 6: dwte });
    } else {
      const partials = this.partials(S * V * C);
      r.op("embedding_backward_wte", { B, T, C, V, flags: 0, splits: S }, { 1: this.tokens, 5: d.res, 6: partials });
      r.op(colsumOp(V * C), { M: S, N: V * C, K: 0, flags: ACCUMULATE }, { 1: partials, 4: dwte });
    }
    r.op("embedding_backward_wpe", { B, T, C, V, flags: 0 }, { 5: d.res, 7: this.g("position_embedding.weight") });
  }

  destroy(): void {
    for (const b of this.owned) b.destroy();
  }
}
