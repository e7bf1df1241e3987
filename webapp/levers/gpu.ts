// The GPU half of the lever framework. A GPU lever is a kernel table: the ops
// it replaces (kernels.ts Op -> Kernel, keeping each op's bindings and params)
// and the adapter feature it needs. Its gate, kernelTableAgrees, trains small
// models twice on this adapter, once on the plain kernels and once with the
// lever's, and compares what a step computes: the logits, the loss, and the
// gradients (after one step from zero moments, Adam's m is (1 - beta1) times
// the clipped gradient and v (1 - beta2) times its square), each within
// facts.gate. A table may keep state of its own beside the parameters
// (storage-f16's packed mirror of them): the logits after that step, which
// moved every weight by about STEP_LR, must match the plain kernels' on the
// very parameters the variant's step left, so a variant whose state fell
// behind is refused. Then, on the first (aligned) shape, the step is continued
// to facts.gate.check_steps steps on one fixed batch, whose losses must stay
// within curve_rel_tolerance of the plain run's (one shape's curve keeps the
// check to seconds). The
// worker passes the tables that passed to the WebGPU backend (its `kernels`
// option) with the features they need. A lever that needs WGSL language
// features (`wgslFeatures`) is tried only where the GPU lists them
// (wgslLanguageFeatures).

import { createGpuBackend } from "../engine/gpu/backend";
import { type GpuContext, describeAdapter, requestGpu } from "../engine/gpu/device";
import { type AnyOp, F32_KERNELS, type Kernel, type KernelTable, type Op } from "../engine/gpu/kernels";
import { defaultTrainConfig, initParams, tensorLayout } from "../engine/model";
import { Rng } from "../engine/rng";
import facts from "../../tinygpt/facts.json";
import { GATE_SHAPES, type GateShape } from "./shapes";

export { GATE_SHAPES, type GateShape };
import { type GateErrors, type Outcome, type Verdict, type VerdictKey, browserVersion, gate, gateErrors, gradientError, remembered, shaderHash, withinBudget, worst } from "./gate";
import { COOP_ATTENTION } from "./coop-attention/lever";
import { COOP_MATRIX } from "./coop-matrix/lever";
import { SHADER_F16 } from "./shader-f16/lever";
import { STORAGE_F16 } from "./storage-f16/lever";
import { SUBGROUPS } from "./subgroups/lever";
import { type Spelling, respelled, spelledFor } from "./coop-matrix/spelling";

interface LeverBase {
  /** Its facts.levers id. */
  id: string;
  /** The adapter feature its kernels need (facts.levers feature), or null. */
  feature: GPUFeatureName | null;
  /** Other adapter features its kernels need (coop-matrix's f16 operands and subgroup builtins). */
  alsoNeeds?: GPUFeatureName[];
  /** The WGSL language features its shaders require (`requires`), which the GPU (navigator.gpu.wgslLanguageFeatures) must offer. */
  wgslFeatures?: string[];
  /** Models whose training step runs every op it replaces, instead of GATE_SHAPES (the gate refuses a table it cannot exercise). */
  shapes?: GateShape[];
  /** Its kernels round operands to f16 (sums stay f32): the backend conformance suite holds its table to facts.conformance.f16. */
  f16?: boolean;
  /** What it runs on an adapter it has a table for, in words (its verdict's `detail`). */
  describe?: (adapter: GPUAdapter) => string;
  /**
   * Its WGSL is spelt differently by different browsers: a kernel in the other spelling
   * (coop-matrix/spelling.ts). Its table is gated in the spelling a verdict is remembered for, else
   * in the first one the device compiles.
   */
  respell?: (kernel: Kernel) => Kernel;
}

/** A lever and its table: the same on every adapter (`kernels`), or made for each (`forAdapter`, null where it cannot run there). */
export type GpuLever = LeverBase & ({ kernels: Partial<KernelTable> } | { forAdapter: (adapter: GPUAdapter) => Partial<KernelTable> | null });


// The GPU levers, in facts.levers order; each lives in webapp/levers/<id>/.
export const GPU_LEVERS: GpuLever[] = [SUBGROUPS, COOP_MATRIX];

/**
 * Levers built but not shipped (facts.levers status "experimental"): the app never runs them; the
 * benchmarks and the CLI take them when named. On the H200 through Dawn (content/data/): storage-f16
 * passes its gate and its release curve but trains slower than the plain kernels (unpacking the
 * halves costs more than their bytes save); shader-f16 fails its gate (its gradients); coop-attention
 * passes its gate but trains slower than the plain kernels (2026-12-04: each of its three ops slower than their _64 ones).
 */
export const EXPERIMENTAL_LEVERS: GpuLever[] = [STORAGE_F16, SHADER_F16, COOP_ATTENTION];

/** Every lever built, shipped or experimental: what a benchmark may name. */
export const BUILT_LEVERS = [...GPU_LEVERS, ...EXPERIMENTAL_LEVERS];


