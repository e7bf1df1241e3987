// The helper-thread script for Node tests and benchmarks: what the app's worker
// does first with every message, on worker_threads.
import { parentPort } from "node:worker_threads";
import { handleCpuThreadMessage } from "../threads";

parentPort!.on("message", (data: unknown) => handleCpuThreadMessage({ data } as MessageEvent));
