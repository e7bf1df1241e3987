// Records a fixed sequence of kernel dispatches once (pipelines, params,
// bind groups) so that a training step only encodes and submits them. Params
// live in one uniform buffer; slots that change per step (AdamW's lr and bias
// corrections) are rewritten with queue.writeBuffer before each submit.

import { type AnyOp, type Kernel, type KernelTable, type Sizes, type Workgroups, kernelFor } from "./kernels";

export type Binding = GPUBuffer | GPUBufferBinding;

export interface Dispatch {
  /** Its op, and the entry point that runs it where a lever's differs: "matvec_nn (int8_nn)". */
  label: string;
  pipeline: GPUComputePipeline;
  bindGroup: GPUBindGroup;
  workgroups: Workgroups;
}

interface Pending {
  op: AnyOp;
  slot: number;
  bindings: Record<number, Binding>;
  workgroups: Workgroups;
}

export function packParams(op: AnyOp, kernel: Kernel, sizes: Sizes): ArrayBuffer {
  const buf = new ArrayBuffer(Math.ceil((kernel.params.length * 4) / 16) * 16);
  const view = new DataView(buf);
  kernel.params.forEach((f, i) => {
    const [name, type] = f.split(":");
    const value = sizes[name];
    if (value === undefined) throw new Error(`${op}: missing param ${name}`);
    if (type === "f32") view.setFloat32(4 * i, value, true);
    else view.setUint32(4 * i, value, true);
  });
  return buf;
}

// Pipelines by device and kernel (entry point, override constants and source):
// backends sharing a device (a lever's gate, the tests) compile each kernel
// once, and a variant table compiles only the kernels it replaces.
const compiled = new WeakMap<GPUDevice, Map<string, Promise<GPUComputePipeline>>>();

/** Compiled pipelines of the ops a backend uses, built from a kernel table. */
export class Pipelines {
  private readonly byOp = new Map<AnyOp, GPUComputePipeline>();

  constructor(readonly kernels: KernelTable) {}

  async compile(device: GPUDevice, ops: Iterable<AnyOp>): Promise<void> {
    let cache = compiled.get(device);
    if (!cache) compiled.set(device, (cache = new Map()));
    const modules = new Map<string, Promise<GPUShaderModule>>();
    const moduleFor = (op: AnyOp) => {
      const source = kernelFor(this.kernels, op).source;
      let module = modules.get(source);
      if (!module) {
        const m = device.createShaderModule({ code: source, label: op });
        module = m.getCompilationInfo().then((info) => {
          const errors = info.messages.filter((msg) => msg.type === "error");
          if (errors.length) throw new Error(`WGSL for ${op} does not compile: ${errors.map((e) => `${e.lineNum}:${e.linePos} ${e.message}`).join("; ")}`);
          return m;
        });
        modules.set(source, module);
      }
      return module;
    };
    const todo = [...new Set(ops)].filter((op) => !this.byOp.has(op));
    await Promise.all(
      todo.map(async (op) => {
        const { source, entry, constants: own, baked } = kernelFor(this.kernels, op);
        const constants = baked ? {} : own;
        const key = `${entry}\0${JSON.stringify(constants)}\0${source}`;
        let pipeline = cache.get(key);
        if (!pipeline) {
          pipeline = moduleFor(op).then((module) => device.createComputePipelineAsync({ label: op, layout: "auto", compute: { module, entryPoint: entry, constants } }));
          cache.set(key, pipeline);
          pipeline.catch(() => cache.delete(key));
        }
        this.byOp.set(op, await pipeline);
      }),
    );
  }

  get(op: AnyOp): GPUComputePipeline {
    const p = this.byOp.get(op);
    if (!p) throw new Error(`pipeline ${op} was not compiled`);
    return p;
  }
}

export class Recorder {
  private readonly pending: Pending[] = [];
  private readonly blobs: ArrayBuffer[] = [];
  private readonly slotBytes: number;
  private uniforms: GPUBuffer | null = null;

  constructor(private readonly device: GPUDevice, private readonly pipelines: Pipelines) {
    this.slotBytes = Math.max(64, device.limits.minUniformBufferOffsetAlignment);
  }