const LR = 1e-3;
// The first step's learning rate: Adam's first step moves each weight by about this (m and v do
// not depend on it), far more than f16 rounding, so logits from stale weights cannot pass.
const STEP_LR = 0.05;

/**
 * Where a check runs: a fresh device from `gpu` (what the worker does, so a
 * broken variant cannot upset the next lever's check), or a device the caller
 * shares across checks (tests: the plain kernels compile once).
 */
export type GateDevice = { gpu: GPU } | { context: GpuContext };

/** The largest relative difference between two loss curves, as a share of facts.gate.curve_rel_tolerance. */
function curveShare(got: number[], want: number[]): number {
  let share = 0;
  for (let i = 0; i < want.length; i++) {
    const d = Math.abs(got[i] - want[i]) / Math.abs(want[i]) / facts.gate.curve_rel_tolerance;
    share = Number.isNaN(d) ? NaN : Math.max(share, d);
  }
  return share;
}

const CURVE = `${facts.gate.check_steps}-step loss`;

/**
 * Whether the kernel table `kernels` trains every shape like the plain kernels
 * do on this adapter (failure null), else why not, with the worst errors measured.
 */
export async function kernelTableAgrees(on: GateDevice, kernels: Partial<KernelTable>, features: GPUFeatureName[] = [], shapes = GATE_SHAPES): Promise<Outcome> {
  const unexercised = new Set(Object.keys(kernels) as AnyOp[]);
  const measured: GateErrors[] = [];
  let failure: string | null = null;
  // One device for both sides: the plain kernels compile once, the variants only what they replace.
  await onDevice(on, features, async (context) => {
    for (const [i, { model, batch }] of shapes.entries()) {
      if (failure) break;
      const train = defaultTrainConfig(batch, LR);
      const plain = await createGpuBackend(model, train, { context });
      const variant = await createGpuBackend(model, train, { context, kernels }).catch((e) => {
        plain.dispose();
        throw e;
      });
      try {
        for (const op of variant.ops) unexercised.delete(op);
        const rng = new Rng(20261201);
        // The model's own initialisation, so the gradients are spread as in training: with every
        // weight drawn wide, a few gradients dwarf the rest, and f16-rounded weights (storage-f16)
        // put those few past a budget set by the mean.
        const params = initParams(model, 20261201);
        const n = batch * model.block_size;
        const x = Int32Array.from({ length: n }, () => rng.int(model.vocab_size));
        const y = Int32Array.from({ length: n }, () => rng.int(model.vocab_size));
        const steps = i === 0 ? facts.gate.check_steps : 1;
        const run = async (b: typeof plain) => {
          await b.setState({ params, step: 0 });
          const logits = await b.prefill(x.subarray(0, model.block_size));
          const loss = await b.loss(x, y);
          const curve = [await b.trainStep(x, y, STEP_LR)];
          const { m, v, params: after } = await b.getState();
          const stepped = await b.prefill(x.subarray(0, model.block_size));
          while (curve.length < steps) curve.push(await b.trainStep(x, y, LR));
          return { logits, loss: Float32Array.of(loss, curve[0]), m: m!, v: v!, after, stepped, curve };
        };
        const [want, got] = [await run(plain), await run(variant)];
        const shape = `${model.n_layer}x${model.n_embd}x${model.n_head}, context ${model.block_size}, batch ${batch}`;
        for (const what of ["logits", "loss"] as const) {
          const errors = gateErrors(got[what], want[what]);
          measured.push(errors);
          if (!failure && !withinBudget(errors)) failure = `its ${what} differ from the plain kernels' (${shape})`;
        }
        // Each parameter's gradient at its own scale (a LayerNorm gain's is far larger than a sparse
        // embedding's), by its L2 error (gate.ts gradientError), noise tensors aside.
        for (const what of ["m", "v"] as const) {
          for (const t of tensorLayout(model).filter((t) => !t.noiseGradient)) {
            const errors = gradientError(got[what].subarray(t.offset, t.offset + t.size), want[what].subarray(t.offset, t.offset + t.size));
            measured.push(errors);
            if (!failure && !withinBudget(errors)) failure = `its gradients (Adam ${what} of ${t.name}) differ from the plain kernels' (${shape})`;
          }
        }
        await plain.setState({ params: got.after, step: 1 });
        const stepped = gateErrors(got.stepped, await plain.prefill(x.subarray(0, model.block_size)));
        measured.push(stepped);
        if (!failure && !withinBudget(stepped)) failure = `its logits after a step differ from the plain kernels' on the parameters it left (${shape})`;
        const curve = curveShare(got.curve, want.curve);
        if (steps > 1) measured.push({ [CURVE]: curve });
        if (!failure && !(curve < 1)) failure = `its ${CURVE} on a fixed batch strays from the plain kernels' (${shape})`;
      } finally {
        plain.dispose();
        variant.dispose();
      }
    }
  });
  if (!failure && unexercised.size) failure = `the gate's shapes never run ${[...unexercised].join(", ")}`;
  return { failure, errors: worst(...measured) };
}

