"""WGSL composition: a shader module is shaders/<name>.wgsl with the files it includes
(`#include "lib/x.wgsl"`, relative to shaders/, each file once), after a prelude that holds what
the shaders share with the host: the element type (`alias elem = f32;`, or f16 with its
`enable`) and the constants of facts.json's wgsl.consts. `enable` and other directives are
moved to the top, as WGSL wants them before any declaration.

A lever's variants of a module live in shaders/levers/<lever id>/<module>.wgsl (the module
"levers/<id>/<module>"): they keep the plain module's params (its facts.json wgsl.params row)
and include from shaders/ like any module. A variant that changes a helper rather than the entry
points says `#replace "lib/x.wgsl" with "levers/<id>/lib/x.wgsl"` before including the plain
module: every later include of the first file composes the second, so the plain entry points run
on the lever's helper without a copy of either.

One implementation, used by the build's shader check (naga, Tint), the bundle (esbuild imports
the text write_modules puts in .cache/wgsl/) and the wgpu-py kernel runner (tests/oracles/gpu.py).
Lines are copied whole, so a composed line:col maps back to the file and line it came from.
"""
import functools
import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..facts import FACTS, PATH as FACTS_PATH
from .context import BuildError, json_lines, read_text

INCLUDE = re.compile(r'#include\s+"([^"]+)"\s*$')
REPLACE = re.compile(r'#replace\s+"([^"]+)"\s+with\s+"([^"]+)"\s*$')
DIRECTIVE = re.compile(r"\s*(enable|requires|diagnostic)\b")
PARAMS = re.compile(r"^struct\s+Params\s*\{(.*?)\}", re.M | re.S)
FIELD = re.compile(r"(\w+)\s*:\s*([\w<>, ]+?)\s*(?:,|$)")
ELEMENTS = {"f32": [], "f16": ["enable f16;"]}  # element type -> the directives it needs


@dataclass
class Module:
    name: str
    text: str
    origins: list[tuple[str, int]]  # per composed line: (file relative to the repository, line)

    def where(self, line: int, col: int | None = None) -> str:
        """The original "file:line[:col]" of a 1-based composed line."""
        path, number = self.origins[min(max(line, 1), len(self.origins)) - 1]
        return f"{path}:{number}" + (f":{col}" if col else "")


@functools.lru_cache(maxsize=1)
def _lines_of(text: str) -> dict[tuple, int]:
    """json_lines of facts.json, walked once per content rather than once per module composed."""
    return json_lines(text)


def prelude(source: str, elem: str) -> list[tuple[str, tuple[str, int]]]:
    """The lines every module starts with, each with where it comes from: the alias from the
    module's first line (it has no file of its own), each constant from its facts.json line."""
    consts = FACTS["wgsl"]["consts"]
    at = _lines_of(FACTS_PATH.read_text())
    return [(f"alias elem = {elem};", (source, 1))] + [
        (f"const {k} = {v}{'u' if isinstance(v, int) else ''};", ("tinygpt/facts.json", at["wgsl", "consts", k]))
        for k, v in consts.items()]


def names(root: Path) -> list[str]:
    """The modules: shaders/*.wgsl and the levers' shaders/levers/*/*.wgsl (shaders/lib/ holds
    what they include), as paths under shaders/ without the suffix."""
    shaders = root / "shaders"
    found = [*shaders.glob("*.wgsl"), *shaders.glob("levers/*/*.wgsl")]
    return sorted(p.relative_to(shaders).with_suffix("").as_posix() for p in found)


def params_row(name: str) -> str:
    """The facts.json wgsl.params row a module's Params follow: a lever's variant keeps its plain module's."""
    return name.rsplit("/", 1)[-1]


def compose(root: Path, name: str, elem: str = "f32") -> Module:
    directives = [(line, (f"shaders/{name}.wgsl", 1)) for line in ELEMENTS[elem]]
    body = prelude(f"shaders/{name}.wgsl", elem)
    seen: set[str] = set()
    replaced: dict[str, str] = {}  # an include of the key composes the value (#replace)

    def add(rel: str, included_at: tuple[str, int] | None):
        rel = replaced.get(rel, rel)
        if rel in seen:
            return
        seen.add(rel)
        path = root / "shaders" / rel
        source = f"shaders/{rel}"
        if not path.is_file():
            raise BuildError(f"#include of a file that does not exist: {source}",
                             "{}:{}".format(*included_at) if included_at else None)
        for number, line in enumerate(read_text(path, source).split("\n"), 1):
            include = INCLUDE.match(line)
            replace = REPLACE.match(line)
            if replace:
                if replace[1] in seen:  # too late: its declarations are already in the module
                    raise BuildError(f"#replace of {replace[1]}, which is already included", f"{source}:{number}")
                replaced[replace[1]] = replace[2]
            elif include:
                add(include[1], (source, number))
            elif DIRECTIVE.match(line):
                if line.strip() not in (d.strip() for d, _ in directives):
                    directives.append((line, (source, number)))
            else:
                body.append((line, (source, number)))

    add(f"{name}.wgsl", None)
    lines = directives + body
    return Module(name, "\n".join(text for text, _ in lines), [origin for _, origin in lines])


def struct_params(text: str) -> tuple[int, list[tuple[str, int]]] | None:
    """The text's `struct Params`: its 1-based line and its fields in facts.json's notation
    ("M" for a u32, "eps:f32", any other type spelled out), each with its line; None without one."""
    found = PARAMS.search(text)
    if not found:
        return None
    fields = []
    first = text.count("\n", 0, found.start(1)) + 1
    for offset, line in enumerate(found[1].split("\n")):
        for name, kind in FIELD.findall(line.split("//")[0]):
            fields.append((name if kind == "u32" else f"{name}:{kind}", first + offset))
    return text.count("\n", 0, found.start()) + 1, fields


def lever_digest(root: Path, lever: str) -> str | None:
    """SHA-256 of a lever's variant modules as composed (so a change to a file they include counts),
    or None when it has none: what its measured loss curve is keyed by."""
    modules = [n for n in names(root) if n.startswith(f"levers/{lever}/")]
    if not modules:
        return None
    digest = hashlib.sha256()
    for name in modules:
        digest.update(f"{name}\0{compose(root, name).text}\0".encode())
    return digest.hexdigest()


def write_modules(root: Path):
    """Every module composed (f32) into .cache/wgsl/<name>.wgsl, which the engine's kernel table
    imports; a file is rewritten only when its text changes."""
    out = root / ".cache" / "wgsl"
    modules = names(root)
    for stale in set(out.rglob("*.wgsl")) - {out / f"{n}.wgsl" for n in modules}:
        stale.unlink(missing_ok=True)  # a module that is gone must not stay importable
    for name in modules:
        path = out / f"{name}.wgsl"
        path.parent.mkdir(parents=True, exist_ok=True)
        text = compose(root, name).text
        if not path.exists() or path.read_text() != text:
            tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp")  # readers see the old text or the new
            tmp.write_text(text)
            tmp.replace(path)
