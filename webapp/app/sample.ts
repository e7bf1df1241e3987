// Sampling: prompt and settings in, bytes streamed back from the worker and
// decoded as UTF-8 on the fly (a character may span several tokens); the text
// out to the clipboard. With an adapter loaded, with or without it, or both
// from one seed side by side: the model alone first, then with the adapter.
import type { WorkerClient } from "./client";
import { $ } from "./dom";
import * as fmt from "./format";
import type { GallerySample } from "./gallery";
import { backendName } from "./progress";
import type { ToWorker } from "../worker/protocol";

function numberField(id: string, label: string, min: number, max: number, integer: boolean, aboveMin = false): number {
  const v = Number($<HTMLInputElement>(`#${id}`).value);
  if (!Number.isFinite(v) || v < min || (aboveMin && v === min) || v > max || (integer && !Number.isInteger(v))) {
    throw new Error(`${label} must be ${integer ? "a whole number" : "a number"} ${aboveMin ? "above" : "from"} ${min} ${aboveMin ? "up " : ""}to ${max}.`);
  }
  return v;
}

const MAX_SEED = 2 ** 32 - 1;

/** The seed field's: blank draws a fresh one, which the result line then shows so the text can be had again. */
function seedField(): number {
  if ($<HTMLInputElement>("#sample-seed").value.trim() === "") return crypto.getRandomValues(new Uint32Array(1))[0];
  return numberField("sample-seed", "Seed", 0, MAX_SEED, true);
}

type Options = Extract<ToWorker, { type: "sample" }>["options"];

export class SampleView {
  private out = $("#sample-out");
  /** A comparison's second sample, once the first is done; dropped by Stop. */
  private next: (() => void) | null = null;
  private decoder = new TextDecoder();
  private text = "";
  private tokens = 0;

  constructor(private client: WorkerClient, private onError: (text: string) => void) {
    $("#btn-sample").addEventListener("click", () => this.generate());
    $("#btn-sample-compare").addEventListener("click", () => this.compare());
    $("#btn-sample-stop").addEventListener("click", () => {
      this.next = null;
      client.request("stopSample");
    });
    $("#btn-sample-copy").addEventListener("click", () => void this.copy());
    client.on("token", (m) => {
      // Tokens so far, as data-tokens: a byte can be part of a character still to come.
      this.tokens += m.bytes.length;
      this.out.dataset.tokens = String(this.tokens);
      this.append(this.decoder.decode(m.bytes, { stream: true }));
    });
    client.on("sampleDone", (m) => {
      this.append(this.decoder.decode());
      this.out.dataset.done = "yes";
      // Which path wrote them: WebNN with its own KV cache, or the backend and its fast paths (the
      // pills' ids) through the KV cache, each byte chosen on the GPU or the CPU; where WebNN
      // failed midway, the backend wrote the rest.
      const paths = m.paths.length ? ` +${m.paths.join(" +")}` : "";
      const backend = `${backendName(m.backend)}${paths}, KV cache${m.chosenOnGpu ? ", chosen on the GPU" : ""}`;
      const path = m.webnn === 0 ? backend : m.webnn >= m.tokens ? "WebNN, KV cache" : `WebNN for the first ${m.webnn}, then ${backend}`;
      $("#sample-tps").textContent = `${m.tokens} tokens · ${fmt.rate(m.tokPerSec)} tok/s · ${path} · seed ${m.seed}`;
      const next = this.next;
      this.next = null;
      next?.();
    });
  }

  /** With an adapter loaded, its switch and Compare are offered. */
  showAdapter(loaded: boolean, canSample: boolean): void {
    $("#sample-adapter-box").hidden = !loaded;
    const compare = $<HTMLButtonElement>("#btn-sample-compare");
    compare.hidden = !loaded;
    compare.disabled = !(loaded && canSample);
    if (!loaded) this.showPanes(false);
  }

  private showPanes(comparing: boolean): void {
    $("#sample-panes").classList.toggle("comparing", comparing);
    $("#sample-base-out").hidden = !comparing;
  }

  /** A gallery model's sample settings in the fields, so that Generate writes its card's sample again. */
  use(s: GallerySample): void {
    const fields: [string, string | number][] = [["prompt", s.prompt], ["temperature", s.temperature], ["top-k", s.top_k], ["top-p", s.top_p], ["sample-seed", s.seed], ["length", s.tokens]];
    for (const [id, value] of fields) $<HTMLInputElement | HTMLTextAreaElement>(`#${id}`).value = String(value);
    $("#sample").scrollIntoView({ block: "start" });
    $("#btn-sample").focus();
  }

  private append(s: string): void {
    if (!s) return;
    this.text += s;
    this.out.textContent = this.text;
    this.out.scrollTop = this.out.scrollHeight;
    $<HTMLButtonElement>("#btn-sample-copy").disabled = false;
  }

  /** The prompt and its continuation so far, as text; where the clipboard refuses, says why. */
  private async copy(): Promise<void> {
    const status = $("#sample-copy-status");
    try {
      await navigator.clipboard.writeText(this.text);
      status.textContent = "Copied.";
    } catch (e) {
      status.textContent = `Could not copy: ${(e as Error).message || "the browser refused the clipboard"}.`;
    }
  }

  /** The fields' settings, or null when one is bad (said). */
  private options(): Options | null {
    try {
      return {
        temperature: numberField("temperature", "Temperature", 0, 2, false),
        topK: numberField("top-k", "Top-k", 0, 256, true),
        topP: numberField("top-p", "Top-p", 0, 1, false, true),
        seed: seedField(),
        maxTokens: numberField("length", "Length", 1, 10000, true),
      };
    } catch (e) {
      this.onError((e as Error).message);
      return null;
    }
  }

  private generate(): void {
    const options = this.options();
    if (!options) return;
    this.showPanes(false);
    const adapter = $("#sample-adapter-box").hidden ? undefined : $<HTMLInputElement>("#sample-adapter").checked;
    this.start(this.out, options, adapter);
  }

  /** The model alone, then with the adapter, from the same seed and settings. */
  private compare(): void {
    const options = this.options();
    if (!options) return;
    this.showPanes(true);
    $("#sample-out").textContent = "";
    this.next = () => this.start($("#sample-out"), options, true);
    this.start($("#sample-base-out"), options, false);
  }

  private start(out: HTMLElement, options: Options, adapter: boolean | undefined): void {
    const prompt = $<HTMLTextAreaElement>("#prompt").value;
    this.out = out;
    this.decoder = new TextDecoder();
    this.text = prompt;
    this.out.textContent = prompt;
    this.out.dataset.done = "no";
    this.tokens = 0;
    this.out.dataset.tokens = "0";
    $("#sample-tps").textContent = "";
    $("#sample-copy-status").textContent = "";
    this.client.send({ type: "sample", prompt, options, adapter });
  }
}
