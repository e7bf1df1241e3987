"""A local server for dist/ with the production headers (headers.py), Cloudflare
Pages' URL behaviour (folder URLs, `_redirects`, the top-level 404.html), and an
optional live reload for `python build.py serve`.

Live reload lives only here: the server adds a same-origin <script> to HTML it
sends, and that script polls /__livereload for the build number, so the built
files never contain it and the CSP needs no exception.
"""
import http.server
import sys
import threading
from functools import partial
from pathlib import Path
from urllib.parse import urlsplit

from . import headers

RELOAD_SCRIPT = "/__livereload.js"
RELOAD_VERSION = "/__livereload"
HIDDEN = {"/_headers", "/_redirects"}  # Pages reads these files; it never serves them


class LiveReload:
    """The number of the last successful build; pages reload when it changes."""

    def __init__(self):
        self.version = 0

    def bump(self):
        self.version += 1


def read_redirects(dist: Path) -> dict[str, tuple[str, int]]:
    path = dist / "_redirects"
    if not path.exists():
        return {}
    redirects = {}
    for line in path.read_text().splitlines():
        parts = line.split()
        if parts and not parts[0].startswith("#"):
            redirects[parts[0]] = (parts[1], int(parts[2]) if len(parts) > 2 else 302)
    return redirects


class Handler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {
        **http.server.SimpleHTTPRequestHandler.extensions_map,
        ".js": "text/javascript",
        ".mjs": "text/javascript",
        ".map": "application/json",
        ".json": "application/json",
        ".wasm": "application/wasm",
        ".svg": "image/svg+xml",
        ".xml": "application/xml",
        ".txt": "text/plain; charset=utf-8",
        ".html": "text/html; charset=utf-8",
        ".css": "text/css; charset=utf-8",
        ".tinygpt": "application/octet-stream",
    }

    def __init__(self, *args, dist: Path, live: LiveReload | None, **kwargs):
        self.dist = dist
        self.live = live
        super().__init__(*args, directory=str(dist), **kwargs)

    def log_message(self, format, *args):
        pass  # quiet: tests and `serve` print what matters themselves

    def end_headers(self):
        for name, value in headers.for_path(urlsplit(self.path).path):
            self.send_header(name, value)
        super().end_headers()

    def do_GET(self):
        self._serve(send_body=True)

    def do_HEAD(self):
        self._serve(send_body=False)

    def _serve(self, send_body: bool):
        path = urlsplit(self.path).path
        if self.live and path == RELOAD_VERSION:
            return self._send(200, "text/plain", str(self.live.version).encode(), send_body)
        if self.live and path == RELOAD_SCRIPT:
            body = Path(__file__).with_name("livereload.js").read_bytes()
            return self._send(200, "text/javascript", body, send_body)
        redirect = read_redirects(self.dist).get(path)
        if redirect:
            self.send_response(redirect[1])
            self.send_header("Location", redirect[0])
            self.send_header("Content-Length", "0")
            return self.end_headers()
        if path in HIDDEN or "/." in path:
            return self._not_found(send_body)
        target = Path(self.translate_path(self.path))
        if target.is_dir() and path.endswith("/"):
            target = target / "index.html"
        if target.is_dir():  # Pages answers /docs with a redirect to /docs/
            self.send_response(308)
            self.send_header("Location", path + "/")
            self.send_header("Content-Length", "0")
            return self.end_headers()
        if not target.is_file():
            return self._not_found(send_body)
        if target.suffix == ".html" and self.live:
            tag = f'<script src="{RELOAD_SCRIPT}" defer></script></head>'
            body = target.read_text().replace("</head>", tag, 1).encode()
            return self._send(200, self.extensions_map[".html"], body, send_body)
        if send_body:
            super().do_GET()
        else:
            super().do_HEAD()

    def list_directory(self, path):
        self._not_found(True)

    def _not_found(self, send_body: bool):
        page = self.dist / "404.html"
        body = page.read_bytes() if page.exists() else b"404 not found"
        self._send(404, self.extensions_map[".html"], body, send_body)

    def _send(self, status: int, content_type: str, body: bytes, send_body: bool):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if send_body:
            self.wfile.write(body)


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        # A browser that drops a connection mid-response (a cancelled fetch, a closed tab) is no fault of ours.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def make_server(dist: Path, port: int = 0, live: LiveReload | None = None) -> http.server.ThreadingHTTPServer:
    """A server bound to 127.0.0.1 (port 0 picks a free one); call serve_forever()."""
    return Server(("127.0.0.1", port), partial(Handler, dist=Path(dist), live=live))


def start_in_thread(dist: Path, port: int = 0, live: LiveReload | None = None) -> tuple[http.server.ThreadingHTTPServer, str]:
    """Start serving dist/ in a daemon thread; returns the server and its base URL."""
    server = make_server(dist, port, live)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    host, port = server.server_address[:2]
    return server, f"http://{host}:{port}"
