"""What the device model does not know, each as a stated plausible range with its reason; and a headline's range over them.

A figure the simulator prints rests on choices no measurement of the paper fixes: how Android scheduled the two apps,
which runtime PyTorch waited in, what a waiting core drew, what the radio drew. Each such *unknown* is a config key
with the values a reader could defend (:data:`UNKNOWNS`: the values, and why each is in the range).
``flamingo-sim sensitivity TASK --unknowns`` runs the task's headline at every value (one unknown at a time, around
the run's own configuration) and reports, beside the reference's seed interval, the range of each ratio over the
unknowns, and whether it holds the paper's figure (:func:`model_range`). A seed interval says how much a figure moves
with the randomness; the range says how much it moves with what the model had to assume.

Not varied here, and why: the uncore/DRAM power (0 on every shipped SoC: the ``paper`` set's powers are Table 1's
whole-phone measurements above idle, which hold it already; only the physical sets would move, and those are varied
as a whole through ``phones.profile_set``); L3 capacity contention between the two apps (no public per-phone measurement).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

__all__ = ["Unknown", "UNKNOWNS", "unknowns_vary", "model_range", "range_markdown"]


@dataclass(frozen=True)
class Unknown:
    """One thing the model does not know: the config key, the values in its plausible range, and why."""

    name: str
    key: str
    values: tuple[str, ...]
    reason: str


#: The device model's unknowns (each value a plausible reading; the run's own value is the reference).
UNKNOWNS: tuple[Unknown, ...] = (
    Unknown("scheduler", "policy.interference.model", ("android", "fair"),
            "the paper's phones ran WALT-era vendor kernels (4.9-4.19) whose placement rules no public trace pins down: "
            "Android's cpusets and cgroups as the phones ship them, or the owner's app holding its cores and slowing a "
            "shared one by a fixed factor"),
    Unknown("kernel scheduler", "policy.interference.scheduler", ("walt", "mainline"),
            "the paper's phones ran 4.9-4.19 kernels with Qualcomm's WALT, whose vendor init turns big-task rotation on "
            "(init.qcom.post_boot.sh, for sdm845, msmnile and kona); the Pixel 3's own init was not checked for it, "
            "and mainline EAS has no rotation"),
    Unknown("owner's boost", "policy.interference.foreground_nice", ("-10", "0"),
            "the top app's UI and render threads run at nice -10 (THREAD_PRIORITY_TOP_APP_BOOST) while the app is on "
            "top; an owner whose busy threads are other threads of the app runs at nice 0"),
    Unknown("owner's memory share", "policy.interference.owner_memory_share", ("0", "0.17", "0.68"),
            "the share of the owner's work that waits on DRAM beside training's traffic (default 0.34, web browsing's "
            "measured co-run slowdown read at a doubled memory latency; Shingari et al., IISWC 2015): none, or the "
            "slowdown read at a tripled or a 1.5x latency"),
    Unknown("app state", "policy.interference.app_state", ("foreground_service", "top_app", "background"),
            "the paper does not say how its training app ran beside the owner's; the state sets the cpuset, the cpu cgroup's "
            "share of a contended core and the memory limit (AOSP OomAdjuster, init.rc cpusets)"),
    Unknown("owner's threads", "policy.interference.foreground_threads", ("1", "2", "3"),
            "foreground apps keep 1-2 threads busy (SPEC section 3); 3 for a heavier app such as PCMark's"),
    Unknown("runtime", "policy.interference.runtime", ("pthreadpool", "libomp", "libgomp"),
            "Appendix B: PyTorch 1.8.1 with OpenMP built in Termux (LLVM's libomp or GNU's libgomp, each with its own "
            "spin before sleeping); PyTorch's Android builds wait in pthreadpool"),
    Unknown("contended energy", "policy.interference.energy", ("cpu_time", "full_power"),
            "a contended step charged each thread's own CPU time at its core's power, or the profiled power for the whole "
            "longer step: no measurement of a contended step's power exists for these phones"),
    Unknown("power of waiting cores", "phones.profile_set", ("paper", "anchored", "public"),
            "Table 1's measured energies (paper), the physical model anchored to them, or the public SoC figures alone: "
            "what cores waiting on memory or a barrier draw (a low operating point, an idle state) is measured only "
            "through Table 1"),
    Unknown("heat: time constant", "devices.time_constant_factor", ("0.5", "2"),
            "the circuit's C and R come from textbook coefficients (specific heat 0.7-1.0 J/g/K, surface coefficient "
            "2-25 W/m^2/K), not from these phones: a factor of 2 either way"),
    Unknown("heat: throttle point", "devices.throttle_threshold_c", ("37", "43"),
            "the shipped rules cap big cores at 40 degC and little ones at 45 (profiles/phones.yaml); no public "
            "thermal-engine configuration of these phones gives them: one threshold for every cluster, 3 K either side "
            "of the big cores' 40 degC"),
    Unknown("radio", "network.model", ("lognormal", "traces"),
            "the paper prices no radio energy and gives no network; the traces' network with Huang et al.'s radio power "
            "(bounded by Android's power_profile.xml) is the other reading"),
)


def unknowns_vary(given: Sequence[str] = ()) -> list[str]:
    """``--vary`` items for every unknown whose key the user does not vary already (``given``: their ``--vary`` items)."""
    taken = {item.partition("=")[0].strip() for item in given}
    return [f"{u.key}={','.join(u.values)}" for u in UNKNOWNS if u.key not in taken]


def _finite(values: Sequence[Any]) -> list[float]:
    return [float(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]


def model_range(rows: Sequence[Mapping[str, Any]], reference_per_seed: Mapping[str, Sequence[Any]],
                paper: dict[str, float] | None = None) -> dict[str, Any]:
    """Per ratio (``speedup``, ``energy_efficiency``): the reference's mean and its seed interval (min-max over seeds),
    the range over the unknowns (min-max over every point's seed mean, the reference's included), how many points had
    a value, and, with ``paper``, whether the range holds the paper's figure."""
    unknown_keys = {u.key for u in UNKNOWNS}
    out: dict[str, Any] = {}
    for ratio in ("speedup", "energy_efficiency"):
        ref = next((r[ratio] for r in rows if r["knob"] == "reference"), None)
        points = _finite([r[ratio] for r in rows if r["knob"] == "reference" or r["knob"] in unknown_keys])
        seeds = _finite(reference_per_seed.get(ratio, ()))
        entry: dict[str, Any] = {
            "reference": ref,
            "seed_interval": [min(seeds), max(seeds)] if seeds else None,
            "n_seeds": len(seeds),
            "model_range": [min(points), max(points)] if points else None,
            "n_points": len(points),
        }
        if paper is not None and ratio in paper:
            entry["paper"] = paper[ratio]
            entry["range_holds_paper"] = bool(points) and min(points) <= paper[ratio] <= max(points)
        out[ratio] = entry
    return out


