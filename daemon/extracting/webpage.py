"""A web page's readable text and title, not its markup, with Lexbor (``selectolax``).
Runs in the worker.

Lexbor parses as browsers do (and guesses the encoding from the bytes and ``<meta>``);
the text is the body's, without scripts, styles and templates, with a line break after
each block so that paragraphs, list items and table rows stay lines.
"""

from __future__ import annotations

from typing import Final

from kbindex.daemon.extracting.pages import Pages
from kbindex.daemon.extracting.results import Extracted, Failed, Outcome, Reason
from selectolax.lexbor import LexborHTMLParser  # type: ignore[import-not-found,unused-ignore]

_HIDDEN: Final = "script, style, noscript, template, svg, head, nav"
_BLOCKS: Final = (
    "p, div, br, li, dt, dd, tr, h1, h2, h3, h4, h5, h6, pre, blockquote, section, "
    "article, header, footer, nav, aside, table, ul, ol, dl, hr, figcaption, caption"
)


def text_and_title(data: bytes | str) -> tuple[str, str]:
    tree = LexborHTMLParser(data)
    node = tree.css_first("title")
    title = " ".join(node.text().split()) if node is not None else ""
    for hidden in tree.css(_HIDDEN):
        hidden.decompose()
    for cell in tree.css("td, th"):
        cell.insert_after("\t")
    for block in tree.css(_BLOCKS):
        block.insert_after("\n")
    root = tree.body or tree.root
    return (root.text(separator="") if root is not None else ""), title


def read(data: bytes, max_chars: int) -> Outcome:
    text, title = text_and_title(data)
    pages = Pages(max_chars)
    pages.add(text)
    if pages.empty():
        return Failed(Reason.NO_TEXT, "no readable text in it")
    return Extracted(pages.text(), title)
