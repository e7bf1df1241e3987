// Time per training step of a model on this device: a short warm-up on
// synthetic bytes (timing does not depend on the text), then a few timed steps.
import { Interrupted, createTrainer, defaultTrainConfig } from "../engine/index";
import type { BackendKind, ModelConfig } from "../engine/types";
import type { Backends } from "./backends";
import type { BackendChoice } from "./protocol";

const MIN_STEPS = 2;
const MIN_MS = 1500;

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
    // The first step compiles pipelines and allocates: not representative.
    await trainer.trainStep();
    const t0 = performance.now();
    let n = 0;
    while (n < MIN_STEPS || performance.now() - t0 < MIN_MS) {
      if (cancelled()) break;
      await trainer.trainStep();
      n++;
    }
    return n ? { msPerStep: (performance.now() - t0) / n, backend: backend.kind } : null;
  } catch (e) {
    // The page asked for the device (REQUESTS "measure"): the CPU backend abandoned the step.
    if (e instanceof Interrupted) return null;
    throw e;
  } finally {
    // The run that follows (usually this very shape) reuses the backend; it resets the weights.
    backends.keep(backend, model, train);
  }
}
