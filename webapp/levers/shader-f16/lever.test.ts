// The shader-f16 lever's gate on an adapter with shader-f16 (the H200 through
// Dawn; bench/matmul_dawn.ts --lever shader-f16 runs it there too): its table
// computes the same training step as the plain kernels, and the same table with
// the f16 kernel dropping its first k-tile is refused. Dawn offers shader-f16 on
// NVIDIA only with the adapter toggle vulkan_enable_f16_on_nvidia, which a test
// host asks for with TINYGPT_DAWN_F16_TOGGLE=1 (browsers set their own toggles).
// Elsewhere (SwiftShader, lavapipe) it skips, saying why.

import assert from "node:assert/strict";
import { test } from "node:test";
import { create, globals } from "webgpu";
import { requestGpu } from "../../engine/gpu/device";
import { kernelTableAgrees } from "../gpu";
import { KERNELS, SHADER_F16, SHAPES } from "./lever";

Object.assign(globalThis, globals);

const gpu = create(process.env.TINYGPT_DAWN_F16_TOGGLE === "1" ? ["enable-dawn-features=allow_unsafe_apis,vulkan_enable_f16_on_nvidia"] : []);
const adapter = await gpu.requestAdapter({ powerPreference: "high-performance" });
const skip = !adapter ? "Dawn found no WebGPU adapter" : adapter.features.has("shader-f16") ? false
  : "the adapter lacks shader-f16 (on NVIDIA set TINYGPT_DAWN_F16_TOGGLE=1 for Dawn's vulkan_enable_f16_on_nvidia)";

test("shader-f16: its table passes the GPU gate, and one that drops a k-tile is refused", { skip }, async () => {
  const context = await requestGpu(gpu, adapter, ["shader-f16"]);
  try {
    const good = await kernelTableAgrees({ context }, SHADER_F16.kernels, ["shader-f16"], SHAPES);
    assert.equal(good.failure, null, JSON.stringify(good.errors));
    const dropped = "c00 += select(vec4<elem>(s00), vec4<elem>(0.0), k0 == ks.x);";
    const broken = Object.fromEntries(Object.entries(KERNELS).map(([op, k]) => {
      assert.ok(k!.source.includes("c00 += vec4<elem>(s00);"));
      return [op, { ...k!, source: k!.source.replace("c00 += vec4<elem>(s00);", dropped) }];
    }));
    assert.match((await kernelTableAgrees({ context }, broken, ["shader-f16"], SHAPES)).failure ?? "passed", /differ from the plain kernels'/);
  } finally {
    context.device.destroy();
  }
});