  /** Adds one dispatch; returns its params slot (for `rewrite`). */
  op(op: AnyOp, sizes: Sizes, bindings: Record<number, Binding>): number {
    const slot = this.blobs.length;
    this.blobs.push(packParams(op, kernelFor(this.pipelines.kernels, op), sizes));
    this.pending.push({ op, slot, bindings, workgroups: kernelFor(this.pipelines.kernels, op).workgroups(sizes) });
    return slot;
  }

  /** The table its ops are dispatched from (a graph binds each op's operands as its kernel reads them). */
  get kernels(): KernelTable {
    return this.pipelines.kernels;
  }

  get ops(): AnyOp[] {
    return this.pending.map((d) => d.op);
  }

  /** Turns the recorded ops into dispatches; call once, after every `op`, with their pipelines compiled. */
  finish(label: string): Dispatch[] {
    const uniforms = this.device.createBuffer({ label: `${label} params`, size: Math.max(1, this.blobs.length) * this.slotBytes, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST });
    this.blobs.forEach((b, i) => this.device.queue.writeBuffer(uniforms, i * this.slotBytes, b));
    this.uniforms = uniforms;
    return this.pending.map((d) => {
      const pipeline = this.pipelines.get(d.op);
      const entries: GPUBindGroupEntry[] = [{ binding: 0, resource: { buffer: uniforms, offset: d.slot * this.slotBytes, size: this.blobs[d.slot].byteLength } }];
      for (const [binding, b] of Object.entries(d.bindings)) entries.push({ binding: Number(binding), resource: "buffer" in b ? b : { buffer: b } });
      const bindGroup = this.device.createBindGroup({ label: `${label} ${d.op}`, layout: pipeline.getBindGroupLayout(0), entries });
      const { entry } = kernelFor(this.pipelines.kernels, d.op);
      return { label: entry === d.op ? d.op : `${d.op} (${entry})`, pipeline, bindGroup, workgroups: d.workgroups };
    });
  }

  /** Bytes of its params buffer (none before finish). */
  get bytes(): number {
    return this.uniforms?.size ?? 0;
  }

  rewrite(slot: number, op: AnyOp, sizes: Sizes): void {
    this.device.queue.writeBuffer(this.uniforms!, slot * this.slotBytes, packParams(op, kernelFor(this.pipelines.kernels, op), sizes));
  }

  destroy(): void {
    this.uniforms?.destroy();
  }
}

export function encode(pass: GPUComputePassEncoder, dispatches: Dispatch[]): void {
  for (const d of dispatches) {
    pass.setPipeline(d.pipeline);
    pass.setBindGroup(0, d.bindGroup);
    pass.dispatchWorkgroups(...d.workgroups);
  }
}

/**
 * One dispatch of `table`'s `op` on fresh buffers holding `bindings`, recorded and encoded as the
 * engine does; the bindings named in `read` come back, as many floats as each was given. For the
 * levers' kernel checks, which hold one op at a time against another.
 */
export async function dispatchOnce(device: GPUDevice, table: KernelTable, op: AnyOp, sizes: Sizes, bindings: Record<number, ArrayBufferView>, read: number[]): Promise<Record<number, Float32Array>> {
  const buffers: Record<number, GPUBuffer> = {};
  for (const [i, data] of Object.entries(bindings)) {
    const b = device.createBuffer({ size: Math.max(16, Math.ceil(data.byteLength / 16) * 16), usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST });
    device.queue.writeBuffer(b, 0, data as ArrayBufferView<ArrayBuffer>);
    buffers[Number(i)] = b;
  }
  const pipelines = new Pipelines(table);
  await pipelines.compile(device, [op]);
  const r = new Recorder(device, pipelines);
  r.op(op, sizes, buffers);
  const enc = device.createCommandEncoder();
  const pass = enc.beginComputePass();
  encode(pass, r.finish(op));
  pass.end();
  const staging = read.map((i) => {
    const s = device.createBuffer({ size: buffers[i].size, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    enc.copyBufferToBuffer(buffers[i], 0, s, 0, s.size);
    return s;
  });
  device.queue.submit([enc.finish()]);
  const got: Record<number, Float32Array> = {};
  for (const [j, i] of read.entries()) {
    await staging[j].mapAsync(GPUMapMode.READ);
    got[i] = new Float32Array(staging[j].getMappedRange().slice(0, bindings[i].byteLength));
    staging[j].unmap();
  }
  for (const b of [...Object.values(buffers), ...staging]) b.destroy();
  r.destroy();
  return got;
}
