// GET /live/status.json: whether the feed runs here. The build writes a static
// file at this path saying it does not, which a host without Functions serves
// instead; a deploy whose project lacks the room's binding says so too.
interface Env {
  LIVE_ROOM?: DurableObjectNamespace;
}

export const onRequestGet: PagesFunction<Env> = ({ env }) => Response.json({ live: env.LIVE_ROOM !== undefined }, { headers: { "Cache-Control": "no-store" } });
