// Matmul throughput of the engine's own kernels through Dawn in Node: the
// pipelines, params and bind groups come from the engine's kernel table and
// Recorder, so what is timed is what a training step dispatches. Driven by
// bench/bench_matmul.py --dawn, which bundles this file; prints one JSON object.
//   node matmul_dawn.mjs '[["1024^3", 1024, 1024, 1024], ...]' [--wall]
// Every kernel is first checked against a float64 CPU product; a wrong one exits non-zero.
import { create, globals } from "webgpu";
import { requestGpu } from "../webapp/engine/gpu/device";
import { F32_KERNELS, matmulOp, type Op, type Orientation } from "../webapp/engine/gpu/kernels";
import { encode, Pipelines, Recorder } from "../webapp/engine/gpu/recorder";

Object.assign(globalThis, globals);

type Shape = [string, number, number, number];
const ORIENTATIONS: Orientation[] = ["nn", "nt", "tn"];
const TOLERANCE = 1e-5; // relative Frobenius error, as bench_matmul.py's wgpu-py check
const PASSES = 5;
const MIN_PASS_S = 0.05;

const shapes: Shape[] = JSON.parse(process.argv[2] ?? "[]");
const wallOnly = process.argv.includes("--wall");

// Dawn rounds timestamps unless told not to; a bench wants them exact. The GPU object must stay
// referenced for the whole run (Dawn is torn down when it is collected), hence the exit at the end.
const gpu = create(["disable-dawn-features=timestamp_quantization"]);
const { device, description } = await requestGpu(gpu);
device.addEventListener("uncapturederror", (ev) => {
  console.error(`WebGPU error: ${(ev as GPUUncapturedErrorEvent).error.message}`);
  process.exit(1);
});
const stamps = device.features.has("timestamp-query") && !wallOnly;
const pipelines = new Pipelines(F32_KERNELS);

/** The series timed at a shape: the any-shape kernel of each orientation and the table's pick for it. */
function series(M: number, N: number, K: number): [string, Op][] {
  return ORIENTATIONS.flatMap((o): [string, Op][] => [[`matmul ${o}`, `matmul_${o}`], [`kernel table ${o}`, matmulOp(o, M, N, K)]]);
}

function storage(data: Float32Array<ArrayBuffer>): GPUBuffer {
  const buf = device.createBuffer({ size: Math.max(16, data.byteLength), usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST });
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
async function setUp(op: Op, M: number, N: number, K: number, a: Float32Array<ArrayBuffer>, b: Float32Array<ArrayBuffer>, c: Float32Array<ArrayBuffer>) {
  await pipelines.compile(device, [op]);
  const buffers = [storage(a), storage(b), storage(new Float32Array(N)), storage(c)];
  const recorder = new Recorder(device, pipelines);
  recorder.op(op, { M, N, K, flags: 0 }, { 1: buffers[0], 2: buffers[1], 3: buffers[2], 4: buffers[3] });
  const [dispatch] = recorder.finish(op);
  const free = () => {
    recorder.destroy();
    buffers.forEach((b) => b.destroy());
  };
  return { dispatch, c: buffers[3], free };
}

async function check(op: Op, M: number, N: number, K: number): Promise<number> {
  const o = op.includes("_nt") ? "nt" : op.includes("_tn") ? "tn" : "nn";
  const a = random(M * K, 1);
  const b = random(K * N, 2);
  const A = (m: number, k: number) => (o === "tn" ? a[k * M + m] : a[m * K + k]);
  const B = (k: number, n: number) => (o === "nt" ? b[n * K + k] : b[k * N + n]);
  const run = await setUp(op, M, N, K, a, b, new Float32Array(M * N).fill(NaN));
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
async function seconds(op: Op, M: number, N: number, K: number): Promise<number> {
  const run = await setUp(op, M, N, K, random(M * K, 3), random(K * N, 4), new Float32Array(M * N));
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

const ops = new Set<Op>(shapes.flatMap(([, M, N, K]) => series(M, N, K).map(([, op]) => op)));
for (const op of ops) {
  // The vec4 kernels need multiples of 4 in their contiguous dimensions: check them at an odd multiple.
  const [M, N, K] = op.includes("vec4") ? [132, 260, 68] : [37, 65, 100];
  const err = await check(op, M, N, K);
  console.error(`check ${op} at ${M}x${N}x${K}: rel err ${err.toExponential(2)}`);
  if (!(err < TOLERANCE)) {
    console.error(`FAILED: ${op} is wrong (rel err ${err} >= ${TOLERANCE}); nothing timed`);
    process.exit(1);
  }
}

const results = [];
for (const [label, M, N, K] of shapes) {
  for (const [name, op] of series(M, N, K)) {
    const s = await seconds(op, M, N, K);
    results.push({ series: name, op, label, M, N, K, seconds: s, gflops: (2 * M * N * K) / s / 1e9 });
    console.error(`${label} ${name} (${op}): ${((2 * M * N * K) / s / 1e9).toFixed(1)} GFLOP/s`);
  }
}
const timing = stamps ? "GPU timestamps around each pass" : "wall clock from submit to queue done (no timestamp queries)";
console.log(JSON.stringify({ adapter: description, timing, checked: [...ops], results }));
device.destroy();
process.exit(0);
