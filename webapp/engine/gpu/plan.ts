// The buffers a GPU backend of a shape allocates, listed by the code that
// allocates them (the parameter layout and Graph), run on a stand-in device
// that only records each buffer's size: a shape the adapter cannot hold is
// named before anything is allocated.
import type { ModelConfig } from "../types";
import { Graph, type ParamBuffers } from "./graph";
import { F32_KERNELS, type KernelTable } from "./kernels";
import { gpuLayout } from "./layout";

export interface GpuFit {
  /** The largest single buffer, in bytes, and what it holds. */
  largest: { label: string; bytes: number };
  /** Why this adapter cannot train the shape (a limit named), or null. */
  problem: string | null;
}

type Limits = Pick<GPUSupportedLimits, "maxBufferSize" | "maxStorageBufferBindingSize" | "minStorageBufferOffsetAlignment">;

const MiB = 2 ** 20;

export function gpuFit(model: ModelConfig, batch: number, limits: Limits, kernels: KernelTable = F32_KERNELS): GpuFit {
  const layout = gpuLayout(model, limits.minStorageBufferOffsetAlignment);
  const buffers = [{ label: "parameters", bytes: layout.total * 4 }];
  // Graph checks each buffer against the binding limit as it allocates: here the limit is
  // lifted, so every buffer is listed and compared below with both limits.
  const device = {
    limits: { ...limits, maxStorageBufferBindingSize: Infinity },
    createBuffer: (d: GPUBufferDescriptor) => {
      buffers.push({ label: d.label ?? "buffer", bytes: d.size });
      return {} as GPUBuffer;
    },
  } as unknown as GPUDevice;
  try {
    for (const [B, training] of [[batch, true], [1, false]] as const) new Graph(device, kernels, model, layout, {} as ParamBuffers, B, training);
  } catch (e) {
    return { largest: buffers[0], problem: (e as Error).message };
  }
  const largest = buffers.reduce((a, b) => (b.bytes > a.bytes ? b : a));
  const [limit, name] = limits.maxBufferSize < limits.maxStorageBufferBindingSize
    ? [limits.maxBufferSize, "maxBufferSize"]
    : [limits.maxStorageBufferBindingSize, "maxStorageBufferBindingSize"];
  const problem = largest.bytes > limit
    ? `its ${largest.label} buffer needs ${Math.ceil(largest.bytes / MiB)} MiB, more than this GPU's largest buffer (${name}: ${Math.floor(limit / MiB)} MiB)`
    : null;
  return { largest, problem };
}
