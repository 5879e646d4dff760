"""Flamingo's runtime (SPEC section 3): monitoring, exploration, profile sharing, control loop.

**Flamingo** (SPEC section 3), per request, in this order:

1. Monitoring: battery above ``max_temperature_c`` (35 degC) -> decline ``'too_hot'``.
2. Exploring (the client has no full profile of its device model yet):
   - idle (owner not using the phone at the request's start) and unplugged -> accept and
     explore, work-conserving (every step counts), in one of three modes (``exploration``):

     ``packed`` (the default): the task profiles the client's next unexplored choices in
     state-space order, ``explore_steps`` batches each, so one or two requests explore every
     choice; a choice counts as explored once its batches ran in full, and steps left after
     the last choice run under the control loop. With ``share_profiles`` the coordinator hands
     the device model's profile to every client of that model once the *first* client of the
     model has finished exploring.

     ``per_request`` (the paper's text read literally: "a different execution choice for each
     training request until all choices are explored"): each exploring task runs whole on the
     client's next unexplored choice, profiled over every batch of the request; sharing as in
     ``packed`` (once the first client of the model has explored every choice), so a model is
     profiled only after some client has been selected, idle and unplugged, once per choice.

     ``collective``: each exploring task runs whole on one choice; with sharing the
     coordinator splits the model's unmeasured choices across the round's explorers (one that
     finds none left runs ``4567`` like a charging client) and shares the profile once every
     choice has been measured by someone (without sharing it is ``per_request``).

     ``none``: the coordinator holds every phone model's profile from the first round (the
     paper's section 4.2: exploration "can be eliminated by leveraging the central
     coordinator(s)"; its section 5.1 emulated devices from profiles benchmarked beforehand),
     so every client is profiled from its first request and none explores.

     In the three exploring modes, exploration progress is booked only after the round is settled
     (:meth:`FlamingoPolicy.settle`): an explorer cut by the deadline or the K-fastest rule
     has explored only the choices it finished before the round ended.
   - in use -> decline ``'in_use_exploring'`` (SPEC: requests in use are accepted only after
     exploration; a measurement under interference would be wrong).
   - idle and charging -> accept and run on ``4567`` without monitoring (the runtime has no
     profile yet to run its control loop against, and the battery cannot be used to measure
     energy while charging, so no exploration progress is made).
3. Profiled: in use, unplugged and battery below ``min_battery_pct`` -> decline
   ``'low_battery_in_use'``; otherwise accept and run the control loop over the device
   model's viable choices starting from the largest (fastest). The paper says only "above a
   minimum battery level"; the level (30 %) is the simulator's choice, a knob.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from flamingo_sim.devices.policies.base import Ladders, PricedPolicy, TaskOutcome, TaskRequest
from flamingo_sim.devices.profiles import ProfileSet
from flamingo_sim.devices.sparse import SparseVector

__all__ = ["FlamingoPolicy"]


class FlamingoPolicy(PricedPolicy):
    """Flamingo's runtime: monitoring, exploration, profile sharing, control loop (module docstring)."""

    name = "flamingo"

    def init(self, n_clients: int, phone_idx: np.ndarray, profile_set: ProfileSet) -> None:
        super().init(n_clients, phone_idx, profile_set)
        self.explored = SparseVector(n_clients, np.int64)  # state-space choices each client explored (held for explorers only)
        width = profile_set.space_latency_s.shape[1]
        self.model_done = np.zeros((profile_set.n_phones, width), dtype=bool)  # coordinator: measured choices
        # coordinator has the profile: from the start with ``exploration: none``
        self.shared_table = np.full(profile_set.n_phones, self.config.exploration == "none", dtype=bool)
        self._pending: dict[str, np.ndarray] | None = None

    def profiled(self, client_idx: np.ndarray) -> np.ndarray:
        """Whether each client has its device model's profile (own or shared)."""
        ps = self.profiles
        ph = self.client_phone[client_idx]
        own = self.explored[client_idx] >= ps.n_space[ph]
        known = self.shared_table[ph] & (self.config.share_profiles or self.config.exploration == "none")
        return own | known

    @property
    def _split(self) -> bool:
        """Collective exploration with the coordinator splitting choices across clients."""
        return self.config.exploration == "collective" and self.config.share_profiles

    def _segments(self, explore: np.ndarray, ci: np.ndarray, ph: np.ndarray, n_steps: int) -> tuple:
        """Each explorer's segments: state-space positions ``(k, S)`` (-1: none) and steps ``(k, S)``."""
        ps, cfg = self.profiles, self.config
        k = len(ci)
        seg_len = min(cfg.explore_steps, n_steps) if cfg.exploration == "packed" else n_steps
        if self._split:
            first = np.full(k, -1, dtype=np.int64)
            for p in np.unique(ph[explore]):
                mine = np.flatnonzero(explore & (ph == p))
                todo = np.flatnonzero(~self.model_done[p, : ps.n_space[p]])
                take = min(len(mine), len(todo))
                first[mine[:take]] = todo[:take]
            return first[:, None], np.where(first >= 0, n_steps, 0)[:, None], seg_len
        pos = self.explored[ci]
        n_seg = np.where(explore, np.minimum(-(-n_steps // max(seg_len, 1)), ps.n_space[ph] - pos), 0) if n_steps else np.zeros(k, dtype=np.int64)
        width = max(int(n_seg.max(initial=0)), 1)
        j = np.arange(width)[None, :]
        valid = j < n_seg[:, None]
        choice = np.where(valid, pos[:, None] + j, -1)
        steps = np.where(valid, np.minimum(seg_len, n_steps - j * seg_len), 0)
        return choice, steps, seg_len

    def run_tasks(self, request: TaskRequest) -> TaskOutcome:
        ps = self.ready(request)
        k = request.k
        ci = np.asarray(request.client_idx, dtype=np.int64)
        ph = np.asarray(request.phone_idx, dtype=np.int64)
        use0 = np.asarray(request.in_use, dtype=bool)[:, 0]
        charging = np.asarray(request.charging, dtype=bool)
        profiled = self.profiled(ci)

        reason = self.monitor(request, profiled)
        reason[(reason == "") & ~profiled & use0] = "in_use_exploring"
        accepted = reason == ""
        explore = accepted & ~profiled & ~charging
        seg_choice, seg_steps, seg_len = self._segments(explore, ci, ph, request.n_steps)
        explore &= (seg_steps > 0).any(axis=1)
        default = accepted & ~profiled & ~explore
        control = accepted & profiled

        # Controlled and default tasks: one ladder each (viable choices, or 4567 alone).
        width = ps.latency_s.shape[1]
        lat = np.full((k, width), np.nan)
        pw = np.full((k, width), np.nan)
        lab = np.full((k, width), -1, dtype=np.int64)
        n_rungs = np.ones(k, dtype=np.int64)
        lat[control], pw[control], lab[control] = ps.latency_s[ph[control]], ps.power_w[ph[control]], ps.label_idx[ph[control]]
        n_rungs[control] = ps.n_viable[ph[control]]
        lat[default, 0] = ps.baseline_latency_s[ph[default]]
        pw[default, 0] = ps.baseline_power_w[ph[default]]
        lab[default, 0] = ps.baseline_label_idx[ph[default]]
        got = self.price(request, Ladders(lat, pw, lab, n_rungs, control), control | default)

        # Explorers: one segment per explored choice, back to back, then the rest controlled.
        t = np.zeros(k)
        seg_end = np.zeros(seg_choice.shape)
        for j in range(seg_choice.shape[1]):
            run = explore & (seg_steps[:, j] > 0)
            pos = np.maximum(seg_choice[:, j], 0)
            part = self.price(request, Ladders.single(ps.space_latency_s[ph, pos], ps.space_power_w[ph, pos], ps.space_label_idx[ph, pos]),
                              run, n_steps=seg_steps[:, j], start_s=t)
            got = got.then(part)
            t = np.where(run, part.end_s, t)
            seg_end[:, j] = t
        rest = np.where(explore, request.n_steps - seg_steps.sum(axis=1), 0)
        run = rest > 0
        if run.any():
            ladders = Ladders(ps.latency_s[ph], ps.power_w[ph], ps.label_idx[ph], ps.n_viable[ph], np.ones(k, dtype=bool))
            got = got.then(self.price(request, ladders, run, n_steps=rest, start_s=t))
        dur = got.duration_s
        rows = np.flatnonzero(explore)
        self._pending = {"rows": rows, "client": ci[rows], "phone": ph[rows], "choice": seg_choice[rows],
                         "full": seg_steps[rows] == seg_len, "end_s": seg_end[rows], "duration_s": dur[rows]}

        mode = np.full(k, "declined", dtype=object)
        mode[explore], mode[default], mode[control] = "explore", "default", "control"
        return TaskOutcome(accepted, reason, dur, got.energy_j, got.interference_s, got.steps_by_label, ps.labels, mode,
                           foreground_lost_s=got.foreground_lost_s)

    def settle(self, outcome: TaskOutcome, done_frac: np.ndarray) -> None:
        """Book exploration progress once the round is settled.

        ``done_frac`` (over the round's requests): the share of each task that ran. A choice
        counts as explored if its ``explore_steps`` batches ended within the part that ran
        (``done_frac x duration``); the coordinator's table is updated afterwards.
        """
        pend, self._pending = self._pending, None
        if pend is None or not len(pend["rows"]):
            return
        ps = self.profiles
        ran = np.asarray(done_frac, dtype=float)[pend["rows"]] * pend["duration_s"]
        ok = pend["full"] & (pend["choice"] >= 0) & (pend["end_s"] <= ran[:, None] * (1 + 1e-9) + 1e-9)
        ph = pend["phone"]
        if self._split:
            rows, cols = np.nonzero(ok)
            self.model_done[ph[rows], pend["choice"][rows, cols]] = True
            width = self.model_done.shape[1]
            self.shared_table |= (self.model_done | (np.arange(width)[None, :] >= ps.n_space[:, None])).all(axis=1)
            return
        self.explored.add(pend["client"], np.cumprod(ok, axis=1).sum(axis=1))  # distinct clients: one task each
        if self.config.share_profiles:
            finished = self.explored[pend["client"]] >= ps.n_space[ph]
            self.shared_table[ph[finished]] = True

    def state_dict(self) -> dict[str, Any]:
        out = super().state_dict()
        out.update(explored=self.explored.state_dict(), model_done=self.model_done.copy(), shared_table=self.shared_table.copy())
        return out

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.explored.load_state_dict(state["explored"], "explored")  # sparse, or a dense array saved by an older version
        self.model_done = np.asarray(state["model_done"], dtype=bool).copy()
        self.shared_table = np.asarray(state["shared_table"], dtype=bool).copy()
        self._pending = None
