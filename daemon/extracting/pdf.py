"""A PDF's text layer, page by page, with PDFium (``pypdfium2``). Runs in the worker."""

from __future__ import annotations

import pypdfium2 as pdfium  # type: ignore[import-untyped,unused-ignore]
from kbindex.daemon.extracting.pages import Pages
from kbindex.daemon.extracting.results import Extracted, Failed, Outcome, Reason

# PDFium's FPDF_GetLastError codes, as pypdfium2's PdfiumError carries them.
_PASSWORD = 4
_SECURITY = 5


def read(data: bytes, max_chars: int) -> Outcome:
    if b"%PDF" not in data[:1024]:
        return Failed(Reason.DAMAGED, "not a PDF (no %PDF header)")
    try:
        doc = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        code = getattr(exc, "err_code", None)
        if code in (_PASSWORD, _SECURITY):
            return Failed(Reason.ENCRYPTED, "a password is needed to open it")
        return Failed(Reason.DAMAGED, f"PDFium cannot open it: {exc}")
    try:
        pages = Pages(max_chars)
        count = len(doc)
        for index in range(count):
            page = doc[index]
            try:
                textpage = page.get_textpage()
                try:
                    pages.add(textpage.get_text_range())
                finally:
                    textpage.close()
            finally:
                page.close()
        if pages.empty():
            return Failed(
                Reason.NO_TEXT,
                f"no text layer on its {count} page(s) (a scan? text in images is not read)",
            )
        title = (doc.get_metadata_value("Title") or "").strip()
        return Extracted(pages.text(), title)
    finally:
        doc.close()
