// The buffers a GPU backend of a shape allocates, listed by the code that
// allocates them (backend.ts allocateTraining: parameters, a lever's mirror of them, moments, Graph)
// run on a stand-in device that only records each buffer's size: a shape the
// adapter cannot hold is named before anything is allocated, and the memory
// shown before Start is the backend's own figure.
import type { ModelConfig } from "../types";
import type { LoraSettings } from "../lora";
import { allocateTraining, trainingLayout } from "./backend";
import { F32_KERNELS, type KernelTable } from "./kernels";

export interface GpuFit {
  /** The largest single buffer, in bytes, and what it holds. */
  largest: { label: string; bytes: number };
  /** Every buffer's bytes: what the backend holds but its params uniforms and readback pool (Backend.residentBytes). */
  bytes: number;
  /** Why this adapter cannot train the shape (a limit named), or null. */
  problem: string | null;
}

type Limits = Pick<GPUSupportedLimits, "maxBufferSize" | "maxStorageBufferBindingSize" | "minStorageBufferOffsetAlignment">;

const MiB = 2 ** 20;

/** The fit of training `model` at `batch` with `kernels`, or with `lora` of fine-tuning it (its micro-batches too). */
export function gpuFit(model: ModelConfig, batch: number, limits: Limits, kernels: KernelTable = F32_KERNELS, lora?: LoraSettings): GpuFit {
  const layout = trainingLayout(model, kernels, limits.minStorageBufferOffsetAlignment);
  const buffers: { label: string; bytes: number }[] = [];
  // Graph checks each buffer against the binding limit as it allocates: here the limit is
  // lifted, so every buffer is listed and compared below with both limits.
  const device = {
    // Each limit by name: a GPUSupportedLimits keeps them on its prototype, where a spread does not look.
    limits: { maxBufferSize: limits.maxBufferSize, minStorageBufferOffsetAlignment: limits.minStorageBufferOffsetAlignment, maxStorageBufferBindingSize: Infinity },
    createBuffer: (d: GPUBufferDescriptor) => {
      buffers.push({ label: d.label ?? "buffer", bytes: d.size });
      return { size: d.size } as GPUBuffer;
    },
  } as unknown as GPUDevice;
  const total = () => buffers.reduce((n, b) => n + b.bytes, 0);
  try {
    allocateTraining(device, kernels, model, layout, batch, lora);
  } catch (e) {
    return { largest: buffers[0] ?? { label: "parameters", bytes: layout.total * 4 }, bytes: total(), problem: (e as Error).message };
  }
  const largest = buffers.reduce((a, b) => (b.bytes > a.bytes ? b : a));
  const [limit, name] = limits.maxBufferSize < limits.maxStorageBufferBindingSize
    ? [limits.maxBufferSize, "maxBufferSize"]
    : [limits.maxStorageBufferBindingSize, "maxStorageBufferBindingSize"];
  const problem = largest.bytes > limit
    ? `its ${largest.label} buffer needs ${Math.ceil(largest.bytes / MiB)} MiB, more than this GPU's largest buffer (${name}: ${Math.floor(limit / MiB)} MiB)`
    : null;
  return { largest, bytes: total(), problem };
}
