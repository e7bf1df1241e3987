// Splitting kernel calls across threads that share one WebAssembly.Memory.
//
// The unit of work is a job: a list of kernel calls, each over a range
// [lo, hi) that every thread cuts the same way (share()). A thread runs its
// share of every call in order, then the job ends at one barrier. Calls over
// the same range and alignment hand each thread the same rows, so a chain of
// row-wise kernels (LayerNorm, matmul, GELU, ...) needs no barrier inside the
// job: each thread only reads rows it wrote itself. A barrier is needed only
// where a kernel reads what other threads wrote (attention mixes the rows of
// a sequence; weight gradients sum over all rows).
//
// The calling thread writes the job into a control block inside the shared
// memory, bumps a generation counter and wakes the helpers with
// Atomics.notify; it runs its own share, then waits until every helper has
// counted itself done. A job whose every call fits in the calling thread's
// share (one row: a decode) runs there alone and the helpers sleep on: waking
// them for nothing costs more than the job. Helpers are Workers running the
// app's worker script: the worker hands each message to handleCpuThreadMessage
// first, which instantiates the module on the shared memory and then blocks in
// the job loop for the rest of the worker's life (the backend terminates it).

export const KERNELS = [
  "matmul", "matmul_nt", "transpose", "colsum", "zero", "embed_forward", "embed_backward", "layernorm_forward", "layernorm_backward",
  "layernorm_param_grads", "attention_forward", "attention_decode", "attention_backward", "gelu_forward", "gelu_backward",
  "crossentropy", "sumsq", "adamw", "quantize_rows", "matvec_i8",
] as const;
export type KernelName = (typeof KERNELS)[number];
export type Kernels = Record<KernelName, (...args: number[]) => void>;

/** One kernel call: args, then the range [lo, hi) cut into shares that are multiples of `align`. */
export interface Call {
  kernel: KernelName;
  args: number[];
  lo: number;
  hi: number;
  align: number;
}

const GEN = 0; // Int32 slots of the control block
const DONE = 1;
const NCALLS = 2; // -1 tells helpers to stop
const HEADER_BYTES = 64;
const MAX_ARGS = 16;
const CALL_BYTES = 24 + 8 * MAX_ARGS; // Int32 kernel, nargs, lo, hi, align, pad; Float64 args
const MAX_CALLS = 128;
export const MAX_THREADS = 64;
export const CONTROL_BYTES = HEADER_BYTES + CALL_BYTES * MAX_CALLS;

/** Thread `index`'s part of [lo, hi) when `threads` threads split it in multiples of `align`. */
function share(lo: number, hi: number, align: number, threads: number, index: number): [number, number] {
  const per = Math.ceil(Math.ceil((hi - lo) / align) / threads) * align;
  return [Math.min(hi, lo + index * per), Math.min(hi, lo + (index + 1) * per)];
}

const INIT = "tinygpt-cpu-thread";

