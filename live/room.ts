// The live feed's one room: a Durable Object that every opted-in tab's
// WebSocket reaches (functions/live/socket.ts). It keeps a bounded ring of
// recent events (the one thing stored) and what each socket runs (in the
// socket's attachment, so it survives hibernation), checks every frame against
// schema.ts under per-connection and per-address rate limits, and sends each
// socket every event, batched at most once per flush_ms.
import { DurableObject } from "cloudflare:workers";
import { Bucket } from "./bucket";
import { ADDRESS_HEADER, COUNTRY_HEADER, type Activity, type Counts, LIVE, type LiveEvent, type Refusal, type ServerMessage, countKey, parseClientMessage } from "./schema";
import { describe } from "./words";

interface Attachment {
  country: string;
  activity: Activity | null;
}

interface Connection {
  bucket: Bucket;
  /** Refused messages in a row. */
  drops: number;
}

const RING_KEY = "ring";

export class Room extends DurableObject {
  private ring: LiveEvent[] = [];
  private nextId = 1;
  private pending: LiveEvent[] = [];
  private countsChanged = false;
  private lastFlush = 0;
  private timer: ReturnType<typeof setTimeout> | null = null;
  // In memory only: after hibernation (an idle room) every bucket starts full, as it would have refilled.
  private connections = new Map<WebSocket, Connection>();
  private addresses = new Map<string, Bucket>();

  constructor(ctx: DurableObjectState, env: Cloudflare.Env) {
    super(ctx, env);
    // A heartbeat is answered by the runtime, without waking the room.
    ctx.setWebSocketAutoResponse(new WebSocketRequestResponsePair("ping", "pong"));
    void ctx.blockConcurrencyWhile(async () => {
      this.ring = (await ctx.storage.get<LiveEvent[]>(RING_KEY)) ?? [];
      this.nextId = (this.ring.at(-1)?.id ?? 0) + 1;
    });
  }

  async fetch(request: Request): Promise<Response> {
    if (request.headers.get("Upgrade")?.toLowerCase() !== "websocket") return new Response("expects a WebSocket upgrade", { status: 426 });
    const tag = `a:${request.headers.get(ADDRESS_HEADER) ?? ""}`;
    if (this.ctx.getWebSockets().length >= LIVE.max_connections) return new Response("the feed is full", { status: 503 });
    // A connection costs its address a token too, so reconnecting over and over is no way round the limit.
    if (this.ctx.getWebSockets(tag).length >= LIVE.connections_per_address || !this.addressBucket(tag, Date.now()).take(Date.now())) {
      return new Response("too many connections from one address", { status: 429 });
    }
    const country = request.headers.get(COUNTRY_HEADER) ?? "";
    const [client, server] = Object.values(new WebSocketPair());
    this.ctx.acceptWebSocket(server, [tag]);
    server.serializeAttachment({ country: /^[A-Z0-9]{2}$/.test(country) ? country : "", activity: null } satisfies Attachment);
    this.send(server, { type: "hello", events: this.ring, counts: this.counts() });
    this.countsChanged = true;
    this.schedule();
    return new Response(null, { status: 101, webSocket: client });
  }

  webSocketMessage(ws: WebSocket, frame: string | ArrayBuffer): void {
    const now = Date.now();
    const conn = this.connection(ws, now);
    // The address pays only for what its connection may send: one flooding tab does not starve its neighbours' buckets.
    if (!conn.bucket.take(now) || !this.addressBucket(this.ctx.getTags(ws)[0] ?? "", now).take(now)) return this.refuse(ws, conn, "rate-limited");
    const msg = parseClientMessage(frame);
    if (typeof msg === "string") return this.refuse(ws, conn, msg);
    conn.drops = 0;
    const att = ws.deserializeAttachment() as Attachment;
    let id: number | null = null;
    if (msg.type === "start") id = this.announce("started", msg.activity, att.country);
    else if (msg.type === "finish" && att.activity) id = this.announce("finished", att.activity, att.country);
    att.activity = msg.type === "finish" ? null : msg.activity;
    ws.serializeAttachment(att);
    this.countsChanged = true;
    this.send(ws, { type: "ack", id });
    this.schedule();
  }

  webSocketClose(ws: WebSocket): void {
    this.closed(ws);
    try {
      ws.close();
    } catch {
      // already closed from this side
    }
  }

  webSocketError(ws: WebSocket): void {
    this.closed(ws);
  }

