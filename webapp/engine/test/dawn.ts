// WebGPU in Node through Dawn (npm webgpu), for the engine's tests.
import { create, globals } from "webgpu";

Object.assign(globalThis, globals);

export const gpu: GPU = create([]);

/** Why GPU tests cannot run here, or null when Dawn finds an adapter. */
export const noGpu: string | null = (await gpu.requestAdapter()) ? null : "Dawn found no WebGPU adapter (on Linux set VK_ICD_FILENAMES to a Vulkan driver, e.g. SwiftShader's from the chromium package)";
