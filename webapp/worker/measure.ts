// Time per training step of a model on this device, on synthetic bytes (timing
// does not depend on the text): the median of several steps after a warm-up.
// A mean over a fixed time swung threefold between page loads (CPU Tiny read
// 91, 14 and 30 ms): the first steps run before the WebAssembly code is
// optimised, and a page still loading competes for the cores.
import { Interrupted, createTrainer, defaultTrainConfig } from "../engine/index";
import type { BackendKind, ModelConfig } from "../engine/types";
import type { Backends } from "./backends";
import type { BackendChoice } from "./protocol";

// Warm-up: at least WARM_STEPS steps and WARM_MS; then at least TIMED_STEPS steps and TIMED_MS,
// or, for slow shapes (a Huge step on the CPU takes ~30 s), SLOW_STEPS once SLOW_MS have passed.
const WARM_STEPS = 2;
const WARM_MS = 500;
const TIMED_STEPS = 9;
const TIMED_MS = 1500;
const SLOW_STEPS = 3;
const SLOW_MS = 10_000;

/**
 * Bumped by every command that needs the device (Start, Open, ...): a
 * measurement asked for before it is skipped, or ends after its current step.
 */
export const deviceClaims = { count: 0 };

/** Null when `cancelled` (a command claimed the device) before a step was timed. */
export async function measureStep(backends: Backends, model: ModelConfig, batch: number, choice: BackendChoice, cancelled: () => boolean): Promise<{ msPerStep: number; backend: BackendKind } | null> {
  if (cancelled()) return null;
  const train = defaultTrainConfig(batch, 1e-3);
  const backend = await backends.get(choice, model, train, true);
  const trainer = await createTrainer(backend, model, train, { producer: "tinygpt-web" });
  try {
    const bytes = new Uint8Array(Math.max(1 << 14, 12 * (model.block_size + 1)));
    for (let i = 0; i < bytes.length; i++) bytes[i] = 32 + (((i * 2654435761) >>> 24) % 95);
    await trainer.setCorpus("warm-up", bytes);
    // The first steps compile pipelines, allocate and tier up: not representative.
    const warm = performance.now();
    for (let n = 0; n < WARM_STEPS || performance.now() - warm < WARM_MS; n++) {
      if (cancelled()) return null;
      await trainer.trainStep();
      // A step that alone outlasts the warm-up is timed as it is.
      if (performance.now() - warm > SLOW_MS) break;
    }
    const times: number[] = [];
    const t0 = performance.now();
    for (;;) {
      const spent = performance.now() - t0;
      if ((times.length >= TIMED_STEPS && spent >= TIMED_MS) || (times.length >= SLOW_STEPS && spent >= SLOW_MS) || cancelled()) break;
      const at = performance.now();
      await trainer.trainStep();
      times.push(performance.now() - at);
    }
    if (!times.length) return null;
    times.sort((a, b) => a - b);
    return { msPerStep: times[times.length >> 1], backend: backend.kind };
  } catch (e) {
    // The page asked for the device (REQUESTS "measure"): the CPU backend abandoned the step.
    if (e instanceof Interrupted) return null;
    throw e;
  } finally {
    // The run that follows (usually this very shape) reuses the backend; it resets the weights.
    backends.keep(backend, model, train);
  }
}
