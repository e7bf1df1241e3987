// Load on the live feed: N WebSocket clients, each from its own loopback
// address (127.0.x.y, as visitors come from their own), each sending one
// event a second (start, then finish, in turn) for S seconds, inside the rate
// limits. Every client receives every event; the figures are the events the
// room took, the deliveries, those lost (an event taken but not received by a
// client that was connected throughout), and the delivery latency from the
// sender's send to each receipt. Bounded: it ends by itself after the run and
// a drain of at most DRAIN_S, and prints one JSON line.
//   node bench/live_load.mjs --url http://127.0.0.1:8788 --clients 500 --seconds 30
import { parseArgs } from "node:util";
import WebSocket from "ws";
import facts from "../tinygpt/facts.json" with { type: "json" };

const DRAIN_S = 15;
const CONNECTING_AT_ONCE = 50;
const { values: opt } = parseArgs({
  options: { url: { type: "string" }, clients: { type: "string", default: "500" }, seconds: { type: "string", default: "30" } },
});
const base = new URL(opt.url);
const clients = Number(opt.clients);
const seconds = Number(opt.seconds);
const socketUrl = new URL(facts.live.socket, base);
socketUrl.protocol = base.protocol === "https:" ? "wss:" : "ws:";

const presets = [...facts.presets.map((p) => p.id), "custom"];

// Receipts: (event id, time) pairs in typed arrays, matched to send times at the end (a receipt can
// come before its sender's ack). Sized for every client receiving every event, with room to spare.
const capacity = Math.ceil(clients * clients * (seconds + 2) * 1.1);
const receiptIds = new Int32Array(capacity);
const receiptAt = new Float64Array(capacity);
let receipts = 0;
let overflow = 0;
const sentAt = new Map(); // event id -> send time
let sent = 0;
let refused = 0;
let closedEarly = 0;

function connect(i) {
  return new Promise((resolve, reject) => {
    const localAddress = `127.0.${1 + Math.floor(i / 250)}.${2 + (i % 250)}`;
    // No permessage-deflate: inflating 500 sockets' frames in this one process would measure it, not the room.
    const ws = new WebSocket(socketUrl, { origin: base.origin, localAddress, perMessageDeflate: false });
    const waiting = []; // send times of messages not yet acked, in order
    ws.on("message", (data) => {
      const now = performance.now();
      const msg = JSON.parse(data.toString());
      if (msg.type === "ack") {
        const t = waiting.shift();
        if (msg.id !== null) sentAt.set(msg.id, t);
      } else if (msg.type === "refused") {
        waiting.shift();
        refused++;
      } else if (msg.type === "events") {
        for (const e of msg.events) {
          if (receipts === capacity) overflow++;
          else {
            receiptIds[receipts] = e.id;
            receiptAt[receipts++] = now;
          }
        }
      }
    });
    ws.on("open", () => resolve({ ws, waiting }));
    ws.on("error", reject);
    ws.on("unexpected-response", (_, res) => reject(new Error(`client ${i}: HTTP ${res.statusCode}`)));
    ws.on("close", () => {
      if (!done) closedEarly++;
    });
  });
}

let done = false;
const t0 = performance.now();
const conns = [];
for (let i = 0; i < clients; i += CONNECTING_AT_ONCE) {
  conns.push(...(await Promise.all(Array.from({ length: Math.min(CONNECTING_AT_ONCE, clients - i) }, (_, k) => connect(i + k)))));
}
const connectS = (performance.now() - t0) / 1000;

// Client i sends at i/clients of each second, so the load is even.
const start = performance.now() + 200;
const timers = conns.map((c, i) => {
  let n = 0;
  const send = () => {
    // Each client's starts step through the ids, each client from its own place: the same every run.
    const pick = (list) => list[(i + n) % list.length];
    const msg = n % 2 === 0 ? { type: "start", activity: { work: pick(facts.live.works), preset: pick(presets), backend: pick(facts.live.backends), paths: [] } } : { type: "finish" };
    c.waiting.push(performance.now());
    c.ws.send(JSON.stringify(msg));
    sent++;
    n++;
    if (n < seconds) timers[i] = setTimeout(send, start + n * 1000 + (i / clients) * 1000 - performance.now());
  };
  return setTimeout(send, start + (i / clients) * 1000 - performance.now());
});
// Runs until every taken event reached every client, or the drain ends.
const end = start + seconds * 1000;
await new Promise((resolve) => {
  const check = setInterval(() => {
    const now = performance.now();
    if (now > end + DRAIN_S * 1000 || (now > end && sent === clients * seconds && sentAt.size + refused === sent && receipts >= sentAt.size * clients)) {
      clearInterval(check);
      resolve();
    }
  }, 100);
});
done = true;
timers.forEach(clearTimeout);
for (const c of conns) c.ws.close(1000);

const latencies = [];
const got = new Map();
for (let k = 0; k < receipts; k++) {
  const t = sentAt.get(receiptIds[k]);
  got.set(receiptIds[k], (got.get(receiptIds[k]) ?? 0) + 1);
  if (t !== undefined) latencies.push(receiptAt[k] - t);
}
latencies.sort((a, b) => a - b);
const q = (p) => (latencies.length ? latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] : null);
let lost = 0;
for (const id of sentAt.keys()) lost += clients - Math.min(clients, got.get(id) ?? 0);
const runS = seconds;
console.log(
  JSON.stringify({
    clients,
    seconds,
    connect_s: +connectS.toFixed(2),
    sent,
    taken: sentAt.size,
    refused,
    delivered: receipts,
    lost,
    closed_early: closedEarly,
    overflow,
    sent_per_s: +(sent / runS).toFixed(1),
    delivered_per_s: +(receipts / runS).toFixed(1),
    p50_ms: q(0.5) === null ? null : +q(0.5).toFixed(1),
    p99_ms: q(0.99) === null ? null : +q(0.99).toFixed(1),
    max_ms: latencies.length ? +latencies[latencies.length - 1].toFixed(1) : null,
  }),
);
process.exit(0);
