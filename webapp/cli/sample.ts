// Sample from a .tinygpt (or a preset's freshly initialised weights) with the WebGPU backend
// through Dawn, as the app samples: the prompt prefilled once, then one position per byte
// through the KV cache, the bytes chosen on the GPU a batch a submission (webapp/engine/trainer.ts sample).
//
//   node dist-cli/sample.js --model model.tinygpt --prompt "ROMEO:" --tokens 256
//
// Options: --preset id (instead of --model: its initial weights, for timing), --temperature X
// (default 0.8; 0 is greedy), --top-k N, --top-p X (in (0, 1], default 1: no nucleus cut), --seed N,
// --host-draw (each byte chosen on the CPU from logits read back, the path before bytes were chosen
// on the GPU), --full-window (every byte re-runs the whole window, and is chosen on the CPU: the
// path before the KV cache; both kept to measure the gain), --repeat N (sample N times
// after one untimed warm-up, the same seed each time, for a median on a noisy machine),
// --stats path.json (tokens/s and the path: for bench/bench_sample.py), --profile (then the time a
// prefill of half a window takes, and one decoding step half a window in, dispatch by dispatch, and
// what encoding it costs the host), --quiet (no
// text on stdout); --levers and --dawn-f16-toggle as webapp/cli/gpu.ts says.

