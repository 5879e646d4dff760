"""MkDocs hook: the configuration page's reference tables are generated at build time.

``docs/configuration.md`` holds the marker line ``<!-- config-reference -->``; this hook puts
:func:`flamingo_sim.fl.config_reference.reference_markdown` in its place, so the site always
shows the keys, types, defaults, ranges and meanings the code has (nothing to regenerate, no
generated file to merge). Registered in ``mkdocs.yml`` under ``hooks:``.
"""

from __future__ import annotations

from typing import Any

from flamingo_sim.fl.config_reference import MARKER, reference_markdown

CONFIG_PAGE = "configuration.md"


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    """Replace the marker of the configuration page with the generated reference."""
    if page.file.src_uri != CONFIG_PAGE:
        return markdown
    if markdown.count(MARKER) != 1:
        raise ValueError(f"docs/{CONFIG_PAGE}: expected the line {MARKER} exactly once, where the generated reference goes")
    return markdown.replace(MARKER, reference_markdown())
