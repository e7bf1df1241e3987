// Train a preset on a text file with the WebGPU backend through Dawn (npm
// webgpu) and write a .tinygpt: the same engine code the browser runs.
//
//   node dist-cli/train.js --preset tiny --corpus path.txt --steps 500 --out model.tinygpt
//
// Options: --init FILE (continue from a .tinygpt of the preset's shape, its Adam state
// included when saved: --steps more steps, at this run's --lr, which is how a run is
// annealed), --batch-size N, --lr X, --seed N, --warmup-steps N, --eval-every N
// (0: never), --eval-batches N, --no-optimizer (leave Adam m/v out of the file),
// --f16 (weights stored as f16), --val-metric (at the end, the validation metric,
// facts.json data.validation_metric: the loss to compare models by), --keep-best (at each
// evaluation also measure the metric, and write --out whenever it is the best yet: the file
// ends with the best model seen, early stopping as the gallery's models are trained),
// --stats path.json (timings, every step's loss, the levers' verdicts: for the
// benchmarks), --profile (after saving, time one more step dispatch by dispatch,
// by GPU timestamps where the adapter has them, and list the ops by time), --quiet;
// --levers and --dawn-f16-toggle as webapp/cli/gpu.ts says.
//
// Fine-tuning: --init BASE --lora trains a LoRA adapter on the frozen BASE and writes the
// adapter file (the app's Fine-tune): --lora-rank N, --lora-alpha X, --lora-targets q,v
// (facts.json lora's defaults; its lr too unless --lr), or --adapter FILE to continue one
// made for BASE, with its settings. The stats then hold both the adapter's and the backend's sizes.

import { readFileSync, writeFileSync } from "node:fs";
import { basename } from "node:path";
import { parseArgs } from "node:util";
import { type Backend, type Checkpoint, GpuBackend, createBackend, createTrainer, fineTuneTrainer, loadTrainer, preset, readCheckpoint, writeCheckpoint } from "../engine/index";
import { LORA, type LoraSettings, PROJECTIONS, adapterLayout } from "../engine/lora";
import { splitCorpus, trainBatch } from "../engine/data";
import { type Command, command } from "./command";
import { dawnGpu } from "./gpu";

const CLI: Command = command("train", "usage: node dist-cli/train.js --preset tiny --corpus path.txt --steps N --out model.tinygpt [--init FILE [--lora [--lora-rank N] [--lora-alpha X] [--lora-targets q,v] | --adapter FILE]] [--batch-size N] [--lr X] [--seed N] [--warmup-steps N] [--eval-every N] [--eval-batches N] [--no-optimizer] [--f16] [--val-metric] [--keep-best] [--levers all|none|id,id] [--dawn-f16-toggle] [--stats path.json] [--profile] [--quiet]");
// Annotated, so that the compiler knows a call to it does not return.
const fail: (message: string) => never = CLI.fail;
const { number: int, run } = CLI;
// Steps issued ahead of the one being read back; the backend bounds GPU work in flight itself.
const WINDOW = 8;
// Steps before timing starts: pipeline warm-up and first-use costs are not throughput.
const WARMUP_STEPS = 3;

