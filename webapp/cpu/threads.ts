// Splitting a kernel call across threads that share one WebAssembly.Memory.
//
// The calling thread writes the job (kernel, arguments, one range per thread)
// into a control block inside the shared memory, bumps a generation counter and
// wakes the helpers with Atomics.notify; it runs its own range, then waits until
// every helper has counted itself done. Helpers are Workers running the app's
// worker script: the worker hands each message to handleCpuThreadMessage first,
// which instantiates the module on the shared memory and then blocks in the job
// loop for the rest of the worker's life (the backend terminates it).

export const KERNELS = [
  "matmul", "transpose", "colsum", "embed_forward", "layernorm_forward", "layernorm_backward",
  "layernorm_param_grads", "attention_forward", "attention_backward", "gelu_forward", "gelu_backward",
  "crossentropy", "adamw",
] as const;
export type KernelName = (typeof KERNELS)[number];
export type Kernels = Record<KernelName, (...args: number[]) => void>;

const GEN = 0; // Int32 slots of the control block
const DONE = 1;
const KERNEL = 2;
const NARGS = 3;
const ARGS_BYTE = 64; // Float64 arguments
const MAX_ARGS = 16;
const RANGES_BYTE = ARGS_BYTE + 8 * MAX_ARGS; // Int32 [lo, hi) per thread
export const MAX_THREADS = 64;
export const CONTROL_BYTES = RANGES_BYTE + 8 * MAX_THREADS;

const INIT = "tinygpt-cpu-thread";

interface ThreadInit {
  type: typeof INIT;
  module: WebAssembly.Module;
  memory: WebAssembly.Memory;
  control: number;
  index: number;
  spinMs: number;
  reply: MessagePort;
}

/** What the backend needs of a Worker (a browser Worker, or Node's worker_threads Worker with `on`). */
export interface WorkerLike {
  postMessage(message: unknown, transfer: Transferable[]): void;
  terminate(): unknown;
  addEventListener?(type: "error", listener: (ev: Event) => void): void;
  on?(event: "error", listener: (err: Error) => void): unknown;
}

const START_TIMEOUT_MS = 15000;

/** Runs a kernel over [lo, hi), split into slices that are multiples of `align`. */
export interface Pool {
  readonly threads: number;
  run(kernel: KernelName, args: number[], lo: number, hi: number, align?: number): void;
  dispose(): void;
}

export function singleThread(kernels: Kernels): Pool {
  return {
    threads: 1,
    run: (kernel, args, lo, hi) => { if (hi > lo) kernels[kernel](...args, lo, hi); },
    dispose: () => {},
  };
}

/** Starts `workers` helpers on a shared memory; resolves once each has its instance. */
export async function threadPool(kernels: Kernels, module: WebAssembly.Module, memory: WebAssembly.Memory,
  control: number, workers: WorkerLike[], spinMs = DEFAULT_SPIN_MS): Promise<Pool> {
  if (workers.length + 1 > MAX_THREADS) throw new Error(`cpu backend: at most ${MAX_THREADS} threads, asked for ${workers.length + 1}`);
  await Promise.all(workers.map((w, i) => new Promise<void>((resolve, reject) => {
    const channel = new MessageChannel();
    const fail = (why: string) => {
      channel.port1.close();
      reject(new Error(`cpu thread ${i + 1} failed to start: ${why}`));
    };
    const timer = setTimeout(() => fail(`no answer within ${START_TIMEOUT_MS / 1000} s`), START_TIMEOUT_MS);
    w.addEventListener?.("error", (ev) => fail((ev as ErrorEvent).message ?? "worker error"));
    w.on?.("error", (err) => fail(err.message));
    channel.port1.onmessage = (ev: MessageEvent) => {
      clearTimeout(timer);
      channel.port1.close();
      if (ev.data === "ready") resolve();
      else fail(String(ev.data));
    };
    const init: ThreadInit = { type: INIT, module, memory, control, index: i + 1, spinMs, reply: channel.port2 };
    w.postMessage(init, [channel.port2]);
  })));
  const n = workers.length + 1;
  const ctl = new Int32Array(memory.buffer, control, CONTROL_BYTES / 4);
  const args = new Float64Array(memory.buffer, control + ARGS_BYTE, MAX_ARGS);
  const ranges = new Int32Array(memory.buffer, control + RANGES_BYTE, 2 * MAX_THREADS);
  let disposed = false;
  return {
    threads: n,
    run(kernel, a, lo, hi, align = 1) {
      if (hi <= lo) return;
      const units = Math.ceil((hi - lo) / align);
      if (units < 2) { kernels[kernel](...a, lo, hi); return; }
      const per = Math.ceil(units / n) * align;
      for (let t = 0; t < n; t++) {
        ranges[2 * t] = Math.min(hi, lo + t * per);
        ranges[2 * t + 1] = Math.min(hi, lo + (t + 1) * per);
      }
      args.set(a);
      ctl[KERNEL] = KERNELS.indexOf(kernel);
      ctl[NARGS] = a.length;
      Atomics.store(ctl, DONE, 0);
      Atomics.add(ctl, GEN, 1);
      Atomics.notify(ctl, GEN);
      kernels[kernel](...a, ranges[0], ranges[1]);
      waitWhile(ctl, DONE, (done) => done !== n - 1, spinMs);
    },
    dispose() {
      if (disposed) return;
      disposed = true;
      ctl[KERNEL] = -1;
      Atomics.add(ctl, GEN, 1);
      Atomics.notify(ctl, GEN);
      for (const w of workers) w.terminate();
    },
  };
}

