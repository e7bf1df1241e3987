// Getting a GPUDevice with the adapter's full limits, and turning device loss
// and uncaptured errors into errors the worker can act on.

// Limits a training step can use more of than the WebGPU defaults.
const RAISED_LIMITS = [
  "maxBufferSize",
  "maxStorageBufferBindingSize",
  "maxStorageBuffersPerShaderStage",
  "maxComputeWorkgroupStorageSize",
  "maxComputeInvocationsPerWorkgroup",
  "maxComputeWorkgroupSizeX",
  "maxComputeWorkgroupSizeY",
  "maxComputeWorkgroupSizeZ",
  "maxComputeWorkgroupsPerDimension",
] as const;

/** The GPU is gone (driver reset, tab backgrounded too long, ...): resume from a checkpoint. */
export class DeviceLostError extends Error {
  constructor(readonly reason: string) {
    super(`the GPU device was lost (${reason})`);
    this.name = "DeviceLostError";
  }
}

export interface GpuContext {
  device: GPUDevice;
  /** e.g. "nvidia · hopper · NVIDIA H200". */
  description: string;
}

/** The adapter in words: vendor, architecture, device and description, those it gives. */
export function describeAdapter(adapter: GPUAdapter): string {
  const info = adapter.info;
  return [info.vendor, info.architecture, info.device, info.description].filter(Boolean).join(" · ") || "WebGPU adapter";
}

/** A device with the adapter's full limits and `features` (those the kernels of gated levers need). */
export async function requestGpu(gpu: GPU | undefined, adapter?: GPUAdapter | null, features: GPUFeatureName[] = []): Promise<GpuContext> {
  if (!adapter) {
    if (!gpu) throw new Error("WebGPU is not available here (no navigator.gpu)");
    adapter = await gpu.requestAdapter({ powerPreference: "high-performance" });
    if (!adapter) throw new Error("WebGPU offered no adapter");
  }
  const requiredLimits: Record<string, number> = {};
  const offered = adapter.limits as unknown as Record<string, number>;
  for (const name of RAISED_LIMITS) if (typeof offered[name] === "number") requiredLimits[name] = offered[name];
  const device = await adapter.requestDevice({ requiredLimits, requiredFeatures: features });
  return { device, description: describeAdapter(adapter) };
}

/**
 * Watches a device: `check()` throws once the device is lost or an uncaptured
 * (validation, out-of-memory) error has happened, so a broken step is never
 * reported as a loss.
 */
export class DeviceWatch {
  private failure: Error | null = null;
  readonly lost: Promise<DeviceLostError>;

  private readonly onError = (ev: Event) => {
    const e = (ev as GPUUncapturedErrorEvent).error;
    this.failure ??= new Error(`WebGPU error: ${e.message}`);
  };

  constructor(private readonly device: GPUDevice) {
    this.lost = device.lost.then((info) => {
      const err = new DeviceLostError(info.message || info.reason || "unknown reason");
      // Errors raised while the device was going away are symptoms: report the loss.
      this.failure = err;
      return err;
    });
    device.addEventListener("uncapturederror", this.onError);
  }

  /** Stops listening: a backend disposed on a device it shares (the gate's) leaves no listener behind. */
  stop(): void {
    this.device.removeEventListener("uncapturederror", this.onError);
  }

  check(): void {
    if (this.failure) throw this.failure;
  }
}
