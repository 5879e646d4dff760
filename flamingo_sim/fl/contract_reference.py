"""The plug-in contracts field by field, generated from the code so that the guide cannot drift.

The plug-in guide (``docs/plugins.md``) holds, between the lines ``<!-- contracts: ... -->`` and
``<!-- /contracts -->``, what :func:`contracts_markdown` returns: for each contract (policy,
selector, aggregator, engine, executor) the parts the engine calls (signature, required or
optional, what it is for: the first paragraph of the contract method's docstring) and every field
of the records it is handed and returns (``TaskRequest``, ``TaskOutcome``, ``CoordinatorView``, ...):
name, type and default as the source declares them, meaning from the ``#:`` comment above the
field or the comment after it. The source is read with :mod:`ast`, never executed.
``python docs/hooks.py`` rewrites the block with the pages' other generated tables (:func:`write_block`;
``python -m flamingo_sim.fl.contract_reference docs/plugins.md`` rewrites it alone), the site's build
fails when it is stale, and ``tests/test_plugins_page.py`` fails when the page and the code differ or
a field has no meaning.
"""

from __future__ import annotations

import ast
import inspect
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from flamingo_sim.fl.config_reference import class_source

__all__ = ["Field", "fields_of", "contracts_markdown", "with_block", "write_block", "START", "END"]

#: The lines around the generated block in ``docs/plugins.md``.
START = "<!-- contracts: generated from the code by `python docs/hooks.py`; tests/test_plugins_page.py checks it -->"
END = "<!-- /contracts -->"


@dataclass(frozen=True)
class Field:
    """One field of a record (or an attribute of a class) as its source declares it."""

    name: str
    type: str
    default: str
    meaning: str


def _comment_after(line: str) -> str:
    """The comment at the end of a source line ('' if none; a ``#`` inside a string is not one)."""
    try:
        import io
        import tokenize

        for tok in tokenize.generate_tokens(io.StringIO(line.strip() + "\n").readline):
            if tok.type == tokenize.COMMENT:
                text = tok.string.lstrip("#").strip()
                return "" if text.startswith(("type:", "noqa")) else text.split("  # type:")[0].strip()
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return ""
    return ""


def fields_of(cls: type, meanings: dict[str, str] | None = None) -> list[Field]:
    """The annotated fields of ``cls``'s body, in source order (private ones, ``_x``, left out); ``meanings``:
    where a field has no comment, what it means (a record's metrics columns, documented once in
    :data:`~flamingo_sim.fl.metrics.summary.COLUMNS`)."""
    node, lines = class_source(cls)
    out: list[Field] = []
    for stmt in node.body:
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)) or stmt.target.id.startswith("_"):
            continue
        above, i = [], stmt.lineno - 2
        while i >= 0 and lines[i].strip().startswith("#:"):
            above.append(lines[i].strip()[2:].strip())
            i -= 1
        meaning = (" ".join(reversed(above)).strip() or _comment_after(lines[stmt.end_lineno - 1] if stmt.end_lineno else "")
                   or (meanings or {}).get(stmt.target.id, ""))
        default = "" if stmt.value is None else ast.unparse(stmt.value)
        if default.startswith("field("):  # field(default=..., ...): its default, or none to show
            call = stmt.value
            assert isinstance(call, ast.Call)
            kw = {k.arg: k.value for k in call.keywords}
            default = ast.unparse(kw["default"]) if "default" in kw else ast.unparse(kw["default_factory"]) + "()" if "default_factory" in kw else ""
        out.append(Field(stmt.target.id, ast.unparse(stmt.annotation), default, meaning))
    return out


_ROLE = re.compile(r":[a-z]+:`(~?)([^`]+)`")


def _md(text: str) -> str:
    """reStructuredText's inline markup as Markdown: ``code`` and :role:`target` as `code` (``~`` keeps the last name)."""
    text = _ROLE.sub(lambda m: f"`{m.group(2).rsplit('.', 1)[-1] if m.group(1) else m.group(2)}`", text)
    return text.replace("``", "`")


