// The WebNN lever in the worker: its verdict, gated once a session against the CPU backend (the
// f32 path every browser here has), and a sampler for the loaded model, built from its current
// weights when a sample asks and kept until training changes them. A failure anywhere (no
// context, a build refused, a dispatch thrown mid-sample) turns it off for the session, silently:
// sampling goes on with the backend.
import { createBackend, defaultTrainConfig } from "../engine/index";
import type { GPTTrainer } from "../engine/index";
import type { Verdict } from "../levers/gate";
import { type Gated, type Reference, WebnnSampler, browserHost, gatedWebnn } from "../levers/webnn/lever";

const cpuReference: Reference = async (model, params, windows) => {
  const backend = await createBackend("wasm", model, defaultTrainConfig(1, 0));
  try {
    await backend.setState({ params, step: 0 });
    const out: Float32Array[] = [];
    for (const w of windows) out.push(await backend.prefill(w));
    return out;
  } finally {
    backend.dispose();
  }
};

let gated: Promise<Gated> | null = null;
const lever = () => (gated ??= gatedWebnn(browserHost(), cpuReference));

let off = false;
let built: { trainer: GPTTrainer; step: number; sampler: Promise<WebnnSampler | null>; done?: WebnnSampler | null } | null = null;

function turnOff(why: string): null {
  if (!off) console.info(`WebNN: off for this session, sampling stays on the backend (${why})`);
  off = true;
  return null;
}

/** The lever's verdict here, for the page's list. */
export const webnnVerdict = async (): Promise<Verdict> => (await lever()).verdict;

/** The sampler for `t` at its current step, or null where WebNN is off. */
export async function webnnSampler(t: GPTTrainer): Promise<WebnnSampler | null> {
  // Its graph holds the model's weights alone: an adapter's terms are not in it.
  if (off || t.backend.adapter) return null;
  if (built?.trainer !== t || built.step !== t.step) {
    const { context } = await lever();
    if (!context) return null;
    built?.done?.dispose(); // the weights it holds are not the model's any more
    const entry: NonNullable<typeof built> = { trainer: t, step: t.step, sampler: Promise.resolve(null) };
    entry.sampler = t.backend.getState()
      .then((state) => WebnnSampler.create(context, browserHost().newBuilder, t.model, state.params))
      .catch((e: Error) => turnOff(`the model's graph was refused: ${e.message}`))
      .then((sampler) => (entry.done = sampler));
    built = entry;
  }
  return (await built.sampler) && webnnActive(t) ? built.done! : null;
}

/** Whether WebNN samples for `t`: a sampler of its weights was built and has not failed. The pill's rule. */
export function webnnActive(t: GPTTrainer | null): boolean {
  if (built?.done?.broken) turnOff("a dispatch failed mid-sample");
  return !off && t !== null && built?.trainer === t && !!built.done;
}