async function main(): Promise<void> {
  let args;
  try {
    args = parseArgs({
      options: {
        preset: { type: "string" }, init: { type: "string" }, corpus: { type: "string" }, steps: { type: "string" }, out: { type: "string" },
        "batch-size": { type: "string" }, lr: { type: "string" }, seed: { type: "string" }, "warmup-steps": { type: "string" },
        "eval-every": { type: "string" }, "eval-batches": { type: "string" }, "no-optimizer": { type: "boolean" }, f16: { type: "boolean" },
        stats: { type: "string" }, quiet: { type: "boolean" }, profile: { type: "boolean" }, "val-metric": { type: "boolean" }, "keep-best": { type: "boolean" },
        levers: { type: "string" }, "dawn-f16-toggle": { type: "boolean" },
        lora: { type: "boolean" }, "lora-rank": { type: "string" }, "lora-alpha": { type: "string" }, "lora-targets": { type: "string" }, adapter: { type: "string" },
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
  const fineTune = !!args.lora || args.adapter !== undefined;
  if (fineTune && !args.init) fail("--lora and --adapter fine-tune a model: name it with --init");
  if (fineTune && args.f16) fail("an adapter's tensors are f32 only: --f16 is for models");
  if (!args.lora && (args["lora-rank"] ?? args["lora-alpha"] ?? args["lora-targets"]) !== undefined) fail("--lora-rank, --lora-alpha and --lora-targets go with --lora");
  if (fineTune) train.lr = LORA.lr;
  if (args.lr !== undefined) {
    train.lr = Number(args.lr);
    if (!(train.lr > 0)) fail(`--lr must be a positive number, got ${JSON.stringify(args.lr)}`);
  }
  const evalEvery = int("eval-every", args["eval-every"], 100);
  const evalBatches = int("eval-batches", args["eval-batches"], 8) || 1;
  const keepBest = !!args["keep-best"];
  if (keepBest && evalEvery === 0) fail("--keep-best needs evaluations (--eval-every above 0)");
  const log = args.quiet ? () => {} : (s: string) => console.log(s);

  let corpus: Uint8Array;
  try {
    corpus = readFileSync(args.corpus);
  } catch (e) {
    fail(`cannot read the corpus: ${(e as Error).message}`);
  }

  let init: Uint8Array | undefined;
  let base: Checkpoint | undefined;
  if (args.init) {
    try {
      init = readFileSync(args.init);
      base = readCheckpoint(init);
    } catch (e) {
      fail(`--init ${args.init}: ${(e as Error).message}`);
    }
    if (JSON.stringify(base.model) !== JSON.stringify(p.model)) fail(`--init ${args.init} is shaped ${JSON.stringify(base.model)}, not as --preset ${p.id}`);
    if (fineTune && base.adapter) fail(`--init ${args.init} is an adapter: fine-tuning needs the model it was made for`);
  }
  let adapter: Checkpoint | null = null;
  let lora: LoraSettings | undefined;
  if (args.adapter) {
    try {
      adapter = readCheckpoint(readFileSync(args.adapter));
    } catch (e) {
      fail(`--adapter ${args.adapter}: ${(e as Error).message}`);
    }
    if (!adapter.adapter) fail(`--adapter ${args.adapter} is a model, not an adapter`);
    lora = { rank: adapter.adapter.rank, alpha: adapter.adapter.alpha, targets: adapter.adapter.targets };
  } else if (args.lora) {
    lora = loraSettings(args["lora-rank"], args["lora-alpha"], args["lora-targets"]);
  }
  const gpu = await dawnGpu(args.levers ?? "all", !!args["dawn-f16-toggle"], fail, log);
  // The profile times each dispatch by the GPU's clock where it can.
  const stamps: GPUFeatureName[] = args.profile && gpu.options.adapter?.features.has("timestamp-query") ? ["timestamp-query"] : [];
  let backend!: Backend;
  const make = async (model = p.model) =>
    (backend = await createBackend("webgpu", model, train, { ...gpu.options, features: [...(gpu.options.features ?? []), ...stamps], ...(lora ? { lora } : {}) }));
  const names = { base: args.init!, adapter: args.adapter ?? "the adapter" };
  const trainer = lora
    ? await fineTuneTrainer(await make(), base!, train, adapter, names, { producer: "tinygpt-node" })
    : init
      ? await loadTrainer(init, (model) => make(model), train, { producer: "tinygpt-node" })
      : await createTrainer(await make(), p.model, train, { producer: "tinygpt-node" });
  await trainer.setCorpus(basename(args.corpus), corpus);
  const tokensPerStep = train.batch_size * p.model.block_size;
  if (lora) log(`train: fine-tuning ${args.init} with a rank-${lora.rank} adapter (alpha ${lora.alpha}) on ${lora.targets.join(", ")}; the model stays frozen`);
  log(`train: ${p.label} on ${backend.device}${backend.paths.length ? ` (+${backend.paths.join(", +")})` : ", plain f32 kernels"}, ${corpus.length} corpus bytes, ${steps} steps of ${tokensPerStep} tokens`);
  const losses: number[] = [];

  const t0 = performance.now();
  let timedFrom = t0;
  let val: number | undefined;
  let last = NaN;
  const pending: Promise<number>[] = [];
  const save = async () =>
    writeFileSync(args.out!, writeCheckpoint(await trainer.checkpoint(!args["no-optimizer"]), { producer: "tinygpt-node", dtype: args.f16 ? "f16" : "f32" }));
  let best = { metric: Infinity, step: 0 };
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
    let metric: number | undefined;
    if (evalNow) {
      val = await trainer.evaluate(evalBatches);
      // No step is in flight here (issuing stops at each evaluation), so the file holds exactly `done` steps.
      if (keepBest && (metric = await trainer.validationLoss()) < best.metric) {
        best = { metric, step: done };
        await save();
      }
    }
    if (evalNow || done % 50 === 0 || done === steps) {
      const s = (performance.now() - t0) / 1000;
      const shown = metric === undefined ? "" : `  metric ${metric.toFixed(4)}${best.step === done ? " (best)" : ""}`;
      log(`step ${String(done).padStart(6)}  loss ${last.toFixed(4)}${evalNow ? `  val ${val!.toFixed(4)}` : ""}${shown}  ${s.toFixed(1)} s`);
    }
  }
  const elapsed = (performance.now() - timedFrom) / 1000;
  const timedSteps = Math.max(0, steps - Math.min(WARMUP_STEPS, steps));
  const tokensPerSec = timedSteps > 0 ? (timedSteps * tokensPerStep) / elapsed : NaN;
  let valMetric: number | undefined;
  if (args["val-metric"]) {
    valMetric = await trainer.validationLoss();
    log(`train: validation metric ${valMetric.toFixed(4)}`);
  }

  if (keepBest) log(`train: ${args.out} holds step ${best.step} of this run, the best validation metric seen, ${best.metric.toFixed(4)}`);
  else await save();
  log(`train: wrote ${args.out}; ${tokensPerSec.toFixed(0)} tokens/s over the last ${timedSteps} steps${keepBest ? " (saves included)" : ""}`);
  let profile: { op: string; dispatches: number; workgroups: number; ms: number }[] | undefined;
  let profileTiming: string | undefined;
  if (args.profile && backend instanceof GpuBackend) {
    const { x, y } = trainBatch(splitCorpus(corpus, p.model.block_size), train.batch_size, p.model.block_size, train.seed, trainer.step);
    const byOp = new Map<string, { op: string; dispatches: number; workgroups: number; ms: number }>();
    const { timing, dispatches } = await backend.profileStep(x, y, train.lr);
    for (const d of dispatches) {
      const key = `${d.op} ${d.workgroups}`;
      const row = byOp.get(key) ?? { op: d.op, dispatches: 0, workgroups: d.workgroups, ms: 0 };
      row.dispatches++;
      row.ms += d.ms;
      byOp.set(key, row);
    }
    profile = [...byOp.values()].sort((a, b) => b.ms - a.ms);
    const total = profile.reduce((a, r) => a + r.ms, 0);
    log(`profile: one step dispatch by dispatch, ${total.toFixed(1)} ms in all (${timing === "gpu" ? "GPU timestamps around each dispatch's pass: the gaps between dispatches are not in it" : "host clock, each dispatch submitted and waited on alone"})`);
    profileTiming = timing;
    for (const r of profile.slice(0, 15)) log(`  ${r.ms.toFixed(2).padStart(9)} ms  ${String(r.dispatches).padStart(3)} x ${r.op} (${r.workgroups} workgroups)`);
  }
  if (args.stats) {
    const stats = { preset: p.id, device: backend.device, levers: backend.paths, verdicts: gpu.verdicts, losses, steps, timed_steps: timedSteps, batch_size: train.batch_size, block_size: p.model.block_size, tokens_per_s: tokensPerSec, ms_per_step: timedSteps > 0 ? (1000 * elapsed) / timedSteps : NaN, final_loss: last, val_loss: val ?? null, val_metric: valMetric ?? null, best: keepBest ? best : null,
      resident_bytes: backend.residentBytes, lora: lora ?? null, adapter_params: lora ? adapterLayout(p.model, lora).reduce((n, t) => n + t.size, 0) : null,
      profile, profile_timing: profileTiming };
    writeFileSync(args.stats, JSON.stringify(stats, null, 2) + "\n");
  }
  trainer.dispose();
}

/** --lora-rank, --lora-alpha, --lora-targets: checked, facts.json lora's defaults where absent. */
function loraSettings(rank: string | undefined, alpha: string | undefined, targets: string | undefined): LoraSettings {
  const r = int("lora-rank", rank, LORA.rank);
  if (r < 1 || r > LORA.max_rank) fail(`--lora-rank must be from 1 to ${LORA.max_rank}, got ${r}`);
  const a = int("lora-alpha", alpha, LORA.alpha, true);
  if (!(a > 0)) fail(`--lora-alpha must be positive, got ${a}`);
  const chosen = targets === undefined ? LORA.targets : targets.split(",");
  const unknown = chosen.filter((t) => !(PROJECTIONS as string[]).includes(t));
  if (unknown.length || !chosen.length) fail(`--lora-targets: ${unknown.length ? `no projection ${unknown.join(", ")}` : "none given"} (there are: ${PROJECTIONS.join(", ")})`);
  return { rank: r, alpha: a, targets: PROJECTIONS.filter((t) => chosen.includes(t)) };
}

run(main);
