// The live feed, the page's side: off until the visitor turns it on (kept in
// localStorage, off again in one click). On, this tab opens one same-origin
// WebSocket, reports what it runs (a work, a size, a backend and its paths:
// ids only, schema.ts) and shows what every tab in the feed runs. It asks the
// site first whether the feed runs here at all (facts.live.status): a host
// without the site's Functions answers no, and the panel stays hidden.
import { type Activity, type ClientMessage, type Counts, LIVE, type LiveEvent, type ServerMessage, type Work } from "../../live/schema";
import { presetOf } from "../engine/model";
import type { Status } from "../worker/protocol";
import { ArrowsView, describe } from "./arrows";
import { $, el } from "./dom";

type LinkState = "off" | "connecting" | "open" | "waiting";

/** What a status says this tab runs, in the feed's ids; null while it runs nothing. */
export function activityOf(s: Status): Activity | null {
  const work: Work | null = s.state === "training" ? (s.adapter ? "finetune" : "train") : s.state === "sampling" ? "sample" : null;
  const m = s.model;
  if (!work || !m || !s.backend || !LIVE.backends.includes(s.backend)) return null;
  return { work, preset: presetOf(m)?.id ?? "custom", backend: s.backend, paths: s.paths.slice(0, LIVE.max_paths) };
}

export class LiveFeed {
  private readonly box = $("#live");
  private readonly toggle = $<HTMLButtonElement>("#live-toggle");
  private readonly state = $("#live-state");
  private readonly counts = $("#live-counts");
  private readonly list = $("#live-feed");
  private readonly arrows = new ArrowsView($<HTMLCanvasElement>("#live-arrows"));
  private socket: WebSocket | null = null;
  private activity: Activity | null = null;
  private delay = LIVE.reconnect_ms[0];
  private retry = 0;
  private heartbeat = 0;

  constructor() {
    this.toggle.addEventListener("click", () => this.setOn(!this.on()));
  }

  /** Shows the panel where the feed runs, and joins it if the visitor said so before. */
  async start(): Promise<void> {
    let live = false;
    try {
      const res = await fetch(LIVE.status, { cache: "no-store" });
      live = res.ok && (await res.json()).live === true;
    } catch {
      // no answer: as on a host without the feed
    }
    this.box.dataset.live = live ? "yes" : "no";
    if (!live) return;
    this.box.hidden = false;
    this.setOn(this.on());
  }

  /** Called with every status: tells the feed when what this tab runs changes. */
  report(s: Status): void {
    const next = activityOf(s);
    if (JSON.stringify(next) === JSON.stringify(this.activity)) return;
    this.activity = next;
    this.send(next ? { type: "start", activity: next } : { type: "finish" });
  }

  private on(): boolean {
    try {
      return localStorage.getItem(LIVE.storage_key) === "on";
    } catch {
      return false; // storage blocked: never on by default
    }
  }

  private setOn(on: boolean): void {
    try {
      if (on) localStorage.setItem(LIVE.storage_key, "on");
      else localStorage.removeItem(LIVE.storage_key);
    } catch {
      // storage blocked: on for this page only
    }
    this.toggle.setAttribute("aria-pressed", String(on));
    this.toggle.textContent = on ? "Leave the live feed" : "Join the live feed";
    if (on) {
      if (!this.socket && !this.retry) this.connect();
      return;
    }
    clearTimeout(this.retry);
    this.retry = 0;
    this.delay = LIVE.reconnect_ms[0];
    const socket = this.socket;
    this.socket = null;
    socket?.close(1000, "left the feed");
    this.list.replaceChildren();
    this.showCounts(null);
    this.link("off");
  }

  private connect(): void {
    this.retry = 0;
    const url = new URL(LIVE.socket, location.href);
    url.protocol = location.protocol === "https:" ? "wss:" : "ws:";
    const socket = new WebSocket(url);
    this.socket = socket;
    this.link("connecting");
    socket.onopen = () => {
      this.delay = LIVE.reconnect_ms[0];
      this.link("open");
      // Already announced when it started, if it was: counted again without a second event.
      if (this.activity) this.send({ type: "resume", activity: this.activity });
      this.heartbeat = window.setInterval(() => socket.send("ping"), LIVE.heartbeat_s * 1000);
    };
    socket.onmessage = (ev) => this.receive(ev.data);
    socket.onclose = () => {
      clearInterval(this.heartbeat);
      if (this.socket !== socket) return; // left the feed
      this.socket = null;
      // Full jitter, so tabs dropped together do not come back together.
      const wait = Math.round(this.delay / 2 + (Math.random() * this.delay) / 2);
      this.delay = Math.min(this.delay * 2, LIVE.reconnect_ms[1]);
      this.link("waiting", wait);
      this.retry = window.setTimeout(() => this.connect(), wait);
    };
  }

  private send(msg: ClientMessage): void {
    if (this.socket?.readyState === WebSocket.OPEN) this.socket.send(JSON.stringify(msg));
  }

  private receive(data: unknown): void {
    if (typeof data !== "string") return;
    let msg: ServerMessage;
    try {
      msg = JSON.parse(data);
    } catch {
      return;
    }
    if (msg.type === "hello") {
      this.list.replaceChildren();
      this.add(msg.events);
      this.showCounts(msg.counts);
    } else if (msg.type === "events") {
      this.add(msg.events);
      this.showCounts(msg.counts);
    }
  }

  /** Newest first, at most the server's ring; the server's words, as text. */
  private add(events: LiveEvent[]): void {
    for (const e of events) {
      const time = el("time", { datetime: new Date(e.at).toISOString() }, new Date(e.at).toLocaleTimeString());
      const li = el("li", { "data-kind": e.kind, "data-backend": e.activity.backend });
      li.append(time, " ", e.text);
      this.list.prepend(li);
    }
    while (this.list.childElementCount > LIVE.ring) this.list.lastElementChild!.remove();
  }

  private showCounts(counts: Counts | null): void {
    const active = counts?.active ?? [];
    const running = (work: Work) => active.filter((g) => g.work === work).reduce((n, g) => n + g.n, 0);
    for (const work of LIVE.works as Work[]) this.counts.dataset[work] = String(running(work));
    this.counts.dataset.connected = String(counts?.connected ?? 0);
    if (!counts) {
      this.counts.textContent = "";
    } else {
      const tabs = `${counts.connected} tab${counts.connected === 1 ? "" : "s"} in the feed`;
      this.counts.textContent = active.length ? `${tabs}: ${describe(active)}.` : `${tabs}; none runs anything right now.`;
    }
    this.arrows.show(counts);
  }

  private link(state: LinkState, waitMs = 0): void {
    this.box.dataset.link = state;
    this.state.textContent = {
      off: "Off. Nothing is sent and no connection is open.",
      connecting: "Connecting…",
      open: "On: this tab shares what it runs and shows what others run.",
      waiting: `Connection lost; trying again in ${Math.ceil(waitMs / 1000)} s.`,
    }[state];
  }
}
