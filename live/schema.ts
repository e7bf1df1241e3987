// The live feed's wire format, shared by the room (live/room.ts) and the page
// (webapp/app/live.ts). Every field a client may send is an id from
// facts.json, so the server can check it against a closed list and build the
// words itself: nothing a client writes is ever shown to anyone.
import facts from "../tinygpt/facts.json";

export const LIVE = facts.live;

export type Work = "train" | "finetune" | "sample";

/** What one tab runs, as it reports it. */
export interface Activity {
  work: Work;
  preset: string;
  backend: string;
  paths: string[];
}

/**
 * start and finish are announced to everyone; resume sets what a tab runs
 * without an event, for a tab that reconnects mid-run (it was announced then).
 */
export type ClientMessage = { type: "start"; activity: Activity } | { type: "resume"; activity: Activity } | { type: "finish" };

export interface LiveEvent {
  id: number;
  /** Server time, ms since the epoch. */
  at: number;
  kind: "started" | "finished";
  activity: Activity;
  /** ISO 3166 alpha-2 from the edge, or "" where it gave none. */
  country: string;
  /** The server's words for it: to be shown as text. */
  text: string;
}

/** How many tabs run each activity now (those that opted in), and how many are connected at all. */
export interface Counts {
  connected: number;
  active: { work: Work; preset: string; backend: string; n: number }[];
}

export type Refusal = "too-large" | "not-json" | "unknown-type" | "invalid" | "rate-limited";

export type ServerMessage =
  | { type: "hello"; events: LiveEvent[]; counts: Counts }
  | { type: "events"; events: LiveEvent[]; counts: Counts }
  /** A message taken: the event it made (null for resume, or a finish with nothing running). */
  | { type: "ack"; id: number | null }
  | { type: "refused"; reason: Refusal };

export const PRESETS: readonly string[] = [...facts.presets.map((p) => p.id), "custom"];
// The optional paths a backend runs: the levers, and facts.backends entries that are not backends themselves (threads).
const PATHS: ReadonlySet<string> = new Set([...facts.levers.map((l) => l.id), ...facts.backends.map((b) => b.id).filter((id) => !LIVE.backends.includes(id))]);

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
const hasOnly = (o: Record<string, unknown>, keys: string[]) => Object.keys(o).every((k) => keys.includes(k));

function activity(v: unknown): Activity | null {
  if (!isRecord(v) || !hasOnly(v, ["work", "preset", "backend", "paths"])) return null;
  const { work, preset, backend, paths } = v;
  if (typeof work !== "string" || !(LIVE.works as string[]).includes(work)) return null;
  if (typeof preset !== "string" || !PRESETS.includes(preset)) return null;
  if (typeof backend !== "string" || !LIVE.backends.includes(backend)) return null;
  if (!Array.isArray(paths) || paths.length > LIVE.max_paths) return null;
  if (!paths.every((p) => typeof p === "string" && PATHS.has(p)) || new Set(paths).size !== paths.length) return null;
  return { work: work as Work, preset, backend, paths: [...paths] as string[] };
}

/** A client's frame as a message, or why it is refused. Bounded by max_frame_bytes before it is parsed. */
export function parseClientMessage(frame: string | ArrayBuffer): ClientMessage | Refusal {
  if (typeof frame !== "string") return frame.byteLength > LIVE.max_frame_bytes ? "too-large" : "not-json";
  // UTF-8 is at most 3 bytes a UTF-16 unit: a frame of max/3 units needs no encoding to pass.
  if (frame.length > LIVE.max_frame_bytes || (frame.length > LIVE.max_frame_bytes / 3 && new TextEncoder().encode(frame).length > LIVE.max_frame_bytes)) {
    return "too-large";
  }
  let v: unknown;
  try {
    v = JSON.parse(frame);
  } catch {
    return "not-json";
  }
  if (!isRecord(v) || typeof v.type !== "string") return "invalid";
  switch (v.type) {
    case "finish":
      return hasOnly(v, ["type"]) ? { type: "finish" } : "invalid";
    case "start":
    case "resume": {
      const a = hasOnly(v, ["type", "activity"]) ? activity(v.activity) : null;
      return a ? { type: v.type, activity: a } : "invalid";
    }
    default:
      return "unknown-type";
  }
}

/** One key per distinct activity for counting (paths aside: the counts are by work, preset and backend). */
export function countKey(a: Pick<Activity, "work" | "preset" | "backend">): string {
  return `${a.work}/${a.preset}/${a.backend}`;
}

/** What the Pages Function tells the room of a connection (replacing any a client sent): held in memory, never stored or logged. */
export const COUNTRY_HEADER = "X-Live-Country";
export const ADDRESS_HEADER = "X-Live-Address";
