// Matmul throughput of the engine's own kernels through Dawn in Node: the
// pipelines, params and bind groups come from the engine's kernel table and
// Recorder, so what is timed is what a training step dispatches. Driven by
// bench/bench_matmul.py --dawn, which bundles this file; prints one JSON object.
//   node matmul_dawn.mjs '[["1024^3", 1024, 1024, 1024], ["dW", 384, 1536, 16384, ["tn"]], ...]' [--wall] [--lever shader-f16] [--dawn-f16-toggle]
// A shape's optional fifth entry names the orientations timed there (all three otherwise). A tn
// product is a weight gradient: it runs the table's weight-gradient kernel (weightGradOp), cut
// along K as the graph cuts it (splitsFor), and its time is that dispatch's (colsum's sum of the
// partials apart).
// Every kernel is first checked against a float64 CPU product; a wrong one exits non-zero.
// --lever <id>: a GPU lever (BUILT_LEVERS) is first gated (kernelTableAgrees on its shapes; a refusal
// exits non-zero), then each op it replaces is timed beside the plain one as "<id> <orientation>".
// --dawn-f16-toggle: Dawn's adapter toggle vulkan_enable_f16_on_nvidia, without which Dawn hides
// shader-f16 on NVIDIA; for test and bench hosts only, the app never sets a toggle.
import { create, globals } from "webgpu";
import { requestGpu } from "../webapp/engine/gpu/device";
import { F32_KERNELS, type KernelTable, matmulOp, type Op, type Orientation, weightGradOp } from "../webapp/engine/gpu/kernels";
import { splitsFor } from "../webapp/engine/gpu/graph";
import { floatToHalf } from "../webapp/engine/f16";
import { encode, Pipelines, Recorder } from "../webapp/engine/gpu/recorder";
import { BUILT_LEVERS, kernelTableAgrees, leverFeatures, tableOn } from "../webapp/levers/gpu";

Object.assign(globalThis, globals);

type Shape = [string, number, number, number, Orientation[]?];
const ORIENTATIONS: Orientation[] = ["nn", "nt", "tn"];
const TOLERANCE = 1e-5; // relative Frobenius error, as bench_matmul.py's wgpu-py check
// A lever's kernels round their inputs to f16 (2^-11 relative): about 4e-4 on these inputs.
const LEVER_TOLERANCE = 3e-3;
const PASSES = 5;
const MIN_PASS_S = 0.05;

const shapes: Shape[] = JSON.parse(process.argv[2] ?? "[]");
const wallOnly = process.argv.includes("--wall");
const leverId = process.argv.includes("--lever") ? process.argv[process.argv.indexOf("--lever") + 1] : null;
const lever = leverId === null ? null : BUILT_LEVERS.find((l) => l.id === leverId);
if (leverId !== null && !lever) {
  console.error(`no GPU lever ${leverId} (BUILT_LEVERS: ${BUILT_LEVERS.map((l) => l.id).join(", ")})`);
  process.exit(1);
}
const dawnFlags = ["disable-dawn-features=timestamp_quantization"];
if (process.argv.includes("--dawn-f16-toggle")) dawnFlags.push("enable-dawn-features=allow_unsafe_apis,vulkan_enable_f16_on_nvidia");

// Dawn rounds timestamps unless told not to; a bench wants them exact. The GPU object must stay
// referenced for the whole run (Dawn is torn down when it is collected), hence the exit at the end.
const gpu = create(dawnFlags);
const features = lever ? leverFeatures(lever) : [];
const adapter = await gpu.requestAdapter({ powerPreference: "high-performance" });
const lacking = features.filter((f) => !adapter?.features.has(f));
if (lacking.length) {
  console.error(`the adapter lacks ${lacking.join(", ")}, which lever ${lever!.id} needs` + (lacking.includes("shader-f16") ? " (on NVIDIA: --dawn-f16-toggle)" : ""));
  process.exit(1);
}
const leverKernels = lever ? tableOn(lever, adapter!, gpu.wgslLanguageFeatures) : null;
if (lever && !leverKernels) {
  console.error(`lever ${lever.id} cannot run on this adapter (no table for it, or WGSL lacks ${lever.wgslFeatures ?? "nothing"})`);
  process.exit(1);
}
// Timestamps where the adapter has them, asked for beside the lever's features (a device has only what it was asked for).
const timestamps: GPUFeatureName[] = adapter?.features.has("timestamp-query") && !wallOnly ? ["timestamp-query"] : [];
const context = await requestGpu(gpu, adapter, [...features, ...timestamps]);
const { device, description } = context;
device.addEventListener("uncapturederror", (ev) => {
  console.error(`WebGPU error: ${(ev as GPUUncapturedErrorEvent).error.message}`);
  process.exit(1);
});
const stamps = device.features.has("timestamp-query") && !wallOnly;
const plain = new Pipelines(F32_KERNELS);
const leverPipelines = leverKernels ? new Pipelines({ ...F32_KERNELS, ...leverKernels } as KernelTable) : null;

