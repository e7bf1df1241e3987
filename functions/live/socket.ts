// GET /live/socket: an opted-in tab's WebSocket, handed to the one room
// (live/room.ts) with the two facts the room may know of it: a coarse country
// from the edge and the client's address, for its rate limits.
import { ADDRESS_HEADER, COUNTRY_HEADER } from "../../live/schema";

interface Env {
  LIVE_ROOM: DurableObjectNamespace;
}

export const onRequestGet: PagesFunction<Env> = async ({ request, env }) => {
  if (request.headers.get("Upgrade")?.toLowerCase() !== "websocket") return new Response("expects a WebSocket upgrade", { status: 426 });
  // Browsers send Origin with every handshake: a page of another site cannot join.
  if (request.headers.get("Origin") !== new URL(request.url).origin) return new Response("another origin", { status: 403 });
  // A fresh request: no cookie, user agent or other header of the client's reaches the room.
  const headers = new Headers({ Upgrade: "websocket" });
  headers.set(COUNTRY_HEADER, String(request.cf?.country ?? ""));
  headers.set(ADDRESS_HEADER, request.headers.get("CF-Connecting-IP") ?? "");
  const room = env.LIVE_ROOM.get(env.LIVE_ROOM.idFromName("world"));
  return room.fetch(new Request(request.url, { headers }));
};
