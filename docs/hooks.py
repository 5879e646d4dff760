"""MkDocs hook: the configuration page's reference tables are generated at build time.

``docs/configuration.md`` holds the marker line ``<!-- config-reference -->``; this hook puts
:func:`flamingo_sim.fl.config_reference.reference_markdown` in its place, so the site always
shows the keys, types, defaults, ranges and meanings the code has (nothing to regenerate, no
generated file to merge). Registered in ``mkdocs.yml`` under ``hooks:``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flamingo_sim.fl.config_reference import MARKER, PLUGINS_MARKER, plugin_params_of, plugins_markdown, reference_markdown

CONFIG_PAGE = "configuration.md"
PLUGINS_PAGE = "plugins.md"
#: The plug-in guide's examples, whose parameter tables it shows (read from the example files).
EXAMPLES = ("examples/charging_only.yaml", "examples/fair_selector.yaml", "examples/trimmed_mean.yaml")


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    """Replace the marker of the configuration page with the generated reference, and the plug-in
    guide's with its examples' parameter tables."""
    if page.file.src_uri == PLUGINS_PAGE:
        if markdown.count(PLUGINS_MARKER) != 1:
            raise ValueError(f"docs/{PLUGINS_PAGE}: expected the line {PLUGINS_MARKER} exactly once")
        root = Path(__file__).resolve().parent.parent
        return markdown.replace(PLUGINS_MARKER, plugins_markdown([p for e in EXAMPLES for p in plugin_params_of(root / e)]))
    if page.file.src_uri != CONFIG_PAGE:
        return markdown
    if markdown.count(MARKER) != 1:
        raise ValueError(f"docs/{CONFIG_PAGE}: expected the line {MARKER} exactly once, where the generated reference goes")
    return markdown.replace(MARKER, reference_markdown())
