"""Names the study commands share: the run directory of one point of a sensitivity grid.

``sensitivity`` names each point's run directory with :func:`point_name`, and the docs'
``points`` blocks (:func:`flamingo_sim.studies.reproduce.why.points_md`) find each point's
``summary.json`` by the same name, so the two cannot drift apart.
"""

from __future__ import annotations

from typing import Any

#: The point where no knob is varied.
REFERENCE = "reference"


def point_name(key: str, value: Any) -> str:
    """The run directory of one knob value: ``KEY=VALUE``, a path separator in the value made ``_``
    (``traces.path=traces/other`` -> ``traces.path=traces_other``)."""
    return f"{key}={value}".replace("/", "_")
