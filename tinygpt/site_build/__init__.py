"""Build steps. Each module exposes `run(ctx: Context) -> str`, writes only under
ctx.out and returns a one-line summary; steps share nothing but that folder."""
