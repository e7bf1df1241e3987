// WebGPU in Node through Dawn (npm webgpu), for the engine's tests.
import { create, globals } from "webgpu";

Object.assign(globalThis, globals);

// TINYGPT_DAWN_F16_TOGGLE=1, on a GPU test host: Dawn's vulkan_enable_f16_on_nvidia, as the CLIs'
// --dawn-f16-toggle, without which Dawn hides shader-f16 (and the coop-matrix lever) on NVIDIA.
export const gpu: GPU = create(process.env.TINYGPT_DAWN_F16_TOGGLE ? ["enable-dawn-features=allow_unsafe_apis,vulkan_enable_f16_on_nvidia"] : []);
// Dawn is torn down when this object is collected, devices and all: a test file whose tests hold
// only a device, not `gpu`, aborted Node mid-test. Held for the life of the process.
(globalThis as { dawnGpu?: GPU }).dawnGpu = gpu;

/** Why GPU tests cannot run here, or null when Dawn finds an adapter. */
export const noGpu: string | null = (await gpu.requestAdapter()) ? null : "Dawn found no WebGPU adapter (on Linux set VK_ICD_FILENAMES to a Vulkan driver, e.g. SwiftShader's from the chromium package)";
