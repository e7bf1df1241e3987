// The page's side of the worker: typed send, listeners per message type, and
// a ping that proves the worker started.
import { workerUrl } from "../trusted";
import { NEEDS_DEVICE, REQUESTS } from "../worker/protocol";
import type { FromWorker, Request, ToWorker } from "../worker/protocol";

type Listener<T extends FromWorker["type"]> = (msg: Extract<FromWorker, { type: T }>) => void;

export class WorkerClient {
  private worker: Worker;
  private listeners = new Map<string, Set<(msg: FromWorker) => void>>();
  private nextPing = 1;
  /** The request flag shared with the worker (protocol.ts REQUESTS); only a cross-origin isolated page can share memory. */
  readonly control = self.crossOriginIsolated ? new Int32Array(new SharedArrayBuffer(4)) : null;
  private measuring = 0;

  constructor(url: string, onError: (text: string) => void) {
    this.worker = new Worker(workerUrl(url), { type: "module", name: "tinygpt-trainer" });
    this.worker.onmessage = (ev: MessageEvent<FromWorker>) => {
      if (ev.data.type === "measured") this.measuring--;
      for (const fn of this.listeners.get(ev.data.type) ?? []) fn(ev.data);
    };
    this.worker.onerror = (ev) => onError(`The training worker failed: ${ev.message || "it could not start"}`);
  }

  on<T extends FromWorker["type"]>(type: T, fn: Listener<T>): () => void {
    const set = this.listeners.get(type) ?? new Set();
    this.listeners.set(type, set);
    const wrapped = fn as (msg: FromWorker) => void;
    set.add(wrapped);
    return () => set.delete(wrapped);
  }

  send(msg: ToWorker, transfer: Transferable[] = []): void {
    if (msg.type === "measure") this.measuring++;
    // A measurement step on the CPU can take seconds: it gives way mid-step.
    else if (this.measuring && NEEDS_DEVICE.has(msg.type)) this.request("measure");
    this.worker.postMessage(msg, transfer);
  }

  /**
   * A request the worker must see mid-step: written into the shared flag,
   * and sent as the message of that name too (the only way without a flag).
   */
  request(kind: Request): void {
    if (this.control) Atomics.store(this.control, 0, REQUESTS.indexOf(kind) + 1);
    if (kind !== "measure") this.send({ type: kind });
  }

  /** Resolves with the round-trip time in ms once the worker answers. */
  ping(): Promise<number> {
    const id = this.nextPing++;
    const t0 = performance.now();
    return new Promise((resolve) => {
      const off = this.on("pong", (m) => {
        if (m.id !== id) return;
        off();
        resolve(performance.now() - t0);
      });
      this.send({ type: "ping", id });
    });
  }
}
