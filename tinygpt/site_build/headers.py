"""The HTTP headers the site is served with: one definition for Cloudflare Pages
(`_headers`, written by deploy.py) and for the local server (serve.py).

Rules follow Cloudflare's `_headers` semantics: every rule whose pattern matches
the path applies, in order; a `!` entry detaches a header set by an earlier rule
(so hashed assets can replace the site-wide short caching with a long one).
"""
import re

from tinygpt.facts import FACTS

CSP = "; ".join([
    "default-src 'self'",
    "script-src 'self' 'wasm-unsafe-eval'",  # WebAssembly CPU backend; no inline script
    "worker-src 'self'",
    "connect-src 'self'",
    "img-src 'self' data:",
    "style-src 'self'",
    "object-src 'none'",
    "base-uri 'self'",
    "frame-ancestors 'none'",
    "form-action 'none'",  # the site has no forms that submit anywhere
    "require-trusted-types-for 'script'",  # script sinks (innerHTML, new Worker, ...) take no plain strings
    f"trusted-types {FACTS['app']['trusted_types_policy']}",  # the one policy: Worker scripts from /assets/ (webapp/trusted.ts)
])

SHORT_CACHE = "public, max-age=0, must-revalidate"  # HTML, manifests, feed: revalidate, cheap with ETags
LONG_CACHE = "public, max-age=31536000, immutable"  # content-hashed names never change

# (URL pattern, [(header, value) or ("!", header)])
RULES: list[tuple[str, list[tuple[str, str]]]] = [
    ("/*", [
        ("Cross-Origin-Opener-Policy", "same-origin"),  # with COEP: crossOriginIsolated, so threads work
        ("Cross-Origin-Embedder-Policy", "require-corp"),
        ("Cross-Origin-Resource-Policy", "same-origin"),
        ("Content-Security-Policy", CSP),
        ("X-Content-Type-Options", "nosniff"),
        ("Referrer-Policy", "strict-origin-when-cross-origin"),
        ("Cache-Control", SHORT_CACHE),
    ]),
    ("/assets/*", [
        ("!", "Cache-Control"),
        ("Cache-Control", LONG_CACHE),
    ]),
]


def _matches(pattern: str, path: str) -> bool:
    regex = "".join(".*" if part == "*" else re.escape(part) for part in re.split(r"(\*)", pattern))
    return re.fullmatch(regex, path) is not None


def for_path(path: str) -> list[tuple[str, str]]:
    """The headers served for a URL path, as Cloudflare Pages would combine them."""
    headers: dict[str, list[str]] = {}
    for pattern, entries in RULES:
        if not _matches(pattern, path):
            continue
        for name, value in entries:
            if name == "!":
                headers.pop(value.lower(), None)
            else:
                headers.setdefault(name.lower(), [name]).append(value)
    return [(values[0], ", ".join(values[1:])) for values in headers.values()]


def headers_file() -> str:
    """The `_headers` file for Cloudflare Pages."""
    blocks = []
    for pattern, entries in RULES:
        lines = [pattern] + [f"  ! {value}" if name == "!" else f"  {name}: {value}" for name, value in entries]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"