def _paragraphs(doc: str) -> list[str]:
    """A docstring's paragraphs as Markdown lines: prose joined into one line, a list one item a line."""
    out: list[str] = []
    for para in doc.split("\n\n"):
        if para.lstrip().startswith("- "):
            out += ["- " + " ".join(item.split()) for item in para.strip()[2:].split("\n- ")]
        else:
            out.append(" ".join(para.split()))
        out.append("")
    return [_md(line) for line in out]


def _first_paragraph(obj: Any) -> str:
    doc = inspect.getdoc(obj) or ""
    return _md(" ".join(doc.split("\n\n")[0].split()))


def _signature(func: Callable[..., Any], bound: bool = True) -> str:
    params = list(inspect.signature(func).parameters.values())[1 if bound else 0:]
    shown = []
    for p in params:
        text = p.name if p.annotation is inspect.Parameter.empty else f"{p.name}: {p.annotation}"
        if p.default is not inspect.Parameter.empty:
            text += f" = {p.default!r}"
        shown.append(text)
    ret = inspect.signature(func).return_annotation
    return f"{func.__name__}({', '.join(shown)})" + ("" if ret is inspect.Signature.empty else f" -> {ret}")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _where(obj: Any) -> str:
    return f"{obj.__module__}.{obj.__qualname__}"


def _parts_table(contract: Any, extra: Sequence[str] = ()) -> list[str]:
    """The contract's parts: required, then optional (data attributes with their default)."""
    rows = ["| part | | what it is |", "|---|---|---|"]
    for name in [*contract.required, *contract.optional, *extra]:
        stub = contract.stub(name)
        kind = "required" if name in contract.required else "optional" if name in contract.optional else "helper"
        if inspect.isfunction(stub):
            shown, what = _signature(stub), _first_paragraph(stub)
        else:
            field = next((f for f in fields_of(contract.base) if f.name == name), None)
            shown = f"{name}: {field.type} = {field.default}" if field else name
            what = _md(field.meaning) if field else ""
        rows.append(f"| `{_cell(shown)}` | {kind} | {_cell(what)} |")
    return rows


def _methods_table(cls: type, names: Sequence[str]) -> list[str]:
    rows = ["| method | what it does |", "|---|---|"]
    for name in names:
        member = inspect.getattr_static(cls, name)
        if isinstance(member, property):
            rows.append(f"| `{name}` (property) | {_cell(_first_paragraph(member))} |")
        else:
            rows.append(f"| `{_cell(_signature(getattr(cls, name)))}` | {_cell(_first_paragraph(member))} |")
    return rows


def _record(cls: type, meanings: dict[str, str] | None = None) -> list[str]:
    """A record's heading, its docstring's first paragraph and its fields."""
    out = [f"#### `{cls.__name__}`", "", f"`{_where(cls)}`: {_first_paragraph(cls)}", "",
           "| field | type | default | meaning |", "|---|---|---|---|"]
    for f in fields_of(cls, meanings):
        default = f"`{_cell(f.default)}`" if f.default else "required"
        out.append(f"| `{f.name}` | `{_cell(f.type)}` | {default} | {_cell(_md(f.meaning))} |")
    return out + [""]


