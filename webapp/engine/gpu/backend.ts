// The WebGPU Backend: parameters, gradients, Adam moments and activations stay
// on the GPU; a training step is one command buffer (forward, loss, backward,
// grad norm, clip, AdamW) whose loss is copied to a mappable buffer and read
// asynchronously, so several steps can be in flight.
//
// Made with a lora option, it fine-tunes (graph.ts says how): the parameters are a frozen base
// with no gradients or moments on the GPU, and those buffers are the adapter's, in its own
// layout; a step clips and updates the adapter alone, counting its own steps. Loss, prefill,
// decode and sampleTokens run the plans with or without the adapter's terms, as its switch says.
// It has no int8 decoding path: the adapter's tensors have no int8 copy. Its step runs as
// micro-batches where the whole batch's activations would pass FINE_TUNING_ACTIVATIONS.

import type { AdapterSlot, Backend, Draw, Int8Decoding, ModelConfig, ParamState, TrainConfig } from "../types";
import { type LoraSettings, loraScale } from "../lora";
import { checkModelConfig } from "../model";
import { type GpuContext, DeviceWatch, requestGpu } from "./device";
import { floatToHalf } from "../f16";
import { type FlatLayout, type GpuLayout, adapterGpuLayout, fromGpuOrder, gpuLayout, toGpuOrder } from "./layout";
import { type AdapterBuffers, Graph, type ParamBuffers } from "./graph";
import { type Binding, type Dispatch, Pipelines, Recorder, encode } from "./recorder";
import { ACCUMULATE, type AnyOp, F32_KERNELS, MAX_HEAD_DIM, type KernelTable, matmulOp } from "./kernels";
import { type Int8Layout, int8Layout } from "../quantize";
import { recordInt8Copy } from "./int8";

/** Steps submitted but not yet read back; more would only queue CPU-side work. */
const MAX_IN_FLIGHT = 3;
const PARTIALS_MAX = 1024;
const LOST_GRACE_MS = 2000;
// Decoding steps (a token's dispatches and its draw) encoded into one command buffer by sampleTokens.
const STEPS_PER_SUBMIT = 8;
// The most queries a timestamp query set holds (WebGPU's limit): two a dispatch in profileStep.
const MAX_QUERIES = 4096;
/**
 * The bytes of activations (Graph) a fine-tuning step holds at once. A frozen base saves only its
 * gradients and moments, while a batch's activations grow with it (Huge's batch of 64: 2.7 GiB),
 * so a larger batch runs as micro-batches, the adapter's gradients added up on the GPU: what
 * fine-tuning holds then stays near the base's weights. Full training keeps the whole batch, for speed.
 */
export const FINE_TUNING_ACTIVATIONS = 2 ** 30;

/** profileStep's answer: each dispatch of a training step, in order, with its time. */
export interface StepProfile {
  timing: "gpu" | "host";
  dispatches: { op: string; workgroups: number; ms: number }[];
}

/**
 * Whether the table keeps a packed-half mirror of the parameters (storage-f16): some matmul reads
 * its weights there, which only an AdamW that refreshes it keeps in step with the f32 parameters.
 */
export function usesMirror(kernels: KernelTable): boolean {
  const reads = Object.values(kernels).some((k) => k.weightsFromMirror);
  if (reads && !kernels.adamw.refreshesMirror) throw new Error("the kernel table's matmuls read the weights' packed halves, but its adamw does not refresh them: every step after the first would use stale weights");
  return reads || kernels.adamw.refreshesMirror;
}

/** The parameters' layout for a table on a device of this alignment: the backend's and plan.ts's. */
export function trainingLayout(model: ModelConfig, kernels: KernelTable, alignBytes: number): GpuLayout {
  return gpuLayout(model, alignBytes, usesMirror(kernels));
}

/**
 * Every buffer a backend of this shape holds from its creation (all but the
 * params uniforms and the readback pool): parameters, gradients, Adam moments,
 * the packed-half mirror where the table uses one, both graphs' activations and the gradient norm's scratch;
 * fine-tuning with `lora`, the adapter's tensors (and their mirror) and [s], and the gradients and
 * moments the adapter's, not the frozen parameters'. The backend
 * allocates through it, and plan.ts runs it on a stand-in device that only
 * records sizes, so the figure shown before Start is the backend's own.
 */
