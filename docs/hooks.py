"""The pages' generated tables: written into the Markdown files by ``python docs/hooks.py``, checked by the site's build.

``docs/configuration.md`` holds the configuration reference
(:func:`flamingo_sim.fl.config_reference.reference_markdown`) and ``docs/plugins.md`` its
examples' parameter tables (:func:`~flamingo_sim.fl.config_reference.plugins_markdown`), each
between the lines :data:`BEGIN` and :data:`END`, and the contracts field by field
(:mod:`flamingo_sim.fl.contract_reference`, between its own two lines), so that the pages read as plain Markdown in the
repository too. ``python docs/hooks.py`` writes them from the code; a test
(``tests/test_docs.py``) and the site's build (this module's MkDocs hook, registered in
``mkdocs.yml`` under ``hooks:``) fail when a page's tables no longer match the code, naming the
command that writes them.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere: the flamingo_sim of this checkout
    sys.path.insert(0, str(ROOT))

from flamingo_sim.fl.config_reference import plugin_params_of, plugins_markdown, reference_markdown  # noqa: E402
from flamingo_sim.fl.contract_reference import with_block, write_block  # noqa: E402

#: The lines around a page's generated tables.
BEGIN = "<!-- generated from the code by `python docs/hooks.py`: edit the code, then run it; tests/test_docs.py checks it -->"
END = "<!-- end of the generated tables -->"
#: The plug-in guide's examples, whose parameter tables it shows (read from the example files).
EXAMPLES = ("examples/charging_only.yaml", "examples/fair_selector.yaml", "examples/trimmed_mean.yaml")
#: Each page with generated tables, and what makes them.
GENERATED: dict[str, Callable[[], str]] = {
    "configuration.md": reference_markdown,
    "plugins.md": lambda: plugins_markdown([p for e in EXAMPLES for p in plugin_params_of(ROOT / e)]),
}
COMMAND = "python docs/hooks.py"
#: The page that also holds the contracts field by field (:mod:`flamingo_sim.fl.contract_reference`).
CONTRACTS_PAGE = "plugins.md"


def block_of(markdown: str, name: str) -> tuple[int, int]:
    """Where the generated tables sit in page ``name``: the span between :data:`BEGIN` and :data:`END`."""
    if markdown.count(BEGIN) != 1 or markdown.count(END) != 1 or markdown.index(BEGIN) > markdown.index(END):
        raise ValueError(f"docs/{name}: expected the line {BEGIN} and, after it, the line {END}, once each")
    return markdown.index(BEGIN) + len(BEGIN), markdown.index(END)


def with_tables(markdown: str, name: str, tables: str) -> str:
    """Page ``name``'s Markdown with ``tables`` between its markers."""
    start, end = block_of(markdown, name)
    return markdown[:start] + "\n\n" + tables.strip("\n") + "\n\n" + markdown[end:]


def stale(markdown: str, name: str) -> bool:
    """Whether page ``name``'s generated tables differ from what the code generates now."""
    return with_tables(markdown, name, GENERATED[name]()) != markdown


def write_pages(docs: Path = ROOT / "docs") -> list[str]:
    """Write every page's generated tables from the code; the pages that changed."""
    changed = []
    for name, make in GENERATED.items():
        path = docs / name
        text = path.read_text(encoding="utf-8")
        new = with_tables(text, name, make())
        if new != text:
            path.write_text(new, encoding="utf-8")
            changed.append(name)
    if write_block(docs / CONTRACTS_PAGE):
        changed.append(CONTRACTS_PAGE + " (the contracts)")
    return changed


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    """The site's build: a page whose generated tables no longer match the code fails it."""
    name = page.file.src_uri
    if name in GENERATED and stale(markdown, name):
        raise ValueError(f"docs/{name}: its generated tables no longer match the code; run {COMMAND}")
    if name == CONTRACTS_PAGE and with_block(markdown, f"docs/{name}") != markdown:
        raise ValueError(f"docs/{name}: its contract tables no longer match the code; run {COMMAND}")
    return markdown


if __name__ == "__main__":
    done = write_pages()
    print("wrote " + ", ".join(f"docs/{n}" for n in done) if done else "the generated tables are current")