// A waiting thread may spin for up to spinMs before it sleeps in Atomics.wait,
// as OpenMP runtimes do, to save wake-up latency between the jobs of a step.
// Off by default: when the machine has fewer free cores than threads (a busy
// laptop, the page's own threads), a spinning thread takes the core the thread
// it waits for needs, and a step got several times slower in our runs.
export const DEFAULT_SPIN_MS = 0;

function waitWhile(ctl: Int32Array, slot: number, pending: (value: number) => boolean, spinMs: number): void {
  if (!pending(Atomics.load(ctl, slot))) return;
  const until = performance.now() + spinMs;
  for (let i = 0; ; i++) {
    if (!pending(Atomics.load(ctl, slot))) return;
    if ((i & 255) === 255 && performance.now() > until) break;
  }
  for (let v = Atomics.load(ctl, slot); pending(v); v = Atomics.load(ctl, slot)) Atomics.wait(ctl, slot, v);
}

/** Call first on every message a worker receives; true when it was a CPU-thread message (now handled). */
export function handleCpuThreadMessage(ev: MessageEvent): boolean {
  const msg = ev.data as Partial<ThreadInit> | null;
  if (!msg || typeof msg !== "object" || msg.type !== INIT) return false;
  const init = msg as ThreadInit;
  WebAssembly.instantiate(init.module, { env: { memory: init.memory } }).then(
    (instance) => jobLoop(instance.exports as unknown as Kernels, init),
    (err: unknown) => init.reply.postMessage(String(err)),
  );
  return true;
}

function jobLoop(kernels: Kernels, init: ThreadInit): void {
  const { memory, control, index, reply } = init;
  const ctl = new Int32Array(memory.buffer, control, CONTROL_BYTES / 4);
  const args = new Float64Array(memory.buffer, control + ARGS_BYTE, MAX_ARGS);
  const ranges = new Int32Array(memory.buffer, control + RANGES_BYTE, 2 * MAX_THREADS);
  let gen = Atomics.load(ctl, GEN);
  reply.postMessage("ready");
  reply.close();
  for (;;) {
    const seen = gen;
    waitWhile(ctl, GEN, (g) => g === seen, init.spinMs);
    gen = Atomics.load(ctl, GEN);
    const k = ctl[KERNEL];
    if (k < 0) return;
    const lo = ranges[2 * index], hi = ranges[2 * index + 1];
    if (hi > lo) kernels[KERNELS[k]](...Array.from(args.subarray(0, ctl[NARGS])), lo, hi);
    Atomics.add(ctl, DONE, 1);
    Atomics.notify(ctl, DONE);
  }
}