export function allocateTraining(device: GPUDevice, kernels: KernelTable, model: ModelConfig, layout: GpuLayout, batch: number, lora?: LoraSettings, activationBudget = FINE_TUNING_ACTIVATIONS) {
  const buffers: GPUBuffer[] = [];
  const buffer = (label: string, size: number, usage: number) => {
    const b = device.createBuffer({ label, size: Math.max(16, Math.ceil(size / 16) * 16), usage });
    buffers.push(b);
    return b;
  };
  const floats = (label: string, n: number) => buffer(label, n * 4, GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST);
  const halves = (label: string, n: number) => (usesMirror(kernels) ? buffer(label, n * 2, GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST) : null);
  const adapterOf = (settings: LoraSettings): AdapterBuffers => {
    const own = adapterGpuLayout(model, settings, device.limits.minStorageBufferOffsetAlignment, usesMirror(kernels));
    return { settings, layout: own, params: floats("adapter", own.total), mirror: halves("adapter as halves", own.total), scale: floats("adapter scale", 1) };
  };
  const adapter = lora ? adapterOf(lora) : null;
  const trained = adapter?.layout.total ?? layout.total;
  const bufs: ParamBuffers = {
    params: floats("parameters", layout.total), mirror: halves("parameters as halves", layout.total),
    grads: floats("gradients", trained), m: floats("adam m", trained), v: floats("adam v", trained), adapter,
  };
  const k = adapter ? microBatches(device, kernels, model, layout, bufs, batch, activationBudget) : 1;
  const copies = GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST;
  // The micro-batches' backward writes the adapter's gradients here; each adds 1/k of them to bufs.grads.
  const micro: MicroBatches | null = k === 1 ? null : {
    k, grads: floats("adapter gradients of a micro-batch", trained), share: floats("1 / micro-batches", 1),
    tokens: buffer("batch tokens", batch * model.block_size * 4, copies), targets: buffer("batch targets", batch * model.block_size * 4, copies),
    losses: buffer("micro-batch losses", k * 4, copies),
  };
  const trainGraph = new Graph(device, kernels, model, layout, micro ? { ...bufs, grads: micro.grads } : bufs, batch / k, true);
  const sampleGraph = new Graph(device, kernels, model, layout, bufs, 1, false);
  const nPartials = Math.min(Math.ceil(trained / 256), PARTIALS_MAX);
  const partials = buffer("grad norm partials", nPartials * 4, GPUBufferUsage.STORAGE);
  const norm = buffer("grad norm", 16, GPUBufferUsage.STORAGE);
  return { buffers, bufs, trained, trainGraph, sampleGraph, nPartials, partials, norm, micro };
}

/** A fine-tuning step cut into k micro-batches, whose tokens and losses wait in these buffers. */
interface MicroBatches {
  k: number;
  grads: GPUBuffer;
  share: GPUBuffer;
  tokens: GPUBuffer;
  targets: GPUBuffer;
  losses: GPUBuffer;
}

/**
 * The micro-batches a fine-tuning step of `batch` sequences runs as: the fewest that divide it and
 * whose training graph's activations fit `budget`, sized by Graph itself on a stand-in device;
 * one sequence each where none does.
 */
function microBatches(device: GPUDevice, kernels: KernelTable, model: ModelConfig, layout: GpuLayout, bufs: ParamBuffers, batch: number, budget: number): number {
  const sizing = {
    limits: { minStorageBufferOffsetAlignment: device.limits.minStorageBufferOffsetAlignment, maxStorageBufferBindingSize: Infinity },
    createBuffer: (d: GPUBufferDescriptor) => ({ size: d.size }),
  } as unknown as GPUDevice;
  for (let k = 1; k < batch; k++) {
    if (batch % k) continue;
    try {
      if (new Graph(sizing, kernels, model, layout, bufs, batch / k, true).bytes <= budget) return k;
    } catch {
      // more rows than one dispatch covers: a smaller micro-batch
    }
  }
  return batch;
}

export interface GpuBackendOptions {
  gpu?: GPU;
  adapter?: GPUAdapter | null;
  /** Replacement kernels: the tables of levers that passed the numerics gate (levers/gpu.ts), or one it is checking. */
  kernels?: Partial<KernelTable>;
  /** Adapter features those kernels need. */
  features?: GPUFeatureName[];
  /** The ids of the levers whose tables `kernels` holds (Backend.paths). */
  levers?: string[];
  /**
   * The int8 sampling lever's kernels (levers/int8): matvec products, which give the backend a
   * second decoding path over an int8 copy of the weights, off until `sampleInt8` is set, and the
   * ops that make that copy from the parameters.
   */
  int8?: Partial<KernelTable>;
  /**
   * A device to share instead of requesting one (a lever's gate, the tests): backends
   * on one device compile each kernel once. The caller destroys it; dispose() does not.
   */
  context?: GpuContext;
  /** Fine-tune an adapter with these settings on a frozen base (Backend.adapter). */
  lora?: LoraSettings;
  /** Fine-tuning, the most bytes of activations a micro-batch may hold (FINE_TUNING_ACTIVATIONS unless given). */
  activationBudget?: number;
}

export async function createGpuBackend(model: ModelConfig, train: TrainConfig, opts: GpuBackendOptions = {}): Promise<GpuBackend> {
  checkModelConfig(model);
  const headDim = model.n_embd / model.n_head;
  if (!(headDim <= MAX_HEAD_DIM)) {
    throw new Error(`model config: the WebGPU backend supports heads up to ${MAX_HEAD_DIM} wide; ${model.n_embd} / ${model.n_head} = ${headDim}. Use more heads.`);
  }
  const ctx = opts.context ?? (await requestGpu(opts.gpu, opts.adapter, opts.features));
  const owned = !opts.context;
  try {
    const table = { ...F32_KERNELS, ...opts.kernels };
    const int8 = opts.int8 && !opts.lora && int8Fits(model, { ...table, ...opts.int8 }) ? new Pipelines({ ...table, ...opts.int8 }) : null;
    const backend = new GpuBackend(ctx, new Pipelines(table), model, train, owned, opts.levers ?? [], int8, opts.lora, opts.activationBudget);
    await backend.ready;
    return backend;
  } catch (e) {
    if (owned) ctx.device.destroy();
    throw e;
  }
}

/**
 * Whether int8 kernels can decode this model: every product of a step on matvec (n_embd a multiple
 * of 4) with its row, fc_out's 4 n_embd the widest, in their workgroup memory (MAX_K).
 */
