// The message area: info, warnings and errors, newest first, each dismissable.
import type { MessageLevel } from "../worker/protocol";
import { el } from "./dom";

export class Messages {
  constructor(private box: HTMLElement) {}

  show(level: MessageLevel, text: string, actions: { label: string; run: () => void }[] = []): HTMLElement {
    const item = el("div", { class: `message message-${level}`, role: level === "error" ? "alert" : "status" });
    item.append(el("p", {}, text));
    for (const a of actions) {
      const b = el("button", { type: "button" }, a.label);
      b.addEventListener("click", () => {
        item.remove();
        a.run();
      });
      item.append(b);
    }
    const close = el("button", { type: "button", class: "dismiss", "aria-label": "Dismiss message" }, "×");
    close.addEventListener("click", () => item.remove());
    item.append(close);
    this.box.prepend(item);
    return item;
  }
}
