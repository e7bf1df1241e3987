import bisect
import json
import re
from dataclasses import dataclass, field
from json.decoder import scanstring
from pathlib import Path

from tinygpt.facts import FACTS

# Cloudflare Pages' limits (facts.json "pages"), and the per-file one in words for messages.
PAGES_MAX_FILE_BYTES = FACTS["pages"]["max_file_bytes"]
PAGES_MAX_FILES = FACTS["pages"]["max_files"]
PAGES_FILE_LIMIT = f"Cloudflare Pages' {PAGES_MAX_FILE_BYTES / 2**20:g} MiB per file"


class BuildError(Exception):
    """A build failure to show the user: `where` is file:line[:col] when known."""

    def __init__(self, message: str, where: str | None = None):
        super().__init__(f"{where}: {message}" if where else message)
        self.where = where


@dataclass
class Context:
    root: Path  # the repository
    out: Path  # the temporary dist folder being built (swapped in at the end)
    cache: Path  # .cache/, kept between builds (downloads, prepared corpora)
    assets: dict[str, str] = field(default_factory=dict)  # logical name -> URL of a hashed asset
    pages: list[dict] = field(default_factory=list)  # what pages.py rendered (url, title, date, source, ...)
    notes: list[str] = field(default_factory=list)  # things a step skipped, shown after the summary


def read_text(path: Path, source: str) -> str:
    """path's text; not UTF-8 is a BuildError at the line and column of the first bad byte."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line, line_start = data.count(b"\n", 0, e.start) + 1, data.rfind(b"\n", 0, e.start) + 1
        column = len(data[line_start:e.start].decode("utf-8")) + 1  # in characters, as editors count
        raise BuildError(f"not valid UTF-8 (byte 0x{data[e.start]:02x})", f"{source}:{line}:{column}") from None


REPO = Path(__file__).resolve().parents[2]


def code_line(path: str, needle: str) -> str:
    """"path:line" of the first line of this repository's file holding needle, for errors about
    a table in our own code (a corpus pin, a redirect): they point at its entry."""
    lines = (REPO / path).read_text(encoding="utf-8").split("\n")
    return f"{path}:{next((n for n, line in enumerate(lines, 1) if needle in line), 1)}"


SPACE = re.compile(r"[ \t\n\r]*")


def json_lines(text: str) -> dict[tuple, int]:
    """The line of every value in a valid JSON document, by its path: () for the document,
    ("models", 0) for an array element, ("models", 0, "id") for a member (its key's line).
    The json module keeps no positions, so this walks the text once more."""
    starts = [0] + [m.end() for m in re.finditer("\n", text)]
    lines = {}
    decoder = json.JSONDecoder()

    def skip(i: int) -> int:
        return SPACE.match(text, i).end()

    def value(i: int, path: tuple, at: int) -> int:
        lines[path] = bisect.bisect_right(starts, at)
        if text[i] not in "{[":
            return decoder.raw_decode(text, i)[1]
        close, n, i = "]}"[text[i] == "{"], 0, skip(i + 1)
        while text[i] != close:
            if close == "}":
                key, after_key = scanstring(text, i + 1)
                i = value(skip(skip(after_key) + 1), path + (key,), i)  # +1: the colon
            else:
                i, n = value(i, path + (n,), i), n + 1
            i = skip(i)
            i = skip(i + 1) if text[i] == "," else i
        return i + 1

    value(skip(0), (), skip(0))
    return lines


def read_json(path: Path, source: str):
    """(data, where): where(*keys) is "source:line" of the value at that path, or of the nearest
    enclosing one that exists (where("models", 3, "id") for a model without an id: its line)."""
    text = read_text(path, source)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise BuildError(f"invalid JSON: {e.msg}", f"{source}:{e.lineno}:{e.colno}") from None
    lines = json_lines(text)

    def where(*keys) -> str:
        while keys not in lines:
            keys = keys[:-1]
        return f"{source}:{lines[keys]}"

    return data, where