export const int8Fits = (model: ModelConfig, kernels: KernelTable) => model.n_embd % 4 === 0 && 4 * model.n_embd <= kernels.matvec_nn.constants.MAX_K;

/** The id of the int8 sampling lever (facts.levers), in Backend.paths while sampling runs on it. */
const INT8 = "int8";

/** The plans that run the model forward: a batch's loss, a prefill, a decoding step. */
interface ForwardPlans {
  loss: Dispatch[];
  logits: Dispatch[];
  decode: Dispatch[];
}

export class GpuBackend implements Backend, Int8Decoding {
  readonly kind = "webgpu" as const;
  readonly device: string;
  /** Resolves if the device is lost (the worker offers to resume from a checkpoint). */
  readonly lost: Promise<Error>;
  private readonly gpu: GPUDevice;
  private readonly watch: DeviceWatch;
  private readonly layout: GpuLayout;
  private readonly bufs: ParamBuffers;
  private readonly trainGraph: Graph;
  private readonly sampleGraph: Graph;
  private readonly recorders: Recorder[] = [];
  /** A training step: each micro-batch's forward, loss and backward (one, unless fine-tuning cuts the batch), then clipping and AdamW. */
  private microPlans: Dispatch[][] = [];
  private updatePlan: Dispatch[] = [];
  private readonly micro: MicroBatches | null;
  /** Without the adapter's terms, then (fine-tuning) with them. */
  private forwardPlans: ForwardPlans[] = [];
  private int8Plan: Dispatch[] = [];
  /** Makes the int8 copy of the weights from the parameters (int8.ts recordInt8Copy). */
  private int8CopyPlan: Dispatch[] = [];
  private readonly int8: { buffer: GPUBuffer; layout: Int8Layout } | null = null;
  /** Whether the int8 copy predates the parameters (a trainStep or setState since it was made). */
  private int8Stale = true;
  /** Counts the changes of the parameters (trainStep, setState): what a check of them holds for. */
  paramsVersion = 0;
  /** Decode on the int8 weights (the int8 lever's decode plan); settable only where `hasInt8`, and off again once the parameters change. */
  sampleInt8 = false;
  /** Milliseconds the last refresh of the int8 copy took on the GPU (its submission to the queue's completion of it). */
  int8RefreshMs = 0;
  /** Tokens the sampling graph's k and v hold for decode (0: none since the parameters changed). */
  private cached = 0;
  /** Whether the decode state holds the last token sampleTokens picked, not yet cached (it can go on from there). */
  private picked = false;
  private samplePlan: Dispatch[] = [];
  private readonly sampler: Recorder;
  private readonly samplerSlot: number;
  /** Resolves once every pipeline the plans use is compiled and the plans are built. */
  readonly ready: Promise<void>;
  /** Every op its plans dispatch (a lever's gate checks that it ran the ops it replaces). */
  readonly ops: ReadonlySet<AnyOp>;
  private readonly adam: Recorder;
  private readonly adamSlots: number[];
  private readonly adamSizes: Record<string, number>[];
  private readonly extra: GPUBuffer[] = [];
  private readonly staging: GPUBuffer[] = [];
  /** The steps of what trains: the parameters, or the adapter. */
  private adamStep = 0;
  /** Fine-tuning, the frozen base's step count, as setState gave it. */
  private frozenStep = 0;
  readonly adapter?: AdapterSlot;
  private stagingBytes = 0;
  private queue: Promise<unknown> = Promise.resolve();
  private readonly inFlight = new Set<Promise<unknown>>();

