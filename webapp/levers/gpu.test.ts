// The GPU levers' gate and its mutation proof, on Dawn: a kernel table that
// computes the same step passes (the 128-wide vec4 matmul in place of the
// 64-wide one), a table broken on purpose is refused (a matmul that multiplies
// by the transposed weights), and so is a table replacing an op the gate's
// shapes never run; the backend gets only the tables that passed, and the
// verdicts are remembered. A table that compiles only respelt (as the matrix
// levers' do in a browser that knows only the older subgroup-matrix spelling)
// is gated and run respelt. The checks share one device, so the plain kernels
// compile once (SwiftShader takes about a minute for them).

import assert from "node:assert/strict";
import { test } from "node:test";
import { gpu, noGpu } from "../engine/test/dawn";
import { requestGpu } from "../engine/gpu/device";
import { F32_KERNELS } from "../engine/gpu/kernels";
import { type StoredVerdict, configureGates } from "./gate";
import { type GpuLever, gpuLevers } from "./gpu";

// Besides the real variant, unchanged kernels for ops only one gate shape runs each
// (the aligned shape's vec4 matmul, the unaligned one's scalar matmuls), so passing
// shows the shapes run both paths.
const same = {
  id: "same",
  feature: null,
  kernels: { matmul_vec4_nn_64: F32_KERNELS.matmul_vec4_nn, matmul_nn: F32_KERNELS.matmul_nn, matmul_tn: F32_KERNELS.matmul_tn },
  describe: (adapter: GPUAdapter) => `the 128 block on ${adapter.info.vendor}`,
} satisfies GpuLever;
const transposed: GpuLever = { id: "transposed", feature: null, kernels: { matmul_vec4_nn_64: F32_KERNELS.matmul_vec4_nt_64 } };
const unexercised: GpuLever = { id: "unexercised", feature: null, kernels: { matmul_vec4_nn: F32_KERNELS.matmul_vec4_nn_64 } };
const unoffered: GpuLever = { id: "unoffered", feature: "no-such-feature" as GPUFeatureName, kernels: same.kernels };
const MISSPELT = "misspelt\n";
const respelt: GpuLever = {
  id: "respelt",
  feature: null,
  kernels: { matmul_vec4_nn_64: { ...F32_KERNELS.matmul_vec4_nn, source: MISSPELT + F32_KERNELS.matmul_vec4_nn.source } },
  respell: (k) => ({ ...k, source: k.source.replace(MISSPELT, "") }),
};

test("GPU levers: the same step passes, Wᵀ or an op the gate never runs is refused; only what passed reaches the backend", { skip: noGpu ?? false }, async () => {
  const adapter = (await gpu.requestAdapter())!;
  const context = await requestGpu(gpu);
  let saved: Record<string, StoredVerdict> = {};
  const store = { load: async () => structuredClone(saved), save: async (v: Record<string, StoredVerdict>) => void (saved = structuredClone(v)) };
  try {
    configureGates({ store });
    const out = await gpuLevers({ context }, adapter, [same, transposed, unexercised, unoffered, respelt]);
    assert.deepEqual(Object.keys(out.verdicts), ["same", "transposed", "unexercised", "respelt"], "a lever whose feature the adapter lacks gets no verdict");
    assert.equal(out.verdicts.respelt.pass, true, out.verdicts.respelt.reason);
    assert.equal(out.verdicts.respelt.detail, "in WGSL's older subgroup-matrix spelling");
    assert.equal(out.verdicts.same.pass, true, out.verdicts.same.reason);
    assert.equal(out.verdicts.same.detail, `the 128 block on ${adapter.info.vendor}`, "a lever that describes what it runs here says so in its verdict");
    assert.equal(out.verdicts.transposed.detail, undefined);
    assert.equal(out.verdicts.transposed.pass, false);
    assert.match(out.verdicts.transposed.reason, /differ from the plain kernels'/);
    assert.equal(out.verdicts.unexercised.pass, false);
    assert.match(out.verdicts.unexercised.reason, /never run matmul_vec4_nn$/);
    assert.deepEqual(out.kernels, same.kernels, "the respelt table (the same kernel as written) in place of its misspelt one");
    assert.deepEqual(out.features, []);

    // The next visit: every verdict remembered, no check runs and nothing compiles, not even the
    // respelt table's spelling (no device given).
    configureGates({ store });
    const again = await gpuLevers({ gpu: null as unknown as GPU }, adapter, [same, transposed, respelt]);
    assert.ok(Object.values(again.verdicts).every((v) => v.cached));
    assert.equal(again.verdicts.same.detail, out.verdicts.same.detail);
    assert.equal(again.verdicts.respelt.detail, "in WGSL's older subgroup-matrix spelling");
    assert.deepEqual(again.kernels, same.kernels, "the remembered respelt table, as on the first visit");
    configureGates({ store, forceFail: ["same"] });
    assert.deepEqual((await gpuLevers({ context }, adapter, [same])).kernels, {});
  } finally {
    configureGates({});
    context.device.destroy();
  }
});
