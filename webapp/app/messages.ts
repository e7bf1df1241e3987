// The message area: info, warnings and errors, newest first, in one polite live
// region. Information without an action fades out by itself after
// facts.app.message_fade_ms (held while the pointer or focus is on it);
// warnings, errors and messages that offer an action stay until dismissed. At
// most facts.app.messages_shown show at once: older ones that must stay wait,
// hidden, behind "Show older"; "Dismiss all" clears every one. The area sits in
// the page's flow, so it never covers a control.
import facts from "../../tinygpt/facts.json";
import type { MessageLevel } from "../worker/protocol";
import { el } from "./dom";

const FADE_MS = facts.app.message_fade_ms;
const SHOWN = facts.app.messages_shown;
const FADE_OUT_MS = 400; // the opacity transition of .message.fading in app.css
const LEVEL_NAMES: Record<MessageLevel, string> = { info: "Note", warn: "Warning", error: "Error" };

export class Messages {
  private list = el("div", { class: "message-list", "aria-live": "polite" });
  private expanded = false;
  private more = el("button", { type: "button", class: "messages-more", "aria-expanded": "false" });
  private clear = el("button", { type: "button", class: "messages-clear" });
  private bar = el("div", { class: "messages-bar", hidden: "" });

  /** fallbackFocus: where focus goes when the message holding it goes away and no other is left. */
  constructor(box: HTMLElement, private fallbackFocus: () => HTMLElement | null) {
    this.bar.append(this.more, this.clear);
    box.replaceChildren(this.list, this.bar);
    this.more.addEventListener("click", () => {
      this.expanded = !this.expanded;
      this.update();
    });
    this.clear.addEventListener("click", () => this.dismissAll());
  }

  show(level: MessageLevel, text: string, actions: { label: string; run: () => void }[] = []): HTMLElement {
    const item = el("div", { class: `message message-${level}` });
    const body = el("p");
    body.append(el("strong", { class: "message-level" }, `${LEVEL_NAMES[level]}: `), text);
    item.append(body);
    for (const a of actions) {
      const b = el("button", { type: "button" }, a.label);
      b.addEventListener("click", () => {
        this.remove(item);
        a.run();
      });
      item.append(b);
    }
    const close = el("button", { type: "button", class: "dismiss", "aria-label": "Dismiss message" }, "×");
    close.addEventListener("click", () => this.remove(item));
    item.append(close);
    if (level === "info" && actions.length === 0) this.fadeLater(item);
    this.list.prepend(item);
    this.update();
    return item;
  }

  private items(): HTMLElement[] {
    return [...this.list.querySelectorAll<HTMLElement>(":scope > .message")];
  }

  /** Fades the item out FADE_MS after it appears, counting afresh once pointer and focus leave it. */
  private fadeLater(item: HTMLElement): void {
    let timers: number[] = [];
    const stop = () => {
      for (const t of timers) clearTimeout(t);
      timers = [];
      item.classList.remove("fading");
    };
    const start = () => {
      stop();
      timers = [
        window.setTimeout(() => item.classList.add("fading"), FADE_MS),
        window.setTimeout(() => this.remove(item), FADE_MS + FADE_OUT_MS),
      ];
    };
    item.addEventListener("pointerenter", stop);
    item.addEventListener("pointerleave", () => item.contains(document.activeElement) || start());
    item.addEventListener("focusin", stop);
    item.addEventListener("focusout", (e) => item.contains(e.relatedTarget as Node | null) || item.matches(":hover") || start());
    start();
  }

  private remove(item: HTMLElement): void {
    if (!item.isConnected) return;
    const hadFocus = item.contains(document.activeElement);
    const items = this.items();
    const at = items.indexOf(item);
    item.remove();
    this.update();
    if (!hadFocus) return;
    // Focus moves to the message that takes this one's place, else the one before, else away.
    const rest = this.items().filter((m) => !m.hidden);
    const next = rest[Math.min(at, rest.length - 1)];
    (next?.querySelector<HTMLElement>(".dismiss") ?? this.fallbackFocus())?.focus();
  }

  private dismissAll(): void {
    for (const item of this.items()) item.remove();
    this.expanded = false;
    this.update();
    this.fallbackFocus()?.focus();
  }

  /** Shows the newest SHOWN (all when expanded); information past them goes, the rest waits hidden. */
  private update(): void {
    for (const item of this.items().slice(SHOWN)) {
      if (item.matches(".message-info") && !item.querySelector("button:not(.dismiss)")) item.remove();
    }
    const items = this.items();
    items.forEach((item, i) => (item.hidden = !this.expanded && i >= SHOWN));
    const waiting = Math.max(0, items.length - SHOWN);
    if (!waiting) this.expanded = false;
    this.more.hidden = waiting === 0;
    this.more.textContent = this.expanded ? `Hide ${waiting} older` : `Show ${waiting} older`;
    this.more.setAttribute("aria-expanded", String(this.expanded));
    this.clear.textContent = `Dismiss all (${items.length})`;
    this.bar.hidden = items.length < 2;
  }
}