  constructor(ctx: GpuContext, pipelines: Pipelines, private readonly model: ModelConfig, private readonly train: TrainConfig, private readonly ownsDevice = true, private readonly levers: readonly string[] = [], int8Pipelines: Pipelines | null = null, lora?: LoraSettings, activationBudget?: number) {
    this.gpu = ctx.device;
    this.device = ctx.description;
    this.watch = new DeviceWatch(this.gpu);
    this.lost = this.watch.lost;
    this.layout = trainingLayout(model, pipelines.kernels, this.gpu.limits.minStorageBufferOffsetAlignment);
    if (this.layout.total * 4 > this.gpu.limits.maxStorageBufferBindingSize) throw new Error(`the model's ${this.layout.canonicalTotal} parameters need more than this GPU binds at once (${(this.gpu.limits.maxStorageBufferBindingSize / 2 ** 20).toFixed(0)} MiB)`);
    const { buffers, bufs, trained, trainGraph, sampleGraph, nPartials, partials, norm, micro } = allocateTraining(this.gpu, pipelines.kernels, model, this.layout, train.batch_size, lora, activationBudget);
    this.extra.push(...buffers);
    this.micro = micro;
    if (micro) this.gpu.queue.writeBuffer(micro.share, 0, Float32Array.of(1 / micro.k));
    if (lora) {
      this.gpu.queue.writeBuffer(bufs.adapter!.scale, 0, Float32Array.of(loraScale(lora)));
      this.adapter = this.adapterSlot(lora);
    }
    if (int8Pipelines) {
      const layout = int8Layout(model, this.gpu.limits.minStorageBufferOffsetAlignment);
      const buffer = this.gpu.createBuffer({ label: "int8 weights", size: Math.max(16, layout.words * 4), usage: GPUBufferUsage.STORAGE });
      this.extra.push(buffer);
      this.int8 = { buffer, layout };
      bufs.int8 = this.int8;
    }
    this.bufs = bufs;
    this.trainGraph = trainGraph;
    this.sampleGraph = sampleGraph;

    const step = this.recorder(pipelines);
    this.trainGraph.forward(step, lora !== undefined);
    this.trainGraph.lossForward(step);
    this.trainGraph.backward(step);
    // A micro-batch's gradients, times 1/k, into the step's: the product of the 1x1 matrix [1/k]
    // and them (as Graph scales by s), the first written, the rest added.
    const gathers = [0, ACCUMULATE].map((flags) => {
      const r = this.recorder(pipelines);
      if (micro) r.op(matmulOp("tn", 1, trained, 1), { M: 1, N: trained, K: 1, flags }, { 1: micro.share, 2: micro.grads, 3: micro.share, 4: bufs.grads });
      return r;
    });
    const clipping = this.recorder(pipelines);
    const clip = { n: trained, n_partials: nPartials, offset: 0, grad_clip: train.grad_clip, lr: 0, beta1: 0, beta2: 0, eps: 0, weight_decay: 0, bc1: 1, bc2: 1 };
    clipping.op("grad_norm_partial", clip, { 1: this.bufs.grads, 2: partials });
    clipping.op("grad_norm_final", clip, { 3: partials, 4: norm });

    // AdamW's params change every step (lr, bias corrections): a recorder of its own.
    this.adam = this.recorder(pipelines);
    // An adapter is decayed whole (facts.json lora); the parameters' 2-D tensors come first.
    const d = bufs.adapter ? trained : this.layout.decayEnd;
    this.adamSizes = [
      { n: d, offset: 0, weight_decay: train.weight_decay },
      { n: trained - d, offset: d, weight_decay: 0 },
    ].filter((s) => s.n > 0).map((s) => ({ ...clip, ...s, lr: train.lr, beta1: train.beta1, beta2: train.beta2, eps: train.eps }));
    const adamBindings: Record<number, Binding> = { 1: this.bufs.grads, 5: norm, 6: bufs.adapter?.params ?? this.bufs.params, 7: this.bufs.m, 8: this.bufs.v };
    const mirror = bufs.adapter ? bufs.adapter.mirror : this.bufs.mirror;
    if (mirror) adamBindings[9] = mirror;
    this.adamSlots = this.adamSizes.map((s) => this.adam.op("adamw", s, adamBindings));

    const forwards = (adapted: boolean) => {
      const [loss, logits, decode] = [this.recorder(pipelines), this.recorder(pipelines), this.recorder(pipelines)];
      this.trainGraph.forward(loss, adapted);
      this.trainGraph.lossForward(loss);
      this.sampleGraph.forward(logits, adapted);
      this.sampleGraph.decode(decode, adapted);
      return { loss, logits, decode };
    };
    const recorded = [forwards(false), ...(lora ? [forwards(true)] : [])];
    // The draw's params change with each sampleTokens call: a recorder of its own.
    this.sampler = this.recorder(pipelines);
    this.samplerSlot = this.sampleGraph.sample(this.sampler, { temperature: 0, top_k: 0, top_p: 1, seed: 0 });

    this.ops = new Set(this.recorders.flatMap((r) => r.ops));
    const int8 = int8Pipelines && this.recorder(int8Pipelines);
    if (int8) this.sampleGraph.decode(int8);
    const int8Copy = int8Pipelines && this.recorder(int8Pipelines);
    if (int8Copy) recordInt8Copy(int8Copy, this.int8!, this.layout, this.bufs.params);
    this.ready = Promise.all([pipelines.compile(this.gpu, this.ops), int8Pipelines?.compile(this.gpu, [...int8!.ops, ...int8Copy!.ops])]).then(() => {
      if (int8) this.int8Plan = int8.finish("int8 decode");
      if (int8Copy) this.int8CopyPlan = int8Copy.finish("int8 copy");
      const [pass, first, rest] = [step.finish("train step"), gathers[0].finish("gather"), gathers[1].finish("gather")];
      this.microPlans = Array.from({ length: micro?.k ?? 1 }, (_, i) => [...pass, ...(i ? rest : first)]);
      this.updatePlan = [...clipping.finish("clip"), ...this.adam.finish("adamw")];
      this.forwardPlans = recorded.map((f) => ({ loss: f.loss.finish("loss"), logits: f.logits.finish("prefill"), decode: f.decode.finish("decode") }));
      this.samplePlan = this.sampler.finish("sample");
    });
  }

  /** The forward plans loss, prefill and decode run: with the adapter's terms where it has one, switched on. */
  private get plans(): ForwardPlans {
    return this.forwardPlans[this.adapter?.enabled ? 1 : 0];
  }

  /** The adapter's slot: its switch forgets the KV cache, which holds the other plans' keys and values. */
  private adapterSlot(settings: LoraSettings): AdapterSlot {
    let on = true;
    const forget = () => this.forget();
    return {
      settings,
      get enabled() {
        return on;
      },
      set enabled(value: boolean) {
        on = value;
        forget();
      },
      setState: (state) => this.setAdapterState(state),
      getState: () => {
        const { layout, params } = this.bufs.adapter!;
        return this.readState(layout, [params, this.bufs.m, this.bufs.v], () => this.adamStep);
      },
    };
  }

