// WebGPU in Node through Dawn (npm webgpu), for the engine's tests.
import { create, globals } from "webgpu";

Object.assign(globalThis, globals);

export const gpu: GPU = create([]);
