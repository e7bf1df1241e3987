// Train a preset on a text file with the WebGPU backend through Dawn (npm
// webgpu) and write a .tinygpt: the same engine code the browser runs.
//
//   node dist-cli/train.js --preset tiny --corpus path.txt --steps 500 --out model.tinygpt
//
// Options: --batch-size N, --lr X, --seed N, --warmup-steps N, --eval-every N
// (0: never), --eval-batches N, --no-optimizer (leave Adam m/v out of the file),
// --f16 (weights stored as f16, as gallery files are),
// --stats path.json (timings, every step's loss, the levers' verdicts: for the
// benchmarks), --profile (after saving, time one more step dispatch by dispatch
// and list the ops by time), --quiet.
// GPU levers, as the app runs them: each shipped one is gated on this adapter and
// runs if it passes. --levers none trains on the plain f32 kernels; --levers a,b
// gates only those (an experimental one too), and stops if one does not pass (a figure for a lever that did not run is
// no figure). --dawn-f16-toggle sets Dawn's vulkan_enable_f16_on_nvidia adapter
// toggle, for our benchmark hosts: Dawn hides shader-f16 on NVIDIA without it
// (a browser decides that itself; the app never sets a toggle).

import { readFileSync, writeFileSync } from "node:fs";
import { basename } from "node:path";
import { parseArgs } from "node:util";
import { create, globals } from "webgpu";
import { GpuBackend, createBackend, createTrainer, preset, writeCheckpoint } from "../engine/index";
import { BUILT_LEVERS, GPU_LEVERS, type GpuLever, gpuLevers, leverFeatures } from "../levers/gpu";
import { splitCorpus, trainBatch } from "../engine/data";

const USAGE = "usage: node dist-cli/train.js --preset tiny --corpus path.txt --steps N --out model.tinygpt [--batch-size N] [--lr X] [--seed N] [--warmup-steps N] [--eval-every N] [--eval-batches N] [--no-optimizer] [--f16] [--levers all|none|id,id] [--dawn-f16-toggle] [--stats path.json] [--profile] [--quiet]";
// Steps issued ahead of the one being read back; the backend bounds GPU work in flight itself.
const WINDOW = 8;
// Steps before timing starts: pipeline warm-up and first-use costs are not throughput.
const WARMUP_STEPS = 3;

/** What a lever needs of an adapter, in words. */
const needs = (lever: GpuLever) => [...leverFeatures(lever), ...(lever.wgslFeatures ?? []), ...("forAdapter" in lever ? ["a table for this adapter"] : [])].join(", ");

function fail(message: string): never {
  console.error(`train: ${message}\n${USAGE}`);
  process.exit(2);
}

function int(name: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) fail(`--${name} must be a non-negative integer, got ${JSON.stringify(value)}`);
  return n;
}