  /** The optional paths it runs: the levers its tables hold, and int8 while it samples on it. */
  get paths(): readonly string[] {
    return this.sampleInt8 ? [...this.levers, INT8] : this.levers;
  }

  /** Whether it has the int8 decoding path (`sampleInt8`). */
  get hasInt8(): boolean {
    return this.int8 !== null;
  }

  /**
   * The decoding plan: on the int8 weights, refreshed first where the parameters changed (on the
   * GPU, from the parameters there: nothing is read back), or the f32 one of `plans` (this.plans
   * when the call came). Call within serial().
   */
  private async decoding(plans: ForwardPlans): Promise<Dispatch[]> {
    if (!this.sampleInt8) return plans.decode;
    if (!this.int8) throw new Error("this backend has no int8 decoding path");
    if (this.int8Stale) {
      await this.gpu.queue.onSubmittedWorkDone(); // the time below is then the copy's alone
      const t0 = performance.now();
      this.gpu.queue.submit([this.run(this.int8CopyPlan).finish()]);
      this.int8Stale = false;
      await this.gpu.queue.onSubmittedWorkDone();
      this.int8RefreshMs = performance.now() - t0;
      this.watch.check();
    }
    return this.int8Plan;
  }

  private recorder(pipelines: Pipelines): Recorder {
    const r = new Recorder(this.gpu, pipelines);
    this.recorders.push(r);
    return r;
  }

