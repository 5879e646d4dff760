"""A report's content written once and rendered twice: as Markdown (``report.md``) and as HTML (``report.html``).

A report is a list of blocks: :class:`Heading`, :class:`Lines` (prose, a paragraph per line in
HTML), :class:`Bullets` (a list), :class:`Table` (a title, columns, rows and the lines under it),
:class:`Figure` (an image with its caption) and :class:`Images` (images without captions). :func:`markdown` and
:func:`html_page` render the same list, so the two files cannot say different things.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Sequence, Union

__all__ = ["Heading", "Lines", "Bullets", "Table", "Figure", "Images", "Block", "markdown", "html_page"]


@dataclass(frozen=True)
class Heading:
    level: int
    text: str


@dataclass(frozen=True)
class Lines:
    """Prose: in Markdown the lines one after another (one paragraph), in HTML a paragraph each."""

    lines: Sequence[str]


@dataclass(frozen=True)
class Bullets:
    """A list: in Markdown ``- item`` lines (an item starting with spaces continues the one before), in HTML ``<ul>``."""

    items: Sequence[str]


@dataclass(frozen=True)
class Table:
    """A table with its title (a level-3 heading; none when empty), and the lines written under it."""

    title: str
    columns: Sequence[str]
    rows: Sequence[Sequence[str]]
    notes: Sequence[str] = field(default_factory=tuple)


@dataclass(frozen=True)
class Figure:
    src: str
    alt: str
    caption: str = ""
    width: int = 900


@dataclass(frozen=True)
class Images:
    """Images one after another, without captions: ``(src, alt)`` each."""

    images: Sequence[tuple[str, str]]
    width: int = 900


Block = Union[Heading, Lines, Bullets, Table, Figure, Images]


def markdown(blocks: Sequence[Block]) -> str:
    """The blocks as Markdown."""
    out: list[str] = []
    for b in blocks:
        if isinstance(b, Heading):
            out += ["#" * b.level + " " + b.text, ""]
        elif isinstance(b, Lines):
            out += [*b.lines, ""]
        elif isinstance(b, Bullets):
            out += [f"  {item.strip()}" if item.startswith("  ") else f"- {item}" for item in b.items] + [""]
        elif isinstance(b, Table):
            out += ([f"### {b.title}", ""] if b.title else []) + ["| " + " | ".join(b.columns) + " |", "|" + "---|" * len(b.columns)]
            out += ["| " + " | ".join(row) + " |" for row in b.rows]
            for line in b.notes:
                if line:
                    out += ["", line]
            out.append("")
        elif isinstance(b, Figure):
            out += [f"![{b.alt}]({b.src})", ""] + ([b.caption, ""] if b.caption else [])
        else:
            out += [f"![{alt}]({src})" for src, alt in b.images] + [""]
    return "\n".join(out)


def _html_block(b: Block) -> str:
    e = html.escape
    if isinstance(b, Heading):
        return f"<h{b.level}>{e(b.text)}</h{b.level}>"
    if isinstance(b, Lines):
        return "\n".join(f"<p>{e(line.replace('`', ''))}</p>" for line in b.lines)
    if isinstance(b, Bullets):
        return "<ul>" + "".join(f"<li>{e(item.strip())}</li>" for item in b.items) + "</ul>"
    if isinstance(b, Table):
        head = "".join(f"<th>{e(c)}</th>" for c in b.columns)
        body = "\n".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in b.rows)
        notes = "".join(f"<p>{e(line.replace('`', ''))}</p>" for line in b.notes if line)
        title = f"<h3>{e(b.title)}</h3>\n" if b.title else ""
        return f"{title}<table><tr>{head}</tr>\n{body}\n</table>\n{notes}"
    if isinstance(b, Figure):
        caption = f"<figcaption>{e(b.caption)}</figcaption>" if b.caption else ""
        return f'<figure><img src="{e(b.src)}" width="{b.width}" alt="{e(b.alt)}">{caption}</figure>'
    return "\n".join(f'<figure><img src="{e(src)}" width="{b.width}" alt="{e(alt)}"></figure>' for src, alt in b.images)


def html_page(title: str, blocks: Sequence[Block], max_width_em: int = 75) -> str:
    """The blocks as a whole HTML page titled ``title``."""
    body = "\n".join(_html_block(b) for b in blocks)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>body{{font-family:sans-serif;max-width:{max_width_em}em;margin:2em auto}} table{{border-collapse:collapse;margin:0.5em 0}}
td,th{{border:1px solid #ccc;padding:2px 6px;text-align:right}} figure{{margin:1.5em 0}}</style></head>
<body>
{body}
</body></html>
"""