/**
 * The key a GPU table's verdict is remembered under: the adapter, the browser, and each kernel's
 * entry, constants and module beside the plain module it is held to (none for an op it adds).
 */
export async function tableKey(adapter: GPUAdapter, kernels: Partial<KernelTable>): Promise<VerdictKey> {
  const sources = Object.entries(kernels).map(([op, k]) => `${op}\0${k!.entry}\0${JSON.stringify(k!.constants)}\0${k!.source}\0${F32_KERNELS[op as Op]?.source ?? ""}`).sort();
  return { adapter: describeAdapter(adapter), browser: browserVersion(), shaders: await shaderHash(...sources) };
}

/** `use` on the shared device, or on a fresh one with `features` that is destroyed after. */
async function onDevice<T>(on: GateDevice, features: GPUFeatureName[], use: (context: GpuContext) => Promise<T>): Promise<T> {
  const context = "context" in on ? on.context : await requestGpu(on.gpu, undefined, features);
  try {
    return await use(context);
  } finally {
    if (!("context" in on)) context.device.destroy();
  }
}

/**
 * A lever's table and the key its verdict goes under. A respellable one's is in the spelling its
 * remembered verdict was reached in, so that a later visit compiles nothing before its gate answers;
 * else in the first spelling the device compiles (spelledFor), or as written where no device can
 * be had for it (its gate's check says why).
 */
async function spelt(lever: GpuLever, on: GateDevice, adapter: GPUAdapter, kernels: Partial<KernelTable>): Promise<{ kernels: Partial<KernelTable>; spelling: Spelling; key: VerdictKey }> {
  const key = await tableKey(adapter, kernels);
  const respell = lever.respell;
  if (!respell || (await remembered(lever.id, key))) return { kernels, spelling: "templated", key };
  const older = respelled(kernels, respell);
  const olderKey = await tableKey(adapter, older);
  if (await remembered(lever.id, olderKey)) return { kernels: older, spelling: "older", key: olderKey };
  const chosen = await onDevice(on, leverFeatures(lever), (context) => spelledFor(context.device, kernels, respell)).catch(() => ({ kernels, spelling: "templated" as const }));
  return chosen.spelling === "older" ? { kernels: older, spelling: "older", key: olderKey } : { kernels, spelling: "templated", key };
}

/** What the WebGPU backend runs on an adapter: every GPU lever's verdict, and the tables and features of those that passed. */
export interface GpuLevers {
  verdicts: Record<string, Verdict>;
  kernels: Partial<KernelTable>;
  features: GPUFeatureName[];
}

/** Every adapter feature a lever's kernels need. */
export const leverFeatures = (lever: GpuLever): GPUFeatureName[] => [...(lever.feature ? [lever.feature] : []), ...(lever.alsoNeeds ?? [])];

/**
 * A lever's table on an adapter, in a browser whose WGSL has the language features `wgsl`, or
 * null where it cannot run there at all: a feature missing, or no table for this adapter.
 */
export function tableOn(lever: GpuLever, adapter: GPUAdapter, wgsl: ReadonlySet<string>): Partial<KernelTable> | null {
  if (!leverFeatures(lever).every((f) => adapter.features.has(f)) || !(lever.wgslFeatures ?? []).every((f) => wgsl.has(f))) return null;
  return "kernels" in lever ? lever.kernels : lever.forAdapter(adapter);
}

/**
 * The GPU levers gated on the adapter `on` offers, described by `adapter`, in a
 * browser whose WGSL has the language features `wgsl` (levers either lacks get
 * no verdict: they were never possible here).
 */
export async function gpuLevers(on: GateDevice, adapter: GPUAdapter, levers = GPU_LEVERS, wgsl: ReadonlySet<string> = globalThis.navigator?.gpu?.wgslLanguageFeatures ?? new Set()): Promise<GpuLevers> {
  const out: GpuLevers = { verdicts: {}, kernels: {}, features: [] };
  for (const lever of levers) {
    const written = tableOn(lever, adapter, wgsl);
    if (!written) continue;
    const features = leverFeatures(lever);
    const { kernels, spelling, key } = await spelt(lever, on, adapter, written);
    const verdict = await gate(lever.id, key, () => kernelTableAgrees(on, kernels, features, lever.shapes));
    const detail = [lever.describe?.(adapter), spelling === "older" ? "in WGSL's older subgroup-matrix spelling" : null].filter(Boolean).join(", ");
    out.verdicts[lever.id] = detail ? { ...verdict, detail } : verdict;
    if (verdict.pass) {
      Object.assign(out.kernels, kernels);
      out.features.push(...features);
    }
  }
  return out;
}
