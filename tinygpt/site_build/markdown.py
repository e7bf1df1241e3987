"""Markdown to HTML: markdown-it-py (CommonMark + tables, footnotes, heading
anchors), code highlighted at build time by pygments (CSS classes, no JS), and a
table of contents from the h2/h3 headings.

Raw HTML in Markdown is off, and table alignment becomes a class instead of a
style attribute: the CSP allows no inline style.
"""
import functools
import html
import re
from urllib.parse import unquote

from markdown_it import MarkdownIt
from mdit_py_plugins.anchors import anchors_plugin
from mdit_py_plugins.footnote import footnote_plugin
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

FORMATTER = HtmlFormatter(nowrap=True)


def pygments_css() -> str:
    return FORMATTER.get_style_defs(".highlight")


@functools.cache
def _lexer(lang: str):
    try:
        return get_lexer_by_name(lang) if lang else None
    except ClassNotFound:
        return None


def _highlight(code: str, lang: str, _attrs) -> str:
    lexer = _lexer(lang)
    body = highlight(code, lexer, FORMATTER) if lexer else html.escape(code)
    return f'<pre class="highlight"><code>{body}</code></pre>\n'


def _alignment_to_class(state):
    for token in state.tokens:
        style = token.attrs.get("style") if token.attrs else None
        if style:
            match = re.fullmatch(r"text-align:(left|right|center)", style)
            del token.attrs["style"]
            if match:
                token.attrSet("class", f"align-{match[1]}")


def slugify(text: str) -> str:
    return re.sub(r"[^\w]+", "-", text.lower()).strip("-") or "section"


def make_renderer() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "highlight": _highlight, "typographer": False})
    md.enable("table")
    md.use(footnote_plugin)
    md.use(anchors_plugin, min_level=2, max_level=3, slug_func=slugify, permalink=True, permalinkSymbol="#")
    md.core.ruler.push("alignment_to_class", _alignment_to_class)
    return md


MD = make_renderer()


def links(tokens, text: str) -> list[tuple[str, int]]:
    """(href, line) of every link and image, for the link checker's messages: the line that spells
    the target (`](href`, `<href>`, or a `[ref]: href` definition anywhere), else its block's first."""
    lines = text.split("\n")
    found = []
    for token in tokens:
        if token.type != "inline" or not token.map:
            continue
        start, end = token.map
        for child in token.children:
            href = child.attrGet("href") if child.type == "link_open" else child.attrGet("src") if child.type == "image" else None
            if href:
                spelled = [f"{p}{h}" for h in {href, unquote(href)} for p in ("](", "](<", "]: ", "<")]
                at = next((i for i in [*range(start, end), *range(len(lines))] if any(s in lines[i] for s in spelled)),
                          start)
                found.append((href, at + 1))
    return found


def render(text: str) -> tuple[str, str, list[tuple[str, int]]]:
    """Markdown source -> (body HTML, table-of-contents HTML (empty when < 2 headings), links)."""
    tokens = MD.parse(text)
    body = MD.renderer.render(tokens, MD.options, {})
    entries = []
    for i, token in enumerate(tokens):
        if token.type == "heading_open" and token.tag in ("h2", "h3") and token.attrGet("id"):
            entries.append((token.tag, token.attrGet("id"), tokens[i + 1].content))
    items = "".join(f'<li class="toc-{tag}"><a href="#{html.escape(anchor)}">{html.escape(title)}</a></li>'
                    for tag, anchor, title in entries)
    return body, f"<ul>{items}</ul>" if len(entries) >= 2 else "", links(tokens, text)
