"""HTML pages, parsed with selectolax.

- Chrome is dropped first: ``script style noscript template nav header footer aside form``
  elements, anything with ``role`` navigation/banner/contentinfo/search, and common
  documentation-site chrome (Sphinx ``related``/``sphinxsidebar``/``footer`` blocks, "skip
  to content" links, header permalinks). When the page has a ``<main>`` (or ``role=main``),
  only that is read.
- ``h1``–``h3`` → sections; ``h4``–``h6`` → short passages of their own.
- ``p``, ``li``, ``tr``, ``dt``, ``pre`` and ``figcaption`` → passages. A unit's text leaves
  out the lists and tables nested in it, which become passages of their own, after it; a
  ``p`` inside an ``li`` is part of the item, not a second passage. Table cells are joined
  with `` | ``; ``pre`` keeps its line breaks.
- The title: when the page has exactly one ``h1`` and it is contained in ``<title>`` (or
  there is no ``<title>``), the ``h1`` is the title — without the site suffix — and not a
  section above everything; otherwise ``<title>``, then the first ``h1``, then the file name.
"""

from __future__ import annotations

from selectolax.lexbor import LexborHTMLParser as HTMLParser
from selectolax.lexbor import LexborNode as Node

from .._tree import PassageSpec
from ._common import ParsedDocument, SectionStack, collapse_spaces

_CHROME_SELECTORS = (
    "script", "style", "noscript", "template", "nav", "header", "footer", "aside", "form",
    "[role=navigation]", "[role=banner]", "[role=contentinfo]", "[role=search]",
    "div.related", "div.sphinxsidebar", "div.footer", "a.headerlink", "a.skip-link",
)
_SECTION_TAGS = {"h1": 1, "h2": 2, "h3": 3}
_MINOR_HEADINGS = frozenset({"h4", "h5", "h6"})
_UNITS = frozenset({"p", "li", "tr", "dt", "pre", "figcaption"}) | _MINOR_HEADINGS
# nested inside a unit, these hold units of their own
_CONTAINERS = frozenset({"ul", "ol", "table", "dl"})
_CELLS = frozenset({"td", "th"})
_BLOCKS = frozenset({"p", "div", "br", "li", "dd", "dt", "blockquote", "section"}) | _CELLS


def _unit_text(node: Node) -> str:
    """The text of a passage unit, without nested containers; cells separated by ' | '."""
    if node.tag == "pre":
        return node.text(deep=True).strip("\n")
    if node.tag == "tr":
        cells = [collapse_spaces(_gather(cell)) for cell in node.iter() if cell.tag in _CELLS]
        return " | ".join(cell for cell in cells if cell)
    return collapse_spaces(_gather(node))


def _gather(node: Node) -> str:
    parts: list[str] = []
    for child in node.iter(include_text=True):
        if child.tag == "-text":
            parts.append(child.text(deep=False))
        elif child.tag in _CONTAINERS:
            continue
        elif child.tag in _BLOCKS:
            parts.append(" " + _gather(child) + " ")
        else:
            parts.append(_gather(child))
    return "".join(parts)


class _HtmlWalker:
    def __init__(self, title_heading: Node | None) -> None:
        self.title_heading = title_heading
        self.sections = SectionStack()
        self.passages: list[PassageSpec] = []

    def emit(self, text: str) -> None:
        if text.strip():
            self.passages.append(PassageSpec(text, self.sections.path))

    def walk(self, node: Node) -> None:
        for child in node.iter():
            tag = child.tag
            if tag in _SECTION_TAGS:
                if child != self.title_heading:
                    self.sections.enter(_SECTION_TAGS[tag], collapse_spaces(child.text(deep=True)))
            elif tag in _UNITS:
                self.emit(_unit_text(child))
                self._walk_nested(child)
            else:
                self.walk(child)

    def _walk_nested(self, unit: Node) -> None:
        for child in unit.iter():
            if child.tag in _CONTAINERS:
                self.walk(child)
            elif child.tag != "pre":
                self._walk_nested(child)


def _drop_chrome(tree: HTMLParser) -> None:
    for selector in _CHROME_SELECTORS:
        for node in tree.css(selector):
            node.decompose()


def _choose_title(page_title: str, h1s: list[Node], fallback: str) -> tuple[str, Node | None]:
    if len(h1s) == 1:
        h1_text = collapse_spaces(h1s[0].text(deep=True))
        if h1_text and (not page_title or h1_text in page_title):
            return h1_text, h1s[0]
    if page_title:
        return page_title, None
    if h1s:
        return collapse_spaces(h1s[0].text(deep=True)) or fallback, None
    return fallback, None


def parse_html(html: str, fallback_title: str) -> ParsedDocument:
    """Parse one HTML page into its title and passages."""
    tree = HTMLParser(html)
    title_node = tree.css_first("title")
    page_title = collapse_spaces(title_node.text(deep=True)) if title_node else ""
    _drop_chrome(tree)
    content = tree.css_first("main") or tree.css_first("[role=main]") or tree.body
    if content is None:
        return ParsedDocument(title=page_title or fallback_title)
    title, title_heading = _choose_title(page_title, content.css("h1"), fallback_title)
    walker = _HtmlWalker(title_heading)
    walker.walk(content)
    return ParsedDocument(title=title, passages=walker.passages)
