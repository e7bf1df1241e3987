// Feature detection, run in the worker because that is where training runs:
// the adapter the page could see is not necessarily the one a worker gets.
import type { Caps } from "./protocol";

// The smallest module that needs SIMD: one function returning v128.const 0.
const SIMD_PROBE = new Uint8Array([
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
  0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7b,
  0x03, 0x02, 0x01, 0x00,
  0x0a, 0x16, 0x01, 0x14, 0x00, 0xfd, 0x0c, ...new Array(16).fill(0), 0x0b,
]);

export async function requestAdapter(): Promise<{ adapter: GPUAdapter | null; error: string | null }> {
  const gpu = (self.navigator as Navigator & { gpu?: GPU }).gpu;
  if (!gpu) return { adapter: null, error: "this browser has no navigator.gpu" };
  try {
    const adapter = await gpu.requestAdapter({ powerPreference: "high-performance" });
    return { adapter, error: adapter ? null : "the browser offered no WebGPU adapter" };
  } catch (e) {
    return { adapter: null, error: `requestAdapter failed: ${(e as Error).message}` };
  }
}

/** Everything but the levers' verdicts, which need their backends' kernels (worker/cpu.ts). */
export async function detectCaps(): Promise<Omit<Caps, "levers" | "gpuChecked">> {
  const { adapter, error } = await requestAdapter();
  const info = adapter?.info;
  return {
    webgpu: adapter !== null,
    adapter: info ? { vendor: info.vendor, architecture: info.architecture, device: info.device, description: info.description } : null,
    features: adapter ? [...adapter.features].map(String).sort() : [],
    maxBufferMiB: adapter ? Math.floor(adapter.limits.maxStorageBufferBindingSize / 2 ** 20) : 0,
    gpuError: error,
    wasmSimd: WebAssembly.validate(SIMD_PROBE),
    crossOriginIsolated: self.crossOriginIsolated === true,
    threads: self.navigator.hardwareConcurrency || 1,
  };
}