  private closed(ws: WebSocket): void {
    this.connections.delete(ws);
    this.countsChanged = true;
    this.schedule();
    const tag = this.ctx.getTags(ws)[0];
    const bucket = tag === undefined ? undefined : this.addresses.get(tag);
    if (bucket) setTimeout(() => this.forget(tag!), bucket.refillMs);
  }

  private addressBucket(tag: string, now: number): Bucket {
    let bucket = this.addresses.get(tag);
    if (!bucket) this.addresses.set(tag, (bucket = new Bucket(LIVE.per_address.burst, LIVE.per_address.per_s, now)));
    return bucket;
  }

  /** Drops an address from memory once none of its sockets is open and its bucket has refilled (it then limits nothing). */
  private forget(tag: string): void {
    const bucket = this.addresses.get(tag);
    if (!bucket || this.ctx.getWebSockets(tag).some((ws) => ws.readyState === WebSocket.READY_STATE_OPEN)) return;
    if (bucket.full(Date.now())) this.addresses.delete(tag);
    else setTimeout(() => this.forget(tag), bucket.refillMs);
  }

  private connection(ws: WebSocket, now: number): Connection {
    let conn = this.connections.get(ws);
    if (!conn) this.connections.set(ws, (conn = { bucket: new Bucket(LIVE.per_connection.burst, LIVE.per_connection.per_s, now), drops: 0 }));
    return conn;
  }

  /** The first refusal in a row says why; a flood gets no echo of itself, and past drops_to_close the socket is closed. */
  private refuse(ws: WebSocket, conn: Connection, reason: Refusal): void {
    conn.drops++;
    if (conn.drops >= LIVE.drops_to_close) {
      this.connections.delete(ws);
      return ws.close(1008, "too many refused messages");
    }
    if (reason !== "rate-limited" || conn.drops === 1) this.send(ws, { type: "refused", reason });
  }

  private announce(kind: LiveEvent["kind"], activity: Activity, country: string): number {
    const event: LiveEvent = { id: this.nextId++, at: Date.now(), kind, activity, country, text: describe(kind, activity, country) };
    this.ring.push(event);
    if (this.ring.length > LIVE.ring) this.ring.splice(0, this.ring.length - LIVE.ring);
    this.pending.push(event);
    return event.id;
  }

  private counts(): Counts {
    const groups = new Map<string, Counts["active"][number]>();
    let connected = 0;
    for (const ws of this.ctx.getWebSockets()) {
      if (ws.readyState !== WebSocket.READY_STATE_OPEN) continue; // closing: no longer here
      connected++;
      const a = (ws.deserializeAttachment() as Attachment).activity;
      if (!a) continue;
      const group = groups.get(countKey(a));
      if (group) group.n++;
      else groups.set(countKey(a), { work: a.work, preset: a.preset, backend: a.backend, n: 1 });
    }
    return { connected, active: [...groups.values()] };
  }

  /** Sends now when the last flush was flush_ms ago or more, else once that has passed. */
  private schedule(): void {
    if (this.timer !== null) return;
    const wait = this.lastFlush + LIVE.flush_ms - Date.now();
    if (wait <= 0) return this.flush();
    this.timer = setTimeout(() => {
      this.timer = null;
      this.flush();
    }, wait);
  }

  private flush(): void {
    this.lastFlush = Date.now();
    if (this.pending.length === 0 && !this.countsChanged) return;
    const frame = JSON.stringify({ type: "events", events: this.pending, counts: this.counts() } satisfies ServerMessage);
    // Unconfirmed: the events go out without waiting for the write; a ring lost in a crash costs nothing.
    if (this.pending.length) void this.ctx.storage.put(RING_KEY, this.ring, { allowUnconfirmed: true });
    this.pending = [];
    this.countsChanged = false;
    for (const ws of this.ctx.getWebSockets()) this.sendFrame(ws, frame);
  }

  private send(ws: WebSocket, msg: ServerMessage): void {
    this.sendFrame(ws, JSON.stringify(msg));
  }

  private sendFrame(ws: WebSocket, frame: string): void {
    try {
      ws.send(frame);
    } catch {
      // closing: webSocketClose will see to it
    }
  }
}

/** The Worker that hosts the room serves nothing itself: the site's Function is its only way in. */
export default {
  fetch(): Response {
    return new Response("Not found", { status: 404 });
  },
};
