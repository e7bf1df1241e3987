// The subgroups lever's check and benchmark on a real GPU, through Dawn in Node:
// its gate at this adapter's subgroup size (kernelTableAgrees on the gate
// shapes), then, at a preset, the ops it replaces timed dispatch by dispatch
// (profileStep) and whole training steps timed back to back, on the plain
// kernels and on its table. Prints one JSON object; exits non-zero when the gate
// refuses the table. Bundle it like the tests (tinygpt.site_build.node.node_bundle):
//   node bench.mjs [preset id, default huge] [steps, default 20]
import { create, globals } from "webgpu";
import { createGpuBackend } from "../../engine/gpu/backend";
import { requestGpu } from "../../engine/gpu/device";
import { paramCount, preset } from "../../engine/model";
import { Rng } from "../../engine/rng";
import { kernelTableAgrees } from "../gpu";
import { SUBGROUPS } from "./lever";

Object.assign(globalThis, globals);
const gpu = create([]);
const adapter = (await gpu.requestAdapter({ powerPreference: "high-performance" }))!;
const context = await requestGpu(gpu, adapter, ["subgroups"]);
const p = preset(process.argv[2] ?? "huge");
const steps = Number(process.argv[3] ?? 20);

const gate = await kernelTableAgrees({ context }, SUBGROUPS.kernels, ["subgroups"]);
const rng = new Rng(1);
const params = Float32Array.from({ length: paramCount(p.model) }, () => rng.normal() * 0.02);
const n = p.train.batch_size * p.model.block_size;
const x = Int32Array.from({ length: n }, () => rng.int(p.model.vocab_size));
const y = Int32Array.from({ length: n }, () => rng.int(p.model.vocab_size));
const replaced = new Set(Object.keys(SUBGROUPS.kernels));

async function time(kernels: typeof SUBGROUPS.kernels) {
  const b = await createGpuBackend(p.model, p.train, { context, kernels });
  try {
    await b.setState({ params, step: 0 });
    for (let i = 0; i < 3; i++) await b.trainStep(x, y, p.train.lr); // compile and warm up
    const t0 = performance.now();
    const pending = Array.from({ length: steps }, () => b.trainStep(x, y, p.train.lr));
    const loss = (await Promise.all(pending)).at(-1)!;
    const msPerStep = (performance.now() - t0) / steps;
    const ops: Record<string, number> = {};
    for (const d of await b.profileStep(x, y, p.train.lr)) if (replaced.has(d.op)) ops[d.op] = (ops[d.op] ?? 0) + d.ms;
    return { ms_per_step: msPerStep, last_loss: loss, replaced_ops_ms: ops };
  } finally {
    b.dispose();
  }
}

const out = {
  adapter: context.description,
  subgroup_size: [adapter.info.subgroupMinSize, adapter.info.subgroupMaxSize],
  gate: gate ?? "pass",
  preset: p.id,
  steps,
  plain: await time({}),
  subgroups: await time(SUBGROUPS.kernels),
};
console.log(JSON.stringify(out, null, 2));
context.device.destroy();
process.exit(gate ? 1 : 0);
