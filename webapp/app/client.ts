// The page's side of the worker: typed send, listeners per message type, and
// a ping that proves the worker started.
import { workerUrl } from "../trusted";
import type { FromWorker, ToWorker } from "../worker/protocol";

type Listener<T extends FromWorker["type"]> = (msg: Extract<FromWorker, { type: T }>) => void;

export class WorkerClient {
  private worker: Worker;
  private listeners = new Map<string, Set<(msg: FromWorker) => void>>();
  private nextPing = 1;

  constructor(url: string, onError: (text: string) => void) {
    this.worker = new Worker(workerUrl(url), { type: "module", name: "tinygpt-trainer" });
    this.worker.onmessage = (ev: MessageEvent<FromWorker>) => {
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
    this.worker.postMessage(msg, transfer);
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