def _sections() -> list[tuple[str, Any, list[str]]]:
    """(title, contract, the lines after its parts table) of each contract, in the guide's order."""
    from flamingo_sim.devices.policies import base as policies
    from flamingo_sim.devices.profiles import ProfileSet
    from flamingo_sim.fl.metrics.summary import COLUMNS
    from flamingo_sim.fl.runner import engines, unit_files
    from flamingo_sim.fl.runner.executors import base as executors
    from flamingo_sim.fl.runner.executors.progress import Progress
    from flamingo_sim.fl.sim import records, simulation
    from flamingo_sim.fl.strategy import base as strategy

    profile_doc = _paragraphs(inspect.getdoc(ProfileSet) or "")
    profile_set = ["#### `ProfileSet`", "", f"`{_where(ProfileSet)}`: {profile_doc[0]}", *profile_doc[1:]]
    return [
        ("A policy", policies.CONTRACT, [
            "Built as `cls(config, **params)`: `config` the experiment's `policy` section (`PolicyConfig`, in the "
            "[configuration reference](configuration.md)), `params` the fields of its own `Params` from `policy_params.<name>`.", "",
            *_record(policies.TaskRequest), *_record(policies.TaskOutcome), *profile_set,
            "#### `PricedPolicy`: the helpers the shipped policies are written with", "",
            f"`{_where(policies.PricedPolicy)}`: {_first_paragraph(policies.PricedPolicy)}", "",
            *_methods_table(policies.PricedPolicy, ("ready", "monitor", "run_fixed", "price")), "",
            *_record(policies.Ladders), *_record(policies.Priced)]),
        ("A selector", strategy.SELECTOR, [*_record(strategy.CoordinatorView),
                                           *_methods_table(strategy.CoordinatorView, ("battery_pct", "battery_pct_at")), ""]),
        ("An aggregator", strategy.AGGREGATOR, [
            "`global_state` and the result: the model's `state_dict` (name -> tensor); `stacked`: the same names, each "
            "tensor with one more first dimension, one entry per kept client; `n_samples`: each kept client's sample count.", ""]),
        ("An engine", engines.CONTRACT, [
            "Built as `factory(options)`; it drives one simulation and calls the run loop's callbacks "
            "(`on_run_begin`, `on_round_begin`, `on_round_end`, `on_run_end`) around each round.", "",
            *_record(engines.EngineOptions),
            "#### `Simulation`", "", f"`{_where(simulation.Simulation)}`: {_first_paragraph(simulation.Simulation)}", "",
            *_methods_table(simulation.Simulation, ("step", "plan_round", "train_round", "finish_round", "initial_record", "is_done",
                                                    "set_global_params", "lose_updates")), "",
            *_record(simulation.RoundPlan), *_record(records.RoundRecord, COLUMNS)]),
        ("An executor", executors.CONTRACT, [
            *_record(unit_files.Unit), *_record(executors.Dispatch), *_methods_table(executors.Dispatch, ("in_process",)), "",
            "#### `Progress`", "", f"`{_where(Progress)}`: {_first_paragraph(Progress)}", "",
            *_methods_table(Progress, ("start", "finish", "fail")), ""]),
    ]


def contracts_markdown() -> str:
    """The guide's generated block (module docstring), without its two marker lines."""
    out: list[str] = []
    for title, contract, after in _sections():
        out += [f"### {title}: `{contract.where}`", "", _first_paragraph(contract.base), "", *_parts_table(contract), "", *after]
    return "\n".join(out).rstrip() + "\n"


def with_block(text: str, where: str = "the page") -> str:
    """``text`` (the guide's Markdown) with :func:`contracts_markdown` between its marker lines."""
    if text.count(START) != 1 or text.count(END) != 1:
        raise ValueError(f"{where}: expected the lines {START} and {END} once each")
    head, rest = text.split(START + "\n", 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{contracts_markdown()}{END}{tail}"


def write_block(page: str | Path) -> bool:
    """Put :func:`contracts_markdown` between the page's marker lines; whether the page changed."""
    path = Path(page)
    text = path.read_text(encoding="utf-8")
    new = with_block(text, str(path))
    if new != text:
        path.write_text(new, encoding="utf-8")
    return new != text


if __name__ == "__main__":  # python -m flamingo_sim.fl.contract_reference docs/plugins.md
    if len(sys.argv) != 2:
        raise SystemExit("usage: python -m flamingo_sim.fl.contract_reference PAGE.md")
    print(f"{sys.argv[1]}: {'rewritten' if write_block(sys.argv[1]) else 'already up to date'}")
