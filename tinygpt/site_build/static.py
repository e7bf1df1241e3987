"""The static step: the site's own assets, before the app's (bundle.py): the site
CSS with pygments' highlighting classes, content-hashed under dist/assets/
(assets["site_css"]), and site/static/ (favicon, ...) copied to the top level."""
import shutil

from . import markdown
from .bundle import hashed_name
from .context import Context


def run(ctx: Context) -> str:
    assets_dir = ctx.out / "assets"
    assets_dir.mkdir(parents=True, exist_ok=True)
    css = ((ctx.root / "site" / "site.css").read_text() + "\n/* pygments */\n" + markdown.pygments_css()).encode()
    name = hashed_name("site", css, ".css")
    (assets_dir / name).write_bytes(css)
    ctx.assets["site_css"] = "/assets/" + name
    static = ctx.root / "site" / "static"
    files = [p for p in sorted(static.rglob("*")) if p.is_file()]
    for path in files:
        target = ctx.out / path.relative_to(static)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    return f"site css {len(css) / 1024:.0f} KiB, {len(files)} static file{'s' if len(files) != 1 else ''}"
