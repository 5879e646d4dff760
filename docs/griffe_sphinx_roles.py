"""Griffe extension for the API reference: Sphinx conventions become what mkdocstrings shows.

The code's docstrings follow Sphinx's conventions (``:class:`~flamingo_sim.x.Y```,
``:func:`load_config```, ``::`` before a literal block), which Markdown would print as they
are. This extension rewrites each role into an *optional* autorefs cross-reference: a link
where the target is documented on the site, its name in code font where it is not (a private
helper, another library), so ``mkdocs build --strict`` never fails on one. A target without
a package path is looked up beside the object (its class, then its module).

An attribute documented the Sphinx way, by ``#:`` comment lines directly above it (every
config field is), gets them as its docstring. Registered in ``mkdocs.yml`` under the python
handler's ``extensions``.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|attr|data|exc|obj|const):`(?P<body>[^`]+)`")
TITLED = re.compile(r"^(?P<title>.+?)\s*<(?P<target>[^>]+)>$")


class SphinxRoles(griffe.Extension):
    """Rewrite ``:role:`target``` in every docstring (see the module docstring)."""

    def on_object(self, *, obj: griffe.Object, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        if obj.docstring is None and obj.is_attribute:
            self._comment_docstring(obj)
        if obj.docstring is None:
            return
        text = ROLE.sub(lambda m: self._reference(m["body"], obj, loader), obj.docstring.value)
        text = re.sub(r"::$", ":", text, flags=re.MULTILINE)  # reST's literal-block marker
        obj.docstring.value = text

    @staticmethod
    def _comment_docstring(obj: griffe.Object) -> None:
        if obj.lineno is None or obj.filepath is None or isinstance(obj.filepath, list):
            return
        lines = obj.lines_collection[obj.filepath]
        above, i = [], obj.lineno - 2  # the line above, 0-based
        while i >= 0 and lines[i].strip().startswith("#:"):
            above.append(lines[i].strip()[2:].strip())
            i -= 1
        if above:
            obj.docstring = griffe.Docstring(" ".join(reversed(above)), lineno=i + 2, parent=obj)

    @staticmethod
    def _reference(body: str, obj: griffe.Object, loader: griffe.GriffeLoader) -> str:
        body = body.strip().lstrip("!")
        if m := TITLED.match(body):
            title, target = m["title"], m["target"].lstrip("~.")
        else:
            target = body.lstrip("~.")
            title = target.rsplit(".", 1)[-1] if body.startswith("~") else target
        identifier = target
        if not target.startswith("flamingo_sim"):
            scopes = [obj.path] if obj.is_class or obj.is_module else []
            scopes += [p.path for p in (obj.parent, obj.module) if p is not None]
            for scope in scopes:
                try:
                    loader.modules_collection[f"{scope}.{target}"]
                except (KeyError, ValueError, griffe.AliasResolutionError):
                    continue
                identifier = f"{scope}.{target}"
                break
        return f'<autoref identifier="{identifier}" optional><code>{title}</code></autoref>'