interface ThreadInit {
  type: typeof INIT;
  module: WebAssembly.Module;
  memory: WebAssembly.Memory;
  control: number;
  index: number;
  threads: number;
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

/** Runs jobs: every call of one job, each split across the threads, then one barrier. */
export interface Pool {
  readonly threads: number;
  run(calls: Call[]): void;
  dispose(): void;
}

export function singleThread(kernels: Kernels): Pool {
  return {
    threads: 1,
    run: (calls) => {
      for (const c of calls) if (c.hi > c.lo) kernels[c.kernel](...c.args, c.lo, c.hi);
    },
    dispose: () => {},
  };
}

function callView(memory: WebAssembly.Memory, control: number, i: number) {
  const at = control + HEADER_BYTES + i * CALL_BYTES;
  return { head: new Int32Array(memory.buffer, at, 6), args: new Float64Array(memory.buffer, at + 24, MAX_ARGS) };
}

/** Starts `workers` helpers on a shared memory; resolves once each has its instance. */
export async function threadPool(kernels: Kernels, module: WebAssembly.Module, memory: WebAssembly.Memory,
  control: number, workers: WorkerLike[], spinMs = DEFAULT_SPIN_MS): Promise<Pool> {
  const n = workers.length + 1;
  if (n > MAX_THREADS) throw new Error(`cpu backend: at most ${MAX_THREADS} threads, asked for ${n}`);
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
    const init: ThreadInit = { type: INIT, module, memory, control, index: i + 1, threads: n, spinMs, reply: channel.port2 };
    w.postMessage(init, [channel.port2]);
  })));
  const ctl = new Int32Array(memory.buffer, control, HEADER_BYTES / 4);
  const views = Array.from({ length: MAX_CALLS }, (_, i) => callView(memory, control, i));
  let disposed = false;
  return {
    threads: n,
    run(calls) {
      if (calls.length > MAX_CALLS) throw new Error(`cpu backend: a job of ${calls.length} calls, at most ${MAX_CALLS}`);
      const own = () => {
        for (const c of calls) {
          const [lo, hi] = share(c.lo, c.hi, c.align, n, 0);
          if (hi > lo) kernels[c.kernel](...c.args, lo, hi);
        }
      };
      // Shares go out in thread order: a helper has work only where thread 1's share is not empty.
      if (!calls.some((c) => share(c.lo, c.hi, c.align, n, 1)[0] < c.hi)) return own();
      calls.forEach((c, i) => {
        const v = views[i];
        v.head[0] = KERNELS.indexOf(c.kernel);
        v.head[1] = c.args.length;
        v.head[2] = c.lo;
        v.head[3] = c.hi;
        v.head[4] = c.align;
        v.args.set(c.args);
      });
      ctl[NCALLS] = calls.length;
      Atomics.store(ctl, DONE, 0);
      Atomics.add(ctl, GEN, 1);
      Atomics.notify(ctl, GEN);
      own();
      waitWhile(ctl, DONE, (done) => done !== n - 1, spinMs);
    },
    dispose() {
      if (disposed) return;
      disposed = true;
      ctl[NCALLS] = -1;
      Atomics.add(ctl, GEN, 1);
      Atomics.notify(ctl, GEN);
      for (const w of workers) w.terminate();
    },
  };
}

// A waiting thread spins for up to spinMs before it sleeps in Atomics.wait, as
// OpenMP runtimes do: the jobs of a step are balanced, so most waits end within
// microseconds, and a sleep costs a futex round trip and a wake-up (tens of
// microseconds here, far more in sandboxes and on idle server cores). The spin
// is kept short because when the machine has fewer free cores than threads (a
// busy laptop, the page's own threads), a spinning thread takes the core the
// thread it waits for needs: long spins made a step several times slower in
// our runs, while 50 us costs at most a millisecond or two per step.
export const DEFAULT_SPIN_MS = 0.05;

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
  const { memory, control, index, threads, reply } = init;
  const ctl = new Int32Array(memory.buffer, control, HEADER_BYTES / 4);
  const views = Array.from({ length: MAX_CALLS }, (_, i) => callView(memory, control, i));
  let gen = Atomics.load(ctl, GEN);
  reply.postMessage("ready");
  reply.close();
  for (;;) {
    const seen = gen;
    waitWhile(ctl, GEN, (g) => g === seen, init.spinMs);
    gen = Atomics.load(ctl, GEN);
    const count = ctl[NCALLS];
    if (count < 0) return;
    for (let i = 0; i < count; i++) {
      const { head, args } = views[i];
      const [lo, hi] = share(head[2], head[3], head[4], threads, index);
      if (hi > lo) kernels[KERNELS[head[0]]](...Array.from(args.subarray(0, head[1])), lo, hi);
    }
    Atomics.add(ctl, DONE, 1);
    Atomics.notify(ctl, DONE);
  }
}
