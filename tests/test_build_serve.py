"""The local server: production headers, folder URLs, 404, redirects, live reload."""
import urllib.error
import urllib.request

import pytest

from tinygpt.site_build import headers, serve


@pytest.fixture
def dist(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "assets").mkdir()
    (tmp_path / "index.html").write_text("<html><head></head><body>home</body></html>")
    (tmp_path / "docs" / "index.html").write_text("<html><head></head><body>docs</body></html>")
    (tmp_path / "404.html").write_text("<html><head></head><body>not here</body></html>")
    (tmp_path / "assets" / "app-X.js").write_text("1")
    (tmp_path / "_headers").write_text(headers.headers_file())
    (tmp_path / "_redirects").write_text("/old/ /docs/ 301\n")
    return tmp_path


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args):
        return None


def get(url):
    opener = urllib.request.build_opener(NoRedirect)
    try:
        r = opener.open(url)
        return r.status, r.headers, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode()


def start(dist, live=None):
    server, url = serve.start_in_thread(dist, 0, live)
    return server, url


def test_serves_folder_urls_with_production_headers(dist):
    server, url = start(dist)
    try:
        status, h, body = get(url + "/docs/")
        assert status == 200 and "docs" in body
        assert {k: h[k] for k, _ in headers.for_path("/docs/")} == dict(headers.for_path("/docs/"))
        assert get(url + "/assets/app-X.js")[1]["Cache-Control"] == headers.LONG_CACHE
        assert get(url + "/assets/app-X.js")[1]["Content-Type"] == "text/javascript"
        status, h, _ = get(url + "/docs")
        assert status == 308 and h["Location"] == "/docs/"
        status, h, _ = get(url + "/old/")
        assert status == 301 and h["Location"] == "/docs/"
        status, h, body = get(url + "/nope/")
        assert status == 404 and "not here" in body and h["Cross-Origin-Embedder-Policy"] == "require-corp"
        assert get(url + "/_headers")[0] == 404
        assert "__livereload" not in get(url + "/")[2]
        assert get(url + serve.RELOAD_VERSION)[0] == 404
    finally:
        server.shutdown()
        server.server_close()


def test_live_reload_is_injected_only_when_serving_live(dist):
    live = serve.LiveReload()
    server, url = start(dist, live)
    try:
        body = get(url + "/")[2]
        assert f'<script src="{serve.RELOAD_SCRIPT}" defer></script></head>' in body
        assert "__livereload" not in (dist / "index.html").read_text()
        assert get(url + serve.RELOAD_VERSION)[2] == "0"
        live.bump()
        assert get(url + serve.RELOAD_VERSION)[2] == "1"
        status, h, script = get(url + serve.RELOAD_SCRIPT)
        assert status == 200 and "location.reload()" in script
    finally:
        server.shutdown()
        server.server_close()


def test_watcher_sees_edits_in_watched_folders_only(tmp_path):
    from tinygpt.site_build import main

    (tmp_path / "content").mkdir()
    (tmp_path / "content" / "a.md").write_text("a")
    (tmp_path / "notes.txt").write_text("not watched")
    before = main.snapshot(tmp_path)
    (tmp_path / "notes.txt").write_text("still not watched")
    assert main.snapshot(tmp_path) == before
    (tmp_path / "content" / "b.md").write_text("b")
    assert main.snapshot(tmp_path) != before
