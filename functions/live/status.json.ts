// GET /live/status.json: the feed runs here. The build writes a static file at
// this path saying it does not, which a host without Functions serves instead.
export const onRequestGet: PagesFunction = () => Response.json({ live: true }, { headers: { "Cache-Control": "no-store" } });