type Series = [string, Op, Pipelines];

/**
 * The series timed at a shape: the any-shape kernel of each orientation and the table's pick for
 * it, and with --lever the lever's kernel where it replaces that pick.
 */
function series(M: number, N: number, K: number, orientations: Orientation[] = ORIENTATIONS): Series[] {
  return orientations.flatMap((o): Series[] => {
    const pick = (table: KernelTable) => (o === "tn" ? weightGradOp(table, M, N, K) : matmulOp(o, M, N, K));
    const own = leverPipelines ? pick(leverPipelines.kernels) : null;
    const mine: Series[] = own && own in leverKernels! ? [[`${lever!.id} ${o}`, own, leverPipelines!]] : [];
    return [[`matmul ${o}`, `matmul_${o}`, plain], [`kernel table ${o}`, pick(F32_KERNELS), plain], ...mine];
  });
}

/** The runs a weight gradient's K is cut into, as the graph cuts it; 1 for the other products. */
const splits = (pipelines: Pipelines, op: Op, M: number, N: number, K: number) => (op.includes("_tn") ? splitsFor(pipelines.kernels[op], { M, N, K, flags: 0 }, K, M * N) : 1);

function storage(data: Float32Array<ArrayBuffer> | Uint16Array<ArrayBuffer>): GPUBuffer {
  const buf = device.createBuffer({ size: Math.max(16, Math.ceil(data.byteLength / 16) * 16), usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST });
  device.queue.writeBuffer(buf, 0, data);
  return buf;
}

function random(n: number, seed: number): Float32Array<ArrayBuffer> {
  let s = seed >>> 0;
  return Float32Array.from({ length: n }, () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 31 - 1;
  });
}

