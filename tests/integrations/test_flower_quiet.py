"""``--engine flower`` as a user sees it (issue 32): the wait before round 1 says what it waits for,
warnings about how flamingo-sim calls Ray and Flower are dropped, Flower's others show once, coloured
only on a terminal."""

from __future__ import annotations

import io
import logging
import re
import time
import warnings

import pytest

from flamingo_sim.integrations import flower as fli

needs_flower = pytest.mark.skipif(not fli.flower_available(), reason=f"Flower's extra is not installed: {fli.INSTALL_HINT}")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _flower_warnings(stream) -> None:
    """What Flower's engine says on each run_simulation call, and a warning of Flower's own."""
    from flwr.common.logger import log, warn_deprecated_feature

    for _ in range(2):
        warn_deprecated_feature("The `run_simulation` function is deprecated and will be removed in a future version of Flower.")
        log(logging.WARNING, "a node took 3 s to answer")
        warnings.warn_explicit("Tip: In future versions of Ray, Ray will no longer override accelerator visible devices env var",
                               FutureWarning, "worker.py", 2051, module="ray._private.worker")


@needs_flower
@pytest.mark.parametrize("stream,coloured", [(io.StringIO(), False), (_Terminal(), True)], ids=["pipe", "terminal"])
def test_flower_and_ray_warnings_filtered_once_and_coloured_only_on_a_terminal(stream, coloured):
    from flwr.common.logger import console_handler

    from flamingo_sim.integrations.flower.simulation import _FLOWER_FILTER, quiet_third_party

    _FLOWER_FILTER.seen.clear()
    before = console_handler.colored
    seen = io.StringIO()
    old = console_handler.setStream(seen)  # what Flower prints
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with quiet_third_party(stream):
                _flower_warnings(stream)
    finally:
        console_handler.setStream(old)
    err = seen.getvalue()
    assert "DEPRECATED FEATURE" not in err and "run_simulation" not in err
    assert err.count("a node took 3 s to answer") == 1
    assert ("\x1b[" in err) == coloured
    assert not [w for w in caught if issubclass(w.category, FutureWarning)]
    assert console_handler.colored == before  # restored


@needs_flower
def test_the_wait_line_counts_on_a_terminal_and_clears_itself(monkeypatch):
    monkeypatch.delenv("FLAMINGO_SIM_QUIET", raising=False)  # the line is drawn only when not quiet
    from flamingo_sim.integrations.flower.simulation import WaitLine

    term = _Terminal()
    line = WaitLine("baseline seed 0: waiting for Ray and Flower's client actors to start", stream=term, every_s=0.05).start()
    deadline = time.monotonic() + 30  # the first redraw, however loaded the machine (a fixed sleep was flaky in the full suite)
    while "\x1b[K" not in term.getvalue() and time.monotonic() < deadline:
        time.sleep(0.01)
    line.on_round_end(None, None)  # type: ignore[arg-type]  # round 1 ended
    out = term.getvalue()
    # the seconds waited: 0 on an idle machine, more when the first redraw comes late under load
    assert re.search(r"\rbaseline seed 0: waiting for Ray and Flower's client actors to start: \d+ s\x1b\[K", out), out
    assert out.endswith("\r\x1b[K")
    size = len(out)
    time.sleep(0.15)
    assert len(term.getvalue()) == size  # stopped

    piped = io.StringIO()
    quiet = WaitLine("waiting", stream=piped, every_s=0.05).start()
    time.sleep(0.15)
    quiet.close()
    assert piped.getvalue() == ""


@needs_flower
def test_ray_not_starting_is_one_line(monkeypatch):
    import ray

    from flamingo_sim.errors import FlamingoError
    from flamingo_sim.integrations.flower.simulation import _start_ray

    def timed_out(**kwargs):  # what ray.init raised on an overloaded machine
        raise Exception("The current node timed out during startup. This could happen because some of the raylet failed to "
                        "startup or the GCS has become overloaded.")

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", timed_out)
    with pytest.raises(FlamingoError) as info:
        _start_ray(1)
    assert str(info.value) == ("Flower's Ray backend did not start: The current node timed out during startup. This could happen "
                               "because some of the raylet failed to startup or the GCS has become overloaded; try again when "
                               "the machine is less busy")
