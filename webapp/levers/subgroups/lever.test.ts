// The subgroups lever on Dawn: its table passes the GPU gate at this adapter's
// subgroup size (4 on SwiftShader, 32 on the H200), two runs of a step are
// bit for bit the same, and the gate refuses its reductions broken on purpose:
// one that keeps only the first subgroup's partial, and one that assumes 32
// invocations a subgroup (refused where subgroups are smaller). A GPU whose
// WGSL lacks subgroup_id never tries it. The conformance suite runs it in
// engine/test/gpu.test.ts (every GPU_LEVERS entry). The checks share one
// device, so the plain kernels compile once.

import assert from "node:assert/strict";
import { test } from "node:test";
import { gpu, noGpu } from "../../engine/test/dawn";
import { createGpuBackend } from "../../engine/gpu/backend";
import { requestGpu } from "../../engine/gpu/device";
import type { Kernel } from "../../engine/gpu/kernels";
import { defaultTrainConfig, paramCount } from "../../engine/model";
import { Rng } from "../../engine/rng";
import { configureGates } from "../gate";
import { GATE_SHAPES, gpuLevers, kernelTableAgrees, tableOn } from "../gpu";
import { SUBGROUPS } from "./lever";

const adapter = noGpu ? null : await gpu.requestAdapter();
const skip = noGpu ?? (adapter && tableOn(SUBGROUPS, adapter, gpu.wgslLanguageFeatures) ? false : "the adapter lacks subgroups or WGSL lacks subgroup_id");

/** The lever's table with `from` replaced by `to` in the shared reduction (present in every variant). */
function mutated(from: string, to: string): typeof SUBGROUPS.kernels {
  return Object.fromEntries(Object.entries(SUBGROUPS.kernels).map(([op, k]) => {
    assert.ok(k!.source.includes(from), `${op}'s source has no ${from}`);
    return [op, { ...k, source: k!.source.replace(from, to) } as Kernel];
  }));
}

test("subgroups: the gate passes the table, refuses a reduction that drops subgroups or assumes 32 a subgroup; runs repeat bit for bit", { skip }, async () => {
  const size = `${adapter!.info.subgroupMinSize}..${adapter!.info.subgroupMaxSize}`;
  const context = await requestGpu(gpu, adapter, ["subgroups"]);
  try {
    const good = await kernelTableAgrees({ context }, SUBGROUPS.kernels, ["subgroups"]);
    assert.equal(good.failure, null, `at subgroup size ${size}: ${JSON.stringify(good.errors)}`);

    const firstOnly = mutated("i < l.count;", "i < 1u;");
    assert.match((await kernelTableAgrees({ context }, firstOnly, ["subgroups"])).failure ?? "passed", /differ from the plain kernels'/);
    const assumes32 = mutated("i += l.size", "i += 32u");
    const verdict = (await kernelTableAgrees({ context }, assumes32, ["subgroups"])).failure;
    const largest = adapter!.info.subgroupMaxSize;
    if (largest !== undefined && largest < 32) assert.match(verdict ?? "passed", /differ from the plain kernels'/, `at subgroup size ${size}`);

    const { model, batch } = GATE_SHAPES[0];
    const rng = new Rng(20261202);
    const params = Float32Array.from({ length: paramCount(model) }, () => rng.normal() * 0.3);
    const x = Int32Array.from({ length: batch * model.block_size }, () => rng.int(model.vocab_size));
    const y = Int32Array.from({ length: batch * model.block_size }, () => rng.int(model.vocab_size));
    const b = await createGpuBackend(model, defaultTrainConfig(batch, 1e-3), { context, kernels: SUBGROUPS.kernels });
    try {
      const run = async () => {
        await b.setState({ params, step: 0 });
        const loss = await b.trainStep(x, y, 1e-3);
        const { params: after, m } = await b.getState();
        return { loss: Float32Array.of(loss), params: after, m: m! };
      };
      const [one, two] = [await run(), await run()];
      for (const what of ["loss", "params", "m"] as const) {
        assert.deepEqual(new Uint32Array(two[what].buffer), new Uint32Array(one[what].buffer), `${what} differ between two runs`);
      }
    } finally {
      b.dispose();
    }
  } finally {
    context.device.destroy();
  }
});

test("subgroups: a GPU whose WGSL lacks subgroup_id gives the lever no verdict", { skip: noGpu ?? false }, async () => {
  configureGates({});
  const out = await gpuLevers({ gpu }, adapter!, [SUBGROUPS], new Set());
  assert.deepEqual(out.verdicts, {});
  assert.deepEqual(out.kernels, {});
});