async function readBack(buf: GPUBuffer, bytes: number): Promise<ArrayBuffer> {
  const staging = device.createBuffer({ size: bytes, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const enc = device.createCommandEncoder();
  enc.copyBufferToBuffer(buf, 0, staging, 0, bytes);
  device.queue.submit([enc.finish()]);
  await staging.mapAsync(GPUMapMode.READ);
  const out = staging.getMappedRange().slice(0);
  staging.destroy();
  return out;
}

/** One op's dispatch on fresh buffers; a and b are stored as the op's orientation wants ([M,K]/[K,M], [K,N]/[N,K]). */
async function setUp(pipelines: Pipelines, op: Op, M: number, N: number, K: number, a: Float32Array<ArrayBuffer>, b: Float32Array<ArrayBuffer>, c: Float32Array<ArrayBuffer>) {
  await pipelines.compile(device, [op]);
  // A kernel reading its weights from storage-f16's mirror takes B as packed halves, as the engine binds it.
  const bHalves = pipelines.kernels[op].weightsFromMirror ? Uint16Array.from(b, floatToHalf) : null;
  const S = splits(pipelines, op, M, N, K);
  const buffers = [storage(a), bHalves ? storage(bHalves) : storage(b), storage(new Float32Array(N)), storage(S > 1 ? new Float32Array(S * M * N) : c)];
  const recorder = new Recorder(device, pipelines);
  recorder.op(op, { M, N, K, flags: 0, splits: S }, { 1: buffers[0], 2: buffers[1], 3: buffers[2], 4: buffers[3] });
  const [dispatch] = recorder.finish(op);
  const free = () => {
    recorder.destroy();
    buffers.forEach((b) => b.destroy());
  };
  return { dispatch, c: buffers[3], free };
}

async function check(pipelines: Pipelines, op: Op, M: number, N: number, K: number): Promise<number> {
  const o = op.includes("_nt") ? "nt" : op.includes("_tn") ? "tn" : "nn";
  const a = random(M * K, 1);
  const b = random(K * N, 2);
  const A = (m: number, k: number) => (o === "tn" ? a[k * M + m] : a[m * K + k]);
  const B = (k: number, n: number) => (o === "nt" ? b[n * K + k] : b[k * N + n]);
  const run = await setUp(pipelines, op, M, N, K, a, b, new Float32Array(M * N).fill(NaN));
  const enc = device.createCommandEncoder();
  const pass = enc.beginComputePass();
  encode(pass, [run.dispatch]);
  pass.end();
  device.queue.submit([enc.finish()]);
  const out = new Float32Array(await readBack(run.c, M * N * 4));
  run.free();
  let diff = 0;
  let norm = 0;
  for (let m = 0; m < M; m++)
    for (let n = 0; n < N; n++) {
      let ref = 0;
      for (let k = 0; k < K; k++) ref += A(m, k) * B(k, n);
      diff += (out[m * N + n] - ref) ** 2;
      norm += ref ** 2;
    }
  return Number.isFinite(diff) ? Math.sqrt(diff / norm) : Infinity;
}

/** Median seconds of one dispatch over passes of back-to-back dispatches in one submit each. */
async function seconds(pipelines: Pipelines, op: Op, M: number, N: number, K: number): Promise<number> {
  const run = await setUp(pipelines, op, M, N, K, random(M * K, 3), random(K * N, 4), new Float32Array(M * N));
  const queries = stamps ? device.createQuerySet({ type: "timestamp", count: 2 }) : null;
  const resolved = device.createBuffer({ size: 16, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC });
  const onePass = async (reps: number) => {
    const enc = device.createCommandEncoder();
    const pass = enc.beginComputePass(queries ? { timestampWrites: { querySet: queries, beginningOfPassWriteIndex: 0, endOfPassWriteIndex: 1 } } : {});
    encode(pass, Array(reps).fill(run.dispatch));
    pass.end();
    if (queries) enc.resolveQuerySet(queries, 0, 2, resolved, 0);
    const start = performance.now();
    device.queue.submit([enc.finish()]);
    if (!queries) {
      await device.queue.onSubmittedWorkDone();
      return (performance.now() - start) / 1000 / reps;
    }
    const [t0, t1] = new BigUint64Array(await readBack(resolved, 16));
    return Number(t1 - t0) * 1e-9 / reps;
  };
  await onePass(2); // warm-up: first touch of the buffers
  const reps = Math.max(3, Math.min(1000, Math.floor(MIN_PASS_S / Math.max(await onePass(3), 1e-7))));
  const times: number[] = [];
  for (let i = 0; i < PASSES; i++) times.push(await onePass(reps));
  run.free();
  queries?.destroy();
  resolved.destroy();
  return times.sort((x, y) => x - y)[PASSES >> 1];
}

if (lever) {
  const { failure } = await kernelTableAgrees({ context }, leverKernels!, features, lever.shapes);
  console.error(`gate ${lever.id} (kernelTableAgrees): ${failure ?? "passed"}`);
  if (failure) {
    console.error(`FAILED: lever ${lever.id} is refused by its gate; nothing timed`);
    process.exit(1);
  }
}

const checks = new Map<string, Series>(shapes.flatMap(([, M, N, K, os]) => series(M, N, K, os).map((s): [string, Series] => [`${s[2] === plain ? "" : `${lever!.id} `}${s[1]}`, s])));
for (const [name, [, op, pipelines]] of checks) {
  // The vec4 kernels need multiples of 4 in their contiguous dimensions: check them at an odd multiple.
  const [M, N, K] = op.includes("vec4") ? [132, 260, 68] : [37, 65, 100];
  const tolerance = pipelines === plain ? TOLERANCE : LEVER_TOLERANCE;
  const err = await check(pipelines, op, M, N, K);
  console.error(`check ${name} at ${M}x${N}x${K}: rel err ${err.toExponential(2)}`);
  if (!(err < tolerance)) {
    console.error(`FAILED: ${name} is wrong (rel err ${err} >= ${tolerance}); nothing timed`);
    process.exit(1);
  }
}

const results = [];
for (const [label, M, N, K, os] of shapes) {
  for (const [name, op, pipelines] of series(M, N, K, os)) {
    const s = await seconds(pipelines, op, M, N, K);
    const S = splits(pipelines, op, M, N, K);
    results.push({ series: name, op, label, M, N, K, splits: S, seconds: s, gflops: (2 * M * N * K) / s / 1e9 });
    console.error(`${label} ${name} (${op}${S > 1 ? `, K cut ${S} ways` : ""}): ${((2 * M * N * K) / s / 1e12).toFixed(2)} TFLOP/s`);
  }
}
const timing = stamps ? "GPU timestamps around each pass" : "wall clock from submit to queue done (no timestamp queries)";
console.log(JSON.stringify({ adapter: description, timing, checked: [...checks.keys()], ...(lever ? { lever: lever.id, gate: "passed" } : {}), results }));
device.destroy();
process.exit(0);