def range_markdown(summary: dict[str, Any]) -> str:
    """The range block of ``sensitivity.md``: one row per ratio, and the unknowns with their reasons."""
    lines = ["", "## The headline over the model's unknowns", "",
             "| ratio | reference | seed interval | range over the unknowns | paper | range holds the paper's |", "|---|---|---|---|---|---|"]
    for ratio, e in summary.items():
        seeds = "-" if e["seed_interval"] is None else f"{e['seed_interval'][0]:.2f}-{e['seed_interval'][1]:.2f}x ({e['n_seeds']} seeds)"
        span = "-" if e["model_range"] is None else f"{e['model_range'][0]:.2f}-{e['model_range'][1]:.2f}x ({e['n_points']} points)"
        ref = "-" if e["reference"] is None else f"{e['reference']:.2f}x"
        paper = f"{e['paper']:.1f}x" if "paper" in e else "-"
        holds = ("yes" if e["range_holds_paper"] else "no") if "range_holds_paper" in e else "-"
        lines.append(f"| {ratio.replace('_', ' ')} | {ref} | {seeds} | {span} | {paper} | {holds} |")
    lines += ["", "The unknowns (each varied alone around the reference):", ""]
    lines += [f"- **{u.name}** (`{u.key}`: {', '.join(u.values)}): {u.reason}." for u in UNKNOWNS]
    return "\n".join(lines) + "\n"
