// The training worker: owns the Session (Trainer, OPFS run, training loop) and
// answers the page's messages (protocol.ts).
import { handleCpuThreadMessage } from "../cpu/threads";
import { configureGates } from "../levers/gate";
import { ID as WEBNN } from "../levers/webnn/lever";
import { gpuVerdicts } from "./backends";
import { chooseBest } from "./best";
import { detectCaps } from "./caps";
import { cpuVerdicts, registerCpuBackend } from "./cpu";
import { plainWords } from "./errors";
import { checkFit } from "./fit";
import { deviceClaims, measureStep } from "./measure";
import { NEEDS_DEVICE } from "./protocol";
import type { FromWorker, ToWorker } from "./protocol";
import { Session } from "./session";
import { collect, deleteRun, holdRunLock, listRuns, recover } from "./store";
import { opfsVerdicts } from "./verdicts";
import { webnnVerdict } from "./webnn";

const scope = self as unknown as DedicatedWorkerGlobalScope;

function post(msg: FromWorker, transfer: Transferable[] = []): void {
  scope.postMessage(msg, transfer);
}

const session = new Session(post);
// What a crashed tab left mid-save is dealt with before runs are listed or saved.
let recovered = Promise.resolve();

async function checkpoints(): Promise<void> {
  try {
    await recovered;
    post({ type: "checkpoints", list: await listRuns(session.status().runId) });
  } catch (e) {
    post({ type: "message", level: "warn", text: `Saved runs cannot be listed: browser storage is unavailable (${plainWords(e)}).` });
  }
}

// Commands that change the session run one at a time, in arrival order;
// pause, stop and stopSample act at once so they can interrupt a running loop.
let queue: Promise<void> = Promise.resolve();
function exclusive(fn: () => Promise<void>): void {
  queue = queue.then(fn).catch((e) => post({ type: "message", level: "error", text: `Something went wrong in the trainer: ${plainWords(e)}.` }));
}

async function handle(msg: ToWorker): Promise<void> {
  if (NEEDS_DEVICE.has(msg.type)) deviceClaims.count++;
  switch (msg.type) {
    case "ping":
      return post({ type: "pong", id: msg.id });
    case "caps": {
      const caps = await detectCaps();
      // Every backend's levers are checked: "auto" may pick either (best.ts), and either can be chosen.
      // The CPU's check takes milliseconds, the GPU's a step of small models per lever (seconds on a
      // software adapter): the page hears what is known at once, and again with the GPU's verdicts.
      // WebNN's verdict rides with the CPU's: no GPU lever's gate waits for it, nor it for them.
      const cpu = { ...(caps.wasmSimd ? await cpuVerdicts() : {}), [WEBNN]: await webnnVerdict() };
      post({ type: "caps", caps: { ...caps, levers: cpu, gpuChecked: false } });
      if (caps.webgpu) post({ type: "caps", caps: { ...caps, levers: { ...(await gpuVerdicts()), ...cpu }, gpuChecked: true } });
      const claims = deviceClaims.count;
      return exclusive(async () => {
        const best = await chooseBest(session.backends, () => deviceClaims.count !== claims);
        if (!best) return;
        session.backends.best = best.kind;
        post({ type: "best", ...best });
      });
    }
    case "init":
      configureGates({ forceFail: msg.gateFail, store: opfsVerdicts });
      session.control = msg.control;
      registerCpuBackend(msg.wasmUrl, msg.control);
      // Only the page's own worker gets init (CPU helper threads run this script too).
      // Unusable storage is reported by the listing that follows.
      recovered = recover().catch(() => undefined);
      exclusive(() => recovered);
      return post({ type: "status", status: session.status() });
    case "pause":
      return session.pause();
    case "stop":
      return session.stop();
    case "stopSample":
      return session.cancelSample();
    case "check":
      return post({ type: "checked", key: msg.key, ...(await checkFit(session.backends, msg.model, msg.batch, msg.backend, msg.lora)) });
    case "listCheckpoints":
      return checkpoints();
    case "measure":
      if (session.busy) return post({ type: "measured", key: msg.key, msPerStep: null, backend: null, error: "busy" });
      const claims = deviceClaims.count;
      return exclusive(async () => {
        session.takeRequest(); // one left from before is not for this measurement
        try {
          const r = await measureStep(session.backends, msg.model, msg.batch, msg.backend, () => deviceClaims.count !== claims);
          if (r) post({ type: "measured", key: msg.key, msPerStep: r.msPerStep, backend: r.backend });
          else post({ type: "measured", key: msg.key, msPerStep: null, backend: null, error: "busy" });
        } catch (e) {
          post({ type: "measured", key: msg.key, msPerStep: null, backend: null, error: (e as Error).message });
        }
      });
    case "start":
      return exclusive(() => session.start(msg.settings, msg.corpus.name, msg.corpus.bytes).then(checkpoints));
    case "continueFile":
      return exclusive(() => session.continueFile(msg.settings, msg.corpus.name, msg.corpus.bytes).then(checkpoints));
    case "fineTune":
      return exclusive(() => session.fineTune(msg.settings, msg.lora, msg.corpus.name, msg.corpus.bytes).then(checkpoints));
    case "resume":
      return exclusive(() => session.train(msg.steps, msg.intervals));
    case "reset":
      // The run it let go of is listed as not loaded any more.
      return exclusive(async () => {
        session.reset();
        await checkpoints();
      });
    case "sample":
      return exclusive(() => session.sample(msg.prompt, msg.options, msg.adapter));
    case "export":
      return exclusive(() => session.exportModel());
    case "merge":
      return exclusive(() => session.mergeModel());
    case "import":
      return exclusive(async () => post({ type: "imported", ref: msg.ref, ok: await session.import(msg.name, msg.file, msg.backend) }));
    case "openCheckpoint":
      return exclusive(() => session.open(msg.id, msg.backend, msg.train, msg.steps, msg.intervals).then(checkpoints));
    case "deleteCheckpoint":
      return exclusive(async () => {
        if (session.status().runId === msg.id) {
          post({ type: "message", level: "warn", text: "That run is loaded in this tab; reset first to delete it." });
          return;
        }
        const lock = await holdRunLock(msg.id);
        if (!lock.ok) {
          post({ type: "message", level: "warn", text: "That run is open in another tab; it was not deleted." });
          return;
        }
        await deleteRun(msg.id);
        const loaded = session.status().runId;
        await collect([msg.id, ...(loaded ? [loaded] : [])], session.kept());
        lock.release();
        await checkpoints();
      });
  }
}

scope.onmessage = (ev: MessageEvent<ToWorker>) => {
  // CPU helper threads run this same script; their messages are not ours.
  if (handleCpuThreadMessage(ev)) return;
  handle(ev.data).catch((e) => post({ type: "message", level: "error", text: `The trainer failed: ${plainWords(e)}. Reload the page to start it again.` }));
};