import { readFileSync, writeFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { GpuBackend, type GPTTrainer, createBackend, createTrainer, loadTrainer, preset } from "../engine/index";
import { type Command, command } from "./command";
import { dawnGpu } from "./gpu";

const CLI: Command = command("sample", "usage: node dist-cli/sample.js (--model model.tinygpt | --preset id) [--prompt TEXT] [--tokens N] [--temperature X] [--top-k N] [--top-p X] [--seed N] [--host-draw] [--full-window] [--repeat N] [--profile] [--levers all|none|id,id] [--dawn-f16-toggle] [--stats path.json] [--quiet]");
// Annotated, so that the compiler knows a call to it does not return.
const fail: (message: string) => never = CLI.fail;
const { number, run } = CLI;

async function main(): Promise<void> {
  let args;
  try {
    args = parseArgs({
      options: {
        model: { type: "string" }, preset: { type: "string" }, prompt: { type: "string" }, tokens: { type: "string" },
        temperature: { type: "string" }, "top-k": { type: "string" }, "top-p": { type: "string" }, seed: { type: "string" }, "full-window": { type: "boolean" }, "host-draw": { type: "boolean" },
        repeat: { type: "string" }, profile: { type: "boolean" }, stats: { type: "string" }, quiet: { type: "boolean" }, levers: { type: "string" }, "dawn-f16-toggle": { type: "boolean" },
      },
    }).values;
  } catch (e) {
    fail((e as Error).message);
  }
  if (!args.model === !args.preset) fail("give one of --model and --preset");
  const opts = {
    temperature: number("temperature", args.temperature, 0.8, true),
    topK: number("top-k", args["top-k"], 0),
    topP: number("top-p", args["top-p"], 1, true),
    maxTokens: number("tokens", args.tokens, 256),
    seed: number("seed", args.seed, 1),
    fullWindow: !!args["full-window"],
    drawOnHost: !!args["host-draw"],
  };
  if (!(opts.topP > 0 && opts.topP <= 1)) fail(`--top-p must be in (0, 1], got ${opts.topP}`);
  const prompt = new TextEncoder().encode(args.prompt ?? "\n");
  const log = args.quiet ? () => {} : (s: string) => console.error(s);
  const gpu = await dawnGpu(args.levers ?? "all", !!args["dawn-f16-toggle"], fail, log);
  // The profile times each dispatch by the GPU's clock where it can.
  const stamps: GPUFeatureName[] = args.profile && gpu.options.adapter?.features.has("timestamp-query") ? ["timestamp-query"] : [];
  const options = { ...gpu.options, features: [...(gpu.options.features ?? []), ...stamps] };

  let trainer: GPTTrainer;
  if (args.model) {
    let bytes: Uint8Array;
    try {
      bytes = readFileSync(args.model);
    } catch (e) {
      fail(`cannot read the model: ${(e as Error).message}`);
    }
    trainer = await loadTrainer(bytes, (model, train) => createBackend("webgpu", model, train, options));
  } else {
    let p;
    try {
      p = preset(args.preset!);
    } catch (e) {
      fail((e as Error).message);
    }
    trainer = await createTrainer(await createBackend("webgpu", p.model, p.train, options), p.model, p.train);
  }
  // With the int8 lever's kernels (--levers all or int8), decoding runs on them: a measurement of the
  // path, on weights whose held-out loss nobody checked here (the app checks before it samples).
  if (trainer.backend instanceof GpuBackend) trainer.backend.sampleInt8 = trainer.backend.hasInt8;
  const path = args["full-window"] ? "full window" : args["host-draw"] ? "KV cache, drawn on the CPU" : "KV cache";
  log(`sample: ${trainer.backend.device}${trainer.backend.paths.length ? ` (+${trainer.backend.paths.join(", +")})` : ", plain f32 kernels"}, ${path}`);

  const repeat = number("repeat", args.repeat, 1) || fail("--repeat must be positive");
  let out: number[] = [];
  const rates: number[] = [];
  for (let run = repeat > 1 ? -1 : 0; run < repeat; run++) {
    out = [];
    const show = !args.quiet && run === repeat - 1;
    const start = performance.now();
    await trainer.sample(prompt, opts, (b) => {
      out.push(b);
      if (show) process.stdout.write(Uint8Array.of(b));
    });
    if (run >= 0) rates.push(out.length / ((performance.now() - start) / 1000));
  }
  if (!args.quiet) process.stdout.write("\n");
  const median = [...rates].sort((a, b) => a - b)[Math.floor(rates.length / 2)];
  const refresh = trainer.backend instanceof GpuBackend && trainer.backend.sampleInt8 ? `; making the int8 copy of the weights took ${trainer.backend.int8RefreshMs.toFixed(1)} ms` : "";
  log(`sample: ${out.length} bytes, ${median.toFixed(0)} tokens/s${repeat > 1 ? ` (median of ${repeat}: ${rates.map((r) => r.toFixed(0)).join(", ")})` : ""}${refresh}`);
  let profile;
  if (args.profile && trainer.backend instanceof GpuBackend) {
    const half = Math.floor(trainer.model.block_size / 2);
    const window = Int32Array.from({ length: half }, (_, i) => out[i % out.length] ?? 10);
    // A prefill of half a window (about what a slide of the window costs, engine/sample.ts), the median of 5 after a warm-up one, logits back on the host.
    const prefills: number[] = [];
    for (let i = -1; i < 5; i++) {
      const t0 = performance.now();
      await trainer.backend.prefill(window);
      if (i >= 0) prefills.push(performance.now() - t0);
    }
    const prefillMs = prefills.sort((a, b) => a - b)[2];
    const prefill = await trainer.backend.profilePrefill(window);
    const sum = (ds: typeof prefill.dispatches) => ds.reduce((a, d) => a + d.ms, 0);
    const matmuls = sum(prefill.dispatches.filter((d) => d.op.startsWith("matmul")));
    log(`profile: prefilling ${half} tokens takes ${prefillMs.toFixed(2)} ms (median of 5, host clock, logits read back); its ${prefill.dispatches.length} dispatches ${sum(prefill.dispatches).toFixed(3)} ms, the matmuls ${matmuls.toFixed(3)} ms of it (${prefill.timing} timing)`);
    const { timing, dispatches, encodeMs } = await trainer.backend.profileDecode();
    const gpuMs = dispatches.reduce((a, d) => a + d.ms, 0);
    log(`profile: one decoding step at position ${half}, ${dispatches.length} dispatches, ${gpuMs.toFixed(3)} ms (${timing === "gpu" ? "GPU timestamps around each dispatch's pass" : "host clock, each dispatch alone"}); encoding it ${encodeMs.toFixed(3)} ms on the host`);
    for (const d of dispatches) log(`  ${(1000 * d.ms).toFixed(1).padStart(8)} us  ${d.op} (${d.workgroups} workgroups)`);
    profile = { timing, encode_ms: encodeMs, dispatches, prefill: { tokens: half, ms: prefillMs, dispatches: prefill.dispatches } };
  }
  if (args.stats) {
    const stats = { profile, model: trainer.model, device: trainer.backend.device, levers: trainer.backend.paths, verdicts: gpu.verdicts, path, prompt_bytes: prompt.length, tokens: out.length, tokens_per_s: median, runs_tokens_per_s: rates };
    writeFileSync(args.stats, JSON.stringify(stats, null, 2) + "\n");
  }
  trainer.dispose();
}

run(main);
