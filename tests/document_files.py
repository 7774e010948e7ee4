"""Real document files written by the tests: a PDF with known text on known pages, Office
and OpenDocument files as zips of minimal XML, a web page, an EPUB, and hostile ones.

The PDF writer is the smallest that PDFium reads as any PDF: a catalog, a page tree, a
page per text with a content stream drawing it in Helvetica (one of the 14 standard fonts,
so no font is embedded), and a cross-reference table with the real byte offsets.
"""

from __future__ import annotations

import io
import zipfile
from xml.sax.saxutils import escape


def _pdf_string(text: str) -> str:
    return "(" + text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)") + ")"


def pdf(pages: list[list[str]], comment: str = "") -> bytes:
    """A PDF whose page N shows the lines ``pages[N-1]``; ``comment`` goes in a comment
    line after the header (the worker's test hook reads it)."""
    objects: list[str] = []
    count = len(pages)
    kids = " ".join(f"{3 + 2 * i} 0 R" for i in range(count))
    objects.append("<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {count} >>")
    font = 3 + 2 * count
    for i, lines in enumerate(pages):
        drawn = " ".join(f"{_pdf_string(line)} Tj T*" for line in lines)
        stream = f"BT /F1 12 Tf 14 TL 72 720 Td {drawn} ET"
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {4 + 2 * i} 0 R"
            f" /Resources << /Font << /F1 {font} 0 R >> >> >>"
        )
        objects.append(f"<< /Length {len(stream)} >>\nstream\n{stream}\nendstream")
    objects.append("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")  # as writers do: "this file is binary"
    if comment:
        out.write(f"%{comment}\n".encode())
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(f"{number} 0 obj\n{body}\nendobj\n".encode("latin-1"))
    xref = out.tell()
    out.write(f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode())
    for offset in offsets:
        out.write(f"{offset:010d} 00000 n \n".encode())
    out.write(
        f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    )
    return out.getvalue()


def encrypted_pdf(pages: list[list[str]], password: str) -> bytes:
    """The PDF of ``pages`` encrypted with a user password, by pypdf (the test extra)."""
    import pypdf

    writer = pypdf.PdfWriter(clone_from=io.BytesIO(pdf(pages)))
    writer.encrypt(user_password=password, owner_password=password + "-owner", algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def _zip(parts: dict[str, bytes | str], stored_first: str | None = None) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as package:
        if stored_first is not None:
            package.writestr(
                zipfile.ZipInfo(stored_first), parts.pop(stored_first), zipfile.ZIP_STORED
            )
        for name, data in parts.items():
            package.writestr(name, data)
    return out.getvalue()


_W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'


def docx(paragraphs: list[str], title: str = "") -> bytes:
    body = "".join(f"<w:p><w:r><w:t>{escape(p)}</w:t></w:r></w:p>" for p in paragraphs)
    parts: dict[str, bytes | str] = {
        "[Content_Types].xml": "<Types/>",
        "word/document.xml": f"<w:document {_W}><w:body>{body}</w:body></w:document>",
    }
    if title:
        parts["docProps/core.xml"] = (
            '<cp:coreProperties xmlns:cp="urn:cp" xmlns:dc="http://purl.org/dc/elements/1.1/">'
            f"<dc:title>{escape(title)}</dc:title></cp:coreProperties>"
        )
    return _zip(parts)


def docx_bomb(inflated_mb: int = 300) -> bytes:
    """A Word file whose document.xml inflates to ``inflated_mb`` MiB of spaces."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as package:
        package.writestr("[Content_Types].xml", "<Types/>")
        with package.open("word/document.xml", "w") as part:
            part.write(f"<w:document {_W}><w:body><w:p><w:r><w:t>".encode())
            chunk = b" " * (1 << 20)
            for _ in range(inflated_mb):
                part.write(chunk)
            part.write(b"</w:t></w:r></w:p></w:body></w:document>")
    return out.getvalue()


_S = 'xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"'


def xlsx(sheets: dict[str, list[list[str]]]) -> bytes:
    """A workbook whose cells are shared strings (as Excel writes text)."""
    shared: list[str] = []
    parts: dict[str, bytes | str] = {"[Content_Types].xml": "<Types/>"}
    names = "".join(f'<sheet name="{escape(n)}" sheetId="{i}"/>' for i, n in enumerate(sheets, 1))
    parts["xl/workbook.xml"] = f"<workbook {_S}><sheets>{names}</sheets></workbook>"
    for number, rows in enumerate(sheets.values(), start=1):
        xml_rows = []
        for r, row in enumerate(rows, start=1):
            cells = []
            for value in row:
                shared.append(value)
                cells.append(f'<c r="A{r}" t="s"><v>{len(shared) - 1}</v></c>')
            xml_rows.append(f'<row r="{r}">{"".join(cells)}</row>')
        parts[f"xl/worksheets/sheet{number}.xml"] = (
            f"<worksheet {_S}><sheetData>{''.join(xml_rows)}</sheetData></worksheet>"
        )
    strings = "".join(f"<si><t>{escape(s)}</t></si>" for s in shared)
    parts["xl/sharedStrings.xml"] = f"<sst {_S}>{strings}</sst>"
    return _zip(parts)


def odt(paragraphs: list[str]) -> bytes:
    ns = (
        'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
        'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"'
    )
    body = "".join(f"<text:p>{escape(p)}</text:p>" for p in paragraphs)
    return _zip(
        {
            "mimetype": "application/vnd.oasis.opendocument.text",
            "content.xml": f"<office:document-content {ns}><office:body><office:text>{body}"
            "</office:text></office:body></office:document-content>",
        },
        stored_first="mimetype",
    )


def html(title: str, paragraphs: list[str]) -> bytes:
    body = "".join(f"<p>{escape(p)}</p>" for p in paragraphs)
    return (
        f"<!doctype html><html><head><title>{escape(title)}</title>"
        "<style>body { font-family: markupstyle; }</style>"
        "<script>var scriptword = 1;</script></head>"
        f"<body><nav class='navclass'>Home</nav>{body}</body></html>"
    ).encode()


def epub(title: str, chapters: list[str]) -> bytes:
    items = "".join(
        f'<item id="c{i}" href="c{i}.xhtml" media-type="application/xhtml+xml"/>'
        for i in range(len(chapters))
    )
    spine = "".join(f'<itemref idref="c{i}"/>' for i in range(len(chapters)))
    parts: dict[str, bytes | str] = {
        "mimetype": "application/epub+zip",
        "META-INF/container.xml": (
            '<container xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles>'
            '<rootfile full-path="OEBPS/book.opf" media-type="application/oebps-package+xml"/>'
            "</rootfiles></container>"
        ),
        "OEBPS/book.opf": (
            '<package xmlns="http://www.idpf.org/2007/opf" '
            'xmlns:dc="http://purl.org/dc/elements/1.1/"><metadata>'
            f"<dc:title>{escape(title)}</dc:title></metadata><manifest>{items}</manifest>"
            f"<spine>{spine}</spine></package>"
        ),
    }
    for i, text in enumerate(chapters):
        parts[f"OEBPS/c{i}.xhtml"] = (
            '<html xmlns="http://www.w3.org/1999/xhtml"><head><title>c</title></head>'
            f"<body><p>{escape(text)}</p></body></html>"
        )
    return _zip(parts, stored_first="mimetype")