  /** A mappable buffer for reading `size` bytes back; kept in the pool after use. */
  private readback(size: number): GPUBuffer {
    const b = this.gpu.createBuffer({ label: "readback", size: Math.max(size, 16), usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    this.stagingBytes += b.size;
    return b;
  }

  /** Parameters, gradients, moments, both graphs' activations and scratch, params uniforms and readback buffers. */
  get residentBytes(): number {
    return this.extra.reduce((n, b) => n + b.size, 0) + this.trainGraph.bytes + this.sampleGraph.bytes
      + this.recorders.reduce((n, r) => n + r.bytes, 0) + this.stagingBytes;
  }

  /** Runs GPU work strictly in call order; `fn` resolves once its commands are submitted. */
  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.queue.then(fn);
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async slot(): Promise<void> {
    while (this.inFlight.size >= MAX_IN_FLIGHT) await Promise.race(this.inFlight);
    this.watch.check();
  }

  private track<T>(p: Promise<T>): Promise<T> {
    this.inFlight.add(p);
    const done = () => this.inFlight.delete(p);
    p.then(done, done);
    return p;
  }

  /** Copies `size` bytes of `src` at `offset` to a mappable buffer at the end of `enc`, submits, and reads them. */
  private submitAndRead(enc: GPUCommandEncoder, src: GPUBuffer, offset: number, size: number): Promise<Float32Array> {
    let pooled = -1;
    this.staging.forEach((b, i) => {
      if (b.size >= size && (pooled < 0 || b.size < this.staging[pooled].size)) pooled = i;
    });
    const staging = pooled >= 0 ? this.staging.splice(pooled, 1)[0] : this.readback(size);
    enc.copyBufferToBuffer(src, offset, staging, 0, size);
    this.gpu.queue.submit([enc.finish()]);
    return this.track(
      staging.mapAsync(GPUMapMode.READ, 0, size).then(
        () => {
          const out = new Float32Array(staging.getMappedRange(0, size).slice(0));
          staging.unmap();
          this.staging.push(staging);
          return out;
        },
        async (e) => {
          // A failed map is almost always the device going away; its lost promise may settle a moment later.
          const lost = await Promise.race([this.lost, new Promise<null>((resolve) => setTimeout(() => resolve(null), LOST_GRACE_MS))]);
          throw lost ?? e;
        },
      ),
    );
  }

  /** `plan` in one compute pass of `enc` (a new encoder unless given). */
  private run(plan: Dispatch[], enc = this.gpu.createCommandEncoder()): GPUCommandEncoder {
    const pass = enc.beginComputePass();
    encode(pass, plan);
    pass.end();
    return enc;
  }

  /** A batch of tokens and targets where `graph` reads them; training in micro-batches, the whole batch into micro's buffers, copied in one micro-batch at a time. */
  private writeTokens(graph: Graph, x: Int32Array, y: Int32Array | null): void {
    const whole = graph === this.trainGraph ? this.micro : null;
    const [B, into] = whole ? [this.train.batch_size, whole] : [graph.B, graph];
    const n = B * this.model.block_size;
    if (x.length !== n || (y && y.length !== n)) throw new Error(`expected ${n} tokens (batch ${B} x block ${this.model.block_size}), got ${x.length}`);
    this.gpu.queue.writeBuffer(into.tokens, 0, x as Int32Array<ArrayBuffer>);
    if (y) this.gpu.queue.writeBuffer(into.targets, 0, y as Int32Array<ArrayBuffer>);
  }

  /** Copies micro-batch i's tokens and targets where the training graph reads them. */
  private copyMicroBatch(enc: GPUCommandEncoder, i: number): void {
    const bytes = this.trainGraph.B * this.model.block_size * 4;
    enc.copyBufferToBuffer(this.micro!.tokens, i * bytes, this.trainGraph.tokens, 0, bytes);
    enc.copyBufferToBuffer(this.micro!.targets, i * bytes, this.trainGraph.targets, 0, bytes);
  }

  /**
   * Submits plans[i] on micro-batch i of the training graph's batch (one plan: the whole batch, as
   * written), then `after`, and reads the batch's loss: the mean of the micro-batches' means.
   */
  private runBatch(plans: Dispatch[][], after: Dispatch[] = []): Promise<number> {
    const micro = this.micro;
    if (!micro) return this.submitAndRead(this.run([...plans[0], ...after]), this.trainGraph.loss, 0, 4).then((l) => l[0]);
    const enc = this.gpu.createCommandEncoder();
    plans.forEach((plan, i) => {
      this.copyMicroBatch(enc, i);
      this.run(plan, enc);
      enc.copyBufferToBuffer(this.trainGraph.loss, 0, micro.losses, i * 4, 4);
    });
    if (after.length) this.run(after, enc);
    return this.submitAndRead(enc, micro.losses, 0, micro.k * 4).then((l) => l.reduce((a, b) => a + b, 0) / micro.k);
  }

  trainStep(x: Int32Array, y: Int32Array, lr: number): Promise<number> {
    this.forget();
    this.int8Stale = true;
    this.paramsVersion++;
    this.sampleInt8 = false; // new weights decode on int8 only once checked (levers/int8 chooseInt8)
    return this.serial(async () => {
      await this.slot();
      this.writeTokens(this.trainGraph, x, y);
      this.nextAdamStep(lr);
      return { read: this.runBatch(this.microPlans, this.updatePlan) };
    }).then(({ read }) => read);
  }

  /** Counts a step of what trains and sets AdamW's params for it. */
  private nextAdamStep(lr: number): void {
    const t = ++this.adamStep;
    const { beta1, beta2 } = this.train;
    this.adamSizes.forEach((s, i) => this.adam.rewrite(this.adamSlots[i], "adamw", { ...s, lr, bc1: 1 - beta1 ** t, bc2: 1 - beta2 ** t }));
  }

  loss(x: Int32Array, y: Int32Array): Promise<number> {
    this.forget(); // the Backend contract, though this backend's loss leaves the cache alone
    const plans = this.plans;
    return this.serial(async () => {
      await this.slot();
      this.writeTokens(this.trainGraph, x, y);
      return { read: this.runBatch(this.microPlans.map(() => plans.loss)) };
    }).then(({ read }) => read);
  }

  async prefill(tokens: Int32Array): Promise<Float32Array> {
    const window = this.prefillWindow(tokens);
    const plans = this.plans;
    const { read } = await this.serial(async () => {
      await this.slot();
      this.writeTokens(this.sampleGraph, window, null);
      const V = this.model.vocab_size;
      return { read: this.submitAndRead(this.run(plans.logits), this.sampleGraph.logits, (tokens.length - 1) * V * 4, V * 4) };
    });
    return read;
  }

  /** A prefill's window, checked and padded to block_size; from now on the cache is its tokens'. */
  private prefillWindow(tokens: Int32Array): Int32Array {
    const T = this.model.block_size;
    if (tokens.length < 1 || tokens.length > T) throw new Error(`prefill takes 1 to ${T} tokens, got ${tokens.length}`);
    this.checkTokens("prefill", tokens);
    this.cached = tokens.length;
    this.picked = false;
    // Causal attention: positions after the last real token change neither its logits nor the cache below it.
    const padded = new Int32Array(T);
    padded.set(tokens);
    return padded;
  }

  async decode(token: number): Promise<Float32Array> {
    const T = this.model.block_size;
    if (this.cached === 0) throw new Error("decode: nothing is cached since the last trainStep, loss or setState: prefill first");
    if (this.cached >= T) throw new Error(`decode: the cache is full (block_size ${T} tokens): prefill a shorter window`);
    this.checkTokens("decode", [token]);
    const at = Uint32Array.of(this.cached++, token);
    this.picked = false;
    const plans = this.plans;
    const { read } = await this.serial(async () => {
      await this.slot();
      const plan = await this.decoding(plans);
      this.gpu.queue.writeBuffer(this.sampleGraph.at!, 0, at);
      return { read: this.submitAndRead(this.run(plan), this.sampleGraph.logits, 0, this.model.vocab_size * 4) };
    });
    return read;
  }

  /** The KV cache and a picked token are gone (the parameters or the sampling graph's buffers change). */
  private forget(): void {
    this.cached = 0;
    this.picked = false;
  }

  sampleTokens(window: Int32Array | null, count: number, draw: Draw, seed: number, counter: number): Promise<Int32Array> {
    const T = this.model.block_size;
    if (window) {
      if (window.length < 1 || window.length > T) throw new Error(`sampleTokens takes a window of 1 to ${T} tokens, got ${window.length}`);
      this.checkTokens("sampleTokens", window);
    } else if (!this.picked) {
      throw new Error("sampleTokens: no token of its own to go on from since the last prefill, decode, trainStep, loss or setState: give a window");
    }
    const decodes = window ? count - 1 : count;
    const fill = window ? window.length : this.cached;
    if (!(Number.isInteger(count) && count >= 1) || fill + decodes > T) throw new Error(`sampleTokens: ${count} tokens after ${fill} cached overflow the cache (block_size ${T})`);
    this.cached = fill + decodes;
    this.picked = true;
    const plans = this.plans;
    return this.serial(async () => {
      await this.slot();
      const decodePlan = await this.decoding(plans);
      const { temperature, topK, topP = 1 } = draw;
      this.sampler.rewrite(this.samplerSlot, "sample_token", { V: this.model.vocab_size, temperature, top_k: topK, top_p: topP, seed });
      const at = this.sampleGraph.at!;
      if (window) {
        const padded = new Int32Array(T);
        padded.set(window);
        this.writeTokens(this.sampleGraph, padded, null);
        // As if the window's last token had just been decoded: its logits row, its position.
        this.gpu.queue.writeBuffer(at, 0, Uint32Array.of(window.length - 1, 0, 0, counter, window.length - 1));
      } else {
        this.gpu.queue.writeBuffer(at, 8, Uint32Array.of(0, counter)); // position and token stay: the last one picked
      }
      // Submitted STEPS_PER_SUBMIT decoding steps at a time, so the GPU runs each while the next is
      // encoded (on the H200 a Huge step took about 0.4 ms to encode and 0.6 ms to run).
      const steps: Dispatch[][] = [...(window ? [[...plans.logits, ...this.samplePlan]] : []), ...Array.from({ length: decodes }, () => [...decodePlan, ...this.samplePlan])];
      for (let i = 0; i + STEPS_PER_SUBMIT < steps.length; i += STEPS_PER_SUBMIT) this.gpu.queue.submit([this.run(steps.slice(i, i + STEPS_PER_SUBMIT).flat()).finish()]);
      const last = steps.slice(Math.floor((steps.length - 1) / STEPS_PER_SUBMIT) * STEPS_PER_SUBMIT).flat();
      return { read: this.submitAndRead(this.run(last), this.sampleGraph.drawn!, 0, count * 4) };
    }).then(async ({ read }) => new Int32Array((await read).buffer));
  }

  private checkTokens(what: string, tokens: ArrayLike<number>): void {
    const V = this.model.vocab_size;
    for (let i = 0; i < tokens.length; i++) {
      if (!(Number.isInteger(tokens[i]) && tokens[i] >= 0 && tokens[i] < V)) throw new Error(`${what}: token ${tokens[i]} is outside [0, ${V})`);
    }
  }

  /**
   * One training step with each dispatch in a compute pass of its own: where a step's time goes,
   * per op (it trains, like trainStep). On a device with timestamp queries, one submission and the
   * GPU's time of each pass ("gpu"); else each dispatch submitted and waited on alone, timed by
   * the host's clock ("host"), which adds a submit and a wait (tens of microseconds) to every one.
   */
  profileStep(x: Int32Array, y: Int32Array, lr: number): Promise<StepProfile> {
    return this.serial(async () => {
      await Promise.all(this.inFlight);
      this.writeTokens(this.trainGraph, x, y);
      this.nextAdamStep(lr);
      await this.gpu.queue.onSubmittedWorkDone();
      // In micro-batches, each one's tokens are copied in before its first dispatch.
      const copies = new Map<number, (enc: GPUCommandEncoder) => void>();
      let at = 0;
      this.microPlans.forEach((plan, i) => {
        if (this.micro) copies.set(at, (enc) => this.copyMicroBatch(enc, i));
        at += plan.length;
      });
      return this.timePlan([...this.microPlans.flat(), ...this.updatePlan], copies);
    });
  }

  /**
   * One decoding step after what prefill or decode cached (its dispatches and the token's draw, on
   * the int8 weights where sampleInt8 is on), timed as profileStep times a training step; and `encodeMs`, what encoding a step's dispatches
   * costs the host, the mean over STEPS_PER_SUBMIT steps encoded as sampleTokens encodes them.
   */
  profileDecode(): Promise<StepProfile & { encodeMs: number }> {
    const T = this.model.block_size;
    if (this.cached === 0 || this.cached >= T) throw new Error(`profileDecode: prefill 1 to ${T - 1} tokens first`);
    return this.serial(async () => {
      await Promise.all(this.inFlight);
      this.gpu.queue.writeBuffer(this.sampleGraph.at!, 0, Uint32Array.of(this.cached, 0, 0, 0, 0));
      const step = [...(await this.decoding(this.plans)), ...this.samplePlan];
      const start = performance.now();
      const enc = this.run(Array.from({ length: STEPS_PER_SUBMIT }, () => step).flat());
      const encodeMs = (performance.now() - start) / STEPS_PER_SUBMIT;
      enc.finish();
      await this.gpu.queue.onSubmittedWorkDone();
      return { ...(await this.timePlan(step)), encodeMs };
    });
  }

  /** A prefill of `tokens` (the cache it leaves is prefill's), its dispatches timed as profileStep times a training step's. */
  async profilePrefill(tokens: Int32Array): Promise<StepProfile> {
    const window = this.prefillWindow(tokens);
    return this.serial(async () => {
      await Promise.all(this.inFlight);
      this.writeTokens(this.sampleGraph, window, null);
      await this.gpu.queue.onSubmittedWorkDone();
      return this.timePlan(this.plans.logits);
    });
  }

  /** Each dispatch of `plan` in a compute pass of its own, with its time (profileStep says how); `before` encodes copies ahead of the dispatch at its index. */
  private async timePlan(plan: Dispatch[], before = new Map<number, (enc: GPUCommandEncoder) => void>()): Promise<StepProfile> {
    const row = (d: Dispatch, ms: number) => ({ op: d.label, workgroups: d.workgroups[0] * d.workgroups[1] * d.workgroups[2], ms });
    const queries = 2 * plan.length;
    if (this.gpu.features.has("timestamp-query") && queries <= MAX_QUERIES) {
      const set = this.gpu.createQuerySet({ type: "timestamp", count: queries });
      const resolved = this.gpu.createBuffer({ size: queries * 8, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC });
      const enc = this.gpu.createCommandEncoder();
      plan.forEach((d, i) => {
        before.get(i)?.(enc);
        const pass = enc.beginComputePass({ timestampWrites: { querySet: set, beginningOfPassWriteIndex: 2 * i, endOfPassWriteIndex: 2 * i + 1 } });
        encode(pass, [d]);
        pass.end();
      });
      enc.resolveQuerySet(set, 0, queries, resolved, 0);
      const words = new Uint32Array((await this.submitAndRead(enc, resolved, 0, queries * 8)).buffer);
      set.destroy();
      resolved.destroy();
      const ns = (i: number) => words[2 * i] + words[2 * i + 1] * 2 ** 32;
      this.watch.check();
      return { timing: "gpu" as const, dispatches: plan.map((d, i) => row(d, (ns(2 * i + 1) - ns(2 * i)) / 1e6)) };
    }
    const dispatches = [];
    for (const [i, d] of plan.entries()) {
      const start = performance.now();
      const enc = this.gpu.createCommandEncoder();
      before.get(i)?.(enc);
      this.gpu.queue.submit([this.run([d], enc).finish()]);
      await this.gpu.queue.onSubmittedWorkDone();
      dispatches.push(row(d, performance.now() - start));
    }
    this.watch.check();
    return { timing: "host" as const, dispatches };
  }

  // async: a state refused rejects, as the Backend contract has it.
  async setState(state: ParamState): Promise<void> {
    if (this.adapter && (state.m || state.v)) throw new Error("setState: the base is frozen while fine-tuning: it takes no Adam moments");
    return this.writeState("setState", "the model", this.layout, this.bufs.params, this.bufs.mirror, state, !this.adapter, () => {
      if (this.adapter) this.frozenStep = state.step;
      else this.adamStep = state.step;
    });
  }

  getState(): Promise<ParamState> {
    if (this.adapter) return this.readState(this.layout, [this.bufs.params], () => this.frozenStep);
    return this.readState(this.layout, [this.bufs.params, this.bufs.m, this.bufs.v], () => this.adamStep);
  }

  private async setAdapterState(state: ParamState): Promise<void> {
    const { layout, params, mirror } = this.bufs.adapter!;
    return this.writeState("adapter setState", "the adapter", layout, params, mirror, state, true, () => {
      this.adamStep = state.step;
    });
  }

  /**
   * Writes `state`, checked against `layout` (of `whose` tensors), into `params` and its `mirror`,
   * and with `moments` (`params` are what trains) its moments, zeros where it has none, into the
   * moments' buffers; then `setStep`, in call order with the GPU work.
   */
  private writeState(what: string, whose: string, layout: FlatLayout, params: GPUBuffer, mirror: GPUBuffer | null, state: ParamState, moments: boolean, setStep: () => void): Promise<void> {
    const n = layout.canonicalTotal;
    for (const [name, a] of [["params", state.params], ["m", state.m], ["v", state.v]] as const) {
      if (a && a.length !== n) throw new Error(`${what}: ${name} has ${a.length} floats, ${whose} has ${n}`);
    }
    this.forget();
    this.int8Stale = true;
    this.paramsVersion++;
    this.sampleInt8 = false; // new weights decode on int8 only once checked (levers/int8 chooseInt8)
    return this.serial(async () => {
      await Promise.all(this.inFlight);
      const zeros = new Float32Array(n);
      const gpuOrder = toGpuOrder(layout, state.params);
      this.gpu.queue.writeBuffer(params, 0, gpuOrder);
      // From here on AdamW keeps the mirror of what trains fresh (a frozen base's stays); it starts as
      // the tensors rounded to nearest even.
      if (mirror) this.gpu.queue.writeBuffer(mirror, 0, Uint16Array.from(gpuOrder, floatToHalf));
      if (moments) {
        this.gpu.queue.writeBuffer(this.bufs.m, 0, toGpuOrder(layout, state.m ?? zeros));
        this.gpu.queue.writeBuffer(this.bufs.v, 0, toGpuOrder(layout, state.v ?? zeros));
      }
      setStep();
      this.watch.check();
    });
  }

  /** `buffers` (params, then m and v if read), laid out as `layout`, in canonical order, with the step count `step` gives in call order. */
  private readState(layout: FlatLayout, buffers: GPUBuffer[], step: () => number): Promise<ParamState> {
    return this.serial(async () => {
      const reads = buffers.map((b) => this.submitAndRead(this.gpu.createCommandEncoder(), b, 0, layout.total * 4));
      return { reads, step: step() };
    }).then(async ({ reads, step }) => {
      const [params, m, v] = (await Promise.all(reads)).map((a) => fromGpuOrder(layout, a));
      return m ? { params, m, v, step } : { params, step };
    });
  }

  dispose(): void {
    this.watch.stop();
    for (const r of this.recorders) r.destroy();
    this.trainGraph.destroy();
    this.sampleGraph.destroy();
    for (const b of [...this.extra, ...this.staging]) b.destroy();
    if (this.ownsDevice) this.gpu.destroy();
  }
}