async function main(): Promise<void> {
  let args;
  try {
    args = parseArgs({
      options: {
        preset: { type: "string" }, corpus: { type: "string" }, steps: { type: "string" }, out: { type: "string" },
        "batch-size": { type: "string" }, lr: { type: "string" }, seed: { type: "string" }, "warmup-steps": { type: "string" },
        "eval-every": { type: "string" }, "eval-batches": { type: "string" }, "no-optimizer": { type: "boolean" }, f16: { type: "boolean" },
        stats: { type: "string" }, quiet: { type: "boolean" }, profile: { type: "boolean" },
        levers: { type: "string" }, "dawn-f16-toggle": { type: "boolean" },
      },
    }).values;
  } catch (e) {
    fail((e as Error).message);
  }
  if (!args.preset || !args.corpus || !args.steps || !args.out) fail("--preset, --corpus, --steps and --out are required");
  let p;
  try {
    p = preset(args.preset);
  } catch (e) {
    fail((e as Error).message);
  }
  const steps = int("steps", args.steps, 0);
  const train = {
    ...p.train,
    batch_size: int("batch-size", args["batch-size"], p.train.batch_size) || fail("--batch-size must be positive"),
    seed: int("seed", args.seed, p.train.seed),
    warmup_steps: int("warmup-steps", args["warmup-steps"], p.train.warmup_steps),
  };
  if (args.lr !== undefined) {
    train.lr = Number(args.lr);
    if (!(train.lr > 0)) fail(`--lr must be a positive number, got ${JSON.stringify(args.lr)}`);
  }
  const evalEvery = int("eval-every", args["eval-every"], 100);
  const evalBatches = int("eval-batches", args["eval-batches"], 8) || 1;
  const log = args.quiet ? () => {} : (s: string) => console.log(s);

  let corpus: Uint8Array;
  try {
    corpus = readFileSync(args.corpus);
  } catch (e) {
    fail(`cannot read the corpus: ${(e as Error).message}`);
  }

  const wanted = args.levers ?? "all";
  const known = BUILT_LEVERS.map((l) => l.id);
  const chosen = wanted === "all" ? GPU_LEVERS.map((l) => l.id) : wanted === "none" ? [] : wanted.split(",");
  for (const id of chosen) if (!known.includes(id)) fail(`--levers: no GPU lever ${JSON.stringify(id)} (there are: ${known.join(", ") || "none"})`);

  Object.assign(globalThis, globals);
  const gpu = create(args["dawn-f16-toggle"] ? ["enable-dawn-features=allow_unsafe_apis,vulkan_enable_f16_on_nvidia"] : []);
  const adapter = await gpu.requestAdapter({ powerPreference: "high-performance" });
  if (!adapter) fail("Dawn found no WebGPU adapter (on Linux set VK_ICD_FILENAMES to a Vulkan driver)");
  const gated = await gpuLevers({ gpu }, adapter, BUILT_LEVERS.filter((l) => chosen.includes(l.id)), gpu.wgslLanguageFeatures);
  for (const [id, v] of Object.entries(gated.verdicts)) log(`lever ${id}: ${v.pass ? "on" : "off"}, ${v.reason}`);
  if (wanted !== "all") {
    const off = chosen.filter((id) => !gated.verdicts[id]?.pass);
    if (off.length) fail(`--levers ${wanted}: ${off.map((id) => `${id} ${gated.verdicts[id] ? "did not pass its gate" : `needs what this adapter lacks (${needs(BUILT_LEVERS.find((l) => l.id === id)!)})`}`).join("; ")}`);
  }
  const levers = Object.keys(gated.verdicts).filter((id) => gated.verdicts[id].pass);
  const backend = await createBackend("webgpu", p.model, train, { gpu, adapter, kernels: gated.kernels, features: gated.features, levers });
  const trainer = await createTrainer(backend, p.model, train, { producer: "tinygpt-node" });
  await trainer.setCorpus(basename(args.corpus), corpus);
  const tokensPerStep = train.batch_size * p.model.block_size;
  log(`train: ${p.label} on ${backend.device}${backend.paths.length ? ` (+${backend.paths.join(", +")})` : ", plain f32 kernels"}, ${corpus.length} corpus bytes, ${steps} steps of ${tokensPerStep} tokens`);
  const losses: number[] = [];

  const t0 = performance.now();
  let timedFrom = t0;
  let val: number | undefined;
  let last = NaN;
  const pending: Promise<number>[] = [];
  for (let issued = 0, done = 0; done < steps; ) {
    // Issue ahead, but never past the next evaluation: it sees exactly `done` steps.
    const limit = evalEvery > 0 ? Math.min(steps, (Math.floor(done / evalEvery) + 1) * evalEvery) : steps;
    while (issued < limit && pending.length < WINDOW) {
      pending.push(trainer.trainStep());
      issued++;
    }
    last = await pending.shift()!;
    losses.push(last);
    done++;
    if (!Number.isFinite(last)) throw new Error(`the loss became ${last} at step ${done}; stopping (lower --lr?)`);
    if (done === Math.min(WARMUP_STEPS, steps)) timedFrom = performance.now();
    const evalNow = evalEvery > 0 && (done % evalEvery === 0 || done === steps);
    if (evalNow) val = await trainer.evaluate(evalBatches);
    if (evalNow || done % 50 === 0 || done === steps) {
      const s = (performance.now() - t0) / 1000;
      log(`step ${String(done).padStart(6)}  loss ${last.toFixed(4)}${evalNow ? `  val ${val!.toFixed(4)}` : ""}  ${s.toFixed(1)} s`);
    }
  }
  const elapsed = (performance.now() - timedFrom) / 1000;
  const timedSteps = Math.max(0, steps - Math.min(WARMUP_STEPS, steps));
  const tokensPerSec = timedSteps > 0 ? (timedSteps * tokensPerStep) / elapsed : NaN;

  writeFileSync(args.out, writeCheckpoint(await trainer.checkpoint(!args["no-optimizer"]), { producer: "tinygpt-node", f16: args.f16 }));
  log(`train: wrote ${args.out}; ${tokensPerSec.toFixed(0)} tokens/s over the last ${timedSteps} steps`);
  let profile: { op: string; dispatches: number; workgroups: number; ms: number }[] | undefined;
  if (args.profile && backend instanceof GpuBackend) {
    const { x, y } = trainBatch(splitCorpus(corpus, p.model.block_size), train.batch_size, p.model.block_size, train.seed, trainer.step);
    const byOp = new Map<string, { op: string; dispatches: number; workgroups: number; ms: number }>();
    for (const d of await backend.profileStep(x, y, train.lr)) {
      const key = `${d.op} ${d.workgroups}`;
      const row = byOp.get(key) ?? { op: d.op, dispatches: 0, workgroups: d.workgroups, ms: 0 };
      row.dispatches++;
      row.ms += d.ms;
      byOp.set(key, row);
    }
    profile = [...byOp.values()].sort((a, b) => b.ms - a.ms);
    const total = profile.reduce((a, r) => a + r.ms, 0);
    log(`profile: one step dispatch by dispatch, ${total.toFixed(1)} ms in all (each dispatch waited on alone)`);
    for (const r of profile.slice(0, 15)) log(`  ${r.ms.toFixed(2).padStart(9)} ms  ${String(r.dispatches).padStart(3)} x ${r.op} (${r.workgroups} workgroups)`);
  }
  if (args.stats) {
    const stats = { preset: p.id, device: backend.device, levers: backend.paths, verdicts: gated.verdicts, losses, steps, timed_steps: timedSteps, batch_size: train.batch_size, block_size: p.model.block_size, tokens_per_s: tokensPerSec, ms_per_step: timedSteps > 0 ? (1000 * elapsed) / timedSteps : NaN, final_loss: last, val_loss: val ?? null, profile };
    writeFileSync(args.stats, JSON.stringify(stats, null, 2) + "\n");
  }
  trainer.dispose();
}

main().then(
  () => process.exit(0),
  (e) => {
    console.error(`train: ${(e as Error).message}`);
    process.exit(1);
  },
);
