// Sampling: prompt and settings in, bytes streamed back from the worker and
// decoded as UTF-8 on the fly (a character may span several tokens).
import type { WorkerClient } from "./client";
import { $ } from "./dom";
import * as fmt from "./format";
import { backendName } from "./progress";

function numberField(id: string, label: string, min: number, max: number, integer: boolean): number {
  const v = Number($<HTMLInputElement>(`#${id}`).value);
  if (!Number.isFinite(v) || v < min || v > max || (integer && !Number.isInteger(v))) {
    throw new Error(`${label} must be ${integer ? "a whole number" : "a number"} from ${min} to ${max}.`);
  }
  return v;
}

export class SampleView {
  private out = $("#sample-out");
  private decoder = new TextDecoder();
  private text = "";
  private tokens = 0;

  constructor(private client: WorkerClient, private onError: (text: string) => void) {
    $("#btn-sample").addEventListener("click", () => this.start());
    $("#btn-sample-stop").addEventListener("click", () => client.request("stopSample"));
    client.on("token", (m) => {
      // Tokens so far, as data-tokens: a byte can be part of a character still to come.
      this.out.dataset.tokens = String(++this.tokens);
      this.append(this.decoder.decode(m.bytes, { stream: true }));
    });
    client.on("sampleDone", (m) => {
      this.append(this.decoder.decode());
      this.out.dataset.done = "yes";
      // Which path wrote them: the backend and its fast paths (the pills' ids), through the KV cache.
      const paths = m.paths.length ? ` +${m.paths.join(" +")}` : "";
      $("#sample-tps").textContent = `${m.tokens} tokens · ${fmt.rate(m.tokPerSec)} tok/s · ${backendName(m.backend)}${paths}, KV cache`;
    });
  }

  private append(s: string): void {
    if (!s) return;
    this.text += s;
    this.out.textContent = this.text;
    this.out.scrollTop = this.out.scrollHeight;
  }

  private start(): void {
    let temperature: number, topK: number, maxTokens: number;
    try {
      temperature = numberField("temperature", "Temperature", 0, 2, false);
      topK = numberField("top-k", "Top-k", 0, 256, true);
      maxTokens = numberField("length", "Length", 1, 10000, true);
    } catch (e) {
      this.onError((e as Error).message);
      return;
    }
    const prompt = $<HTMLTextAreaElement>("#prompt").value;
    this.decoder = new TextDecoder();
    this.text = prompt;
    this.out.textContent = prompt;
    this.out.dataset.done = "no";
    this.tokens = 0;
    this.out.dataset.tokens = "0";
    $("#sample-tps").textContent = "";
    this.client.send({ type: "sample", prompt, temperature, topK, maxTokens });
  }
}
