"""The network a task's model transfers run on: how long they take and what the radio draws.

A task downloads the model at its start and uploads the update at its end
(``download | training | upload``); :meth:`Network.transfers` prices both for a round's cohort.

``network.model: lognormal`` (the default) is the simulator as it was before the network came
from the traces: each client one bandwidth, log-normal around ``bandwidth_mbps`` (or FedScale's
measured one), the same both ways, every transfer ``model_size_mb x 8 / bandwidth`` seconds, no
radio energy. The numbers are the same, bit for bit.

``network.model: traces``: each transfer runs on the network the client's trace shows at that
time (``network_state`` of :mod:`flamingo_sim.traces.network`; where unknown, the client's own
draw of ``unknown_wifi_share``), at that network's bandwidth in that direction:

- the bandwidths: the means ``wifi_down_mbps``, ``wifi_up_mbps``, ``cellular_down_mbps``,
  ``cellular_up_mbps`` (Ookla's Speedtest Global Index) x one log-normal factor per client and
  network (mean 1, log-sd ``spread_sigma``), capped on WiFi by the trace's link rate where it has
  one; or, with ``fedscale_capacity_file``, the client's measured bandwidth on every network;
- the radio: each transfer's energy by Huang et al.'s model (:mod:`flamingo_sim.devices.radio`):
  a promotion when a radio starts carrying data (its time adds to the transfer), ``alpha x rate
  + beta`` while the data flows, and the tail after it. The download's tail lasts until the
  upload starts, on the same radio, if that is sooner (then the upload needs no promotion);
- a transfer that outlasts the client's stay on a network goes on at the next network's
  bandwidth, on its radio (the old radio's tail and the new one's promotion are paid); while the
  trace shows no network (or, with ``unmetered_only``, cellular) the transfer pauses and resumes
  when a usable network returns. A transfer that finds none for :data:`MAX_WAIT_S` gives up: the
  task is *abandoned* (the round counts it ``interrupted``; an abandoned download never trained);
- who can be reached: a client whose trace shows no network at the round's start cannot be
  selected (with ``unmetered_only``, none that is on cellular either).

The radio's energy is the task's too: it drains the battery like training's (the charger pays
for a plugged-in phone) and counts in ``energy_j``; the metrics report it apart
(``radio_energy_j``). The compute between the transfers is priced by the policy from the round's
start, as with the ``lognormal`` model: the owner-use slots it reads start before the download
ends (a download lasts seconds to a few minutes, a slot ten).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

import numpy as np

from flamingo_sim.devices.pricing import transfer_s
from flamingo_sim.devices.radio import LTE, WIFI, RadioPower
from flamingo_sim.numeric import exp
from flamingo_sim.rng import rng
from flamingo_sim.traces.network import CELLULAR, NONE
from flamingo_sim.traces.network import WIFI as ON_WIFI

if TYPE_CHECKING:
    from flamingo_sim.fl.config import NetworkConfig
    from flamingo_sim.fl.sim.population import Population
    from flamingo_sim.traces.store import ClientTraces

__all__ = ["Network", "Transfers", "MAX_WAIT_S"]

#: A transfer that finds no usable network for this long gives up (a day).
MAX_WAIT_S = 86400.0
#: Radios by network state (0 none: no radio).
_RADIOS: tuple[Optional[RadioPower], ...] = (None, WIFI, LTE)


@dataclass(frozen=True)
class Transfers:
    """A cohort's model transfers (arrays over the clients asked about)."""

    comm_s: np.ndarray  # download + upload time, waits included
    download_s: np.ndarray
    radio_energy_j: np.ndarray  # zeros under the lognormal model
    abandoned: np.ndarray  # bool: gave up without a network for MAX_WAIT_S
    download_abandoned: np.ndarray  # bool: of them, those that never finished the download (never trained)
    start_state: np.ndarray  # int8: the network each download started on (0 none, 1 WiFi, 2 cellular)


def _tail_j(radio: np.ndarray) -> np.ndarray:
    """The whole tail of each radio (-1: none, nothing)."""
    out = np.zeros(len(radio))
    for r, model in enumerate(_RADIOS):
        if model is not None:
            out[np.asarray(radio) == r] = model.tail_j
    return out


class Network:
    """The network of every client of one (experiment, seed): bandwidths drawn once, states read from the traces."""

    def __init__(self, cfg: NetworkConfig, traces: ClientTraces, population: Population, seed: int, model_size_mb: float,
                 capacity_kbps: np.ndarray | None = None) -> None:
        self.cfg, self.traces, self.population, self.model_size_mb, self.seed = cfg, traces, population, model_size_mb, seed
        self.capacity_kbps = capacity_kbps
        self.has_states = "network_state" in traces.extras
        # drawn on first use: a plain lognormal run never draws them (and holds no per-client array of its own)
        self._fallback: np.ndarray | None = None
        self._factor: dict[int, np.ndarray] = {}

    @property
    def fallback(self) -> np.ndarray:
        """float64 (n,): each client's network where its trace does not tell (1 WiFi, 2 cellular)."""
        if self._fallback is None:
            draw = rng(self.seed, "network", "unknown").random(self.population.n_clients)
            self._fallback = np.where(draw < self.cfg.unknown_wifi_share, ON_WIFI, CELLULAR).astype(np.float64)
        return self._fallback

    def _means(self, state: int) -> tuple[float, float]:
        cfg = self.cfg
        return (cfg.wifi_down_mbps, cfg.wifi_up_mbps) if state == 1 else (cfg.cellular_down_mbps, cfg.cellular_up_mbps)

    def factor(self, state: int) -> np.ndarray:
        """float64 (n,): each client's bandwidth factor on WiFi (1) or cellular (2): log-normal, mean 1, log-sd ``spread_sigma``."""
        if state not in self._factor:
            sigma, name = self.cfg.spread_sigma, "wifi" if state == 1 else "cellular"
            self._factor[state] = exp(sigma * rng(self.seed, "network", name).standard_normal(self.population.n_clients) - sigma * sigma / 2.0)
        return self._factor[state]

    def mbps(self, clients: np.ndarray, state: np.ndarray, up: bool) -> np.ndarray:
        """Each of ``clients``'s bandwidth on ``state`` (0 none: 0 Mbit/s), in the direction ``up``: the mean x its factor,
        or its FedScale capacity."""
        clients = np.asarray(clients, dtype=np.int64)
        state = np.asarray(state)
        out = np.zeros(len(clients))
        for s in (1, 2):
            mine = state == s
            if not mine.any():
                continue
            if self.capacity_kbps is not None:
                out[mine] = np.asarray(self.capacity_kbps, dtype=np.float64)[clients[mine]] / 1000.0
            else:
                out[mine] = self._means(s)[1 if up else 0] * self.factor(s)[clients[mine]]
        return out

    @property
    def down_mbps(self) -> np.ndarray:
        """float64 (n, 3): every client's download bandwidth by network state (a whole-population table, built on each call)."""
        return self._table(False)

    @property
    def up_mbps(self) -> np.ndarray:
        """float64 (n, 3): the same for the upload."""
        return self._table(True)

    def _table(self, up: bool) -> np.ndarray:
        n = self.population.n_clients
        every = np.arange(n, dtype=np.int64)
        return np.stack([np.zeros(n), self.mbps(every, np.full(n, 1), up), self.mbps(every, np.full(n, 2), up)], axis=1)

    # -- who is on which network ------------------------------------------------------------------
    @property
    def reports(self) -> bool:
        """Whether the run's metrics carry the network columns (not under the plain ``lognormal`` model, whose output stays as it was)."""
        return self.cfg.model == "traces" or self.cfg.unmetered_only

    def state_at(self, t_s: float | np.ndarray, clients: np.ndarray) -> np.ndarray:
        """float64: the network of ``clients`` at ``t_s`` (a time, or one per client): 0 none, 1 WiFi, 2 cellular;
        the client's fallback where the trace does not tell."""
        clients = np.asarray(clients, dtype=np.int64)
        fallback = self.fallback[clients]
        if not self.has_states:
            return fallback
        state = self.traces.extra_of("network_state", self.population.trace_client[clients], t_s)
        assert state is not None
        state = np.asarray(state, dtype=np.float64)
        return np.where(np.isnan(state), fallback, state)

    def _usable(self, state: np.ndarray) -> np.ndarray:
        """The network a transfer can use: none stays none; cellular is none under ``unmetered_only``."""
        return np.where(state == CELLULAR, NONE, state) if self.cfg.unmetered_only else state

    def reachable(self, t_s: float, clients: np.ndarray) -> np.ndarray:
        """bool: who can be sent a task at ``t_s``: everyone under the ``lognormal`` model (unless ``unmetered_only``);
        else those with a usable network."""
        clients = np.asarray(clients, dtype=np.int64)
        if not self.reports:
            return np.ones(len(clients), dtype=bool)
        return self._usable(self.state_at(t_s, clients)) != NONE

    # -- transfers ------------------------------------------------------------------------------
    def transfers(self, t0_s: float, clients: np.ndarray, compute_s: np.ndarray) -> Transfers:
        """The download at ``t0_s`` and the upload ``compute_s`` after it ends, for each of ``clients``."""
        clients = np.asarray(clients, dtype=np.int64)
        n = len(clients)
        if self.cfg.model == "lognormal":
            if self.capacity_kbps is None:
                comm = self.population.comm_s(self.model_size_mb, clients)
            else:
                comm = 2.0 * transfer_s(self.model_size_mb * 8.0, self.capacity_kbps[clients] / 1000.0)
            zeros, no = np.zeros(n), np.zeros(n, dtype=bool)
            state = self.state_at(t0_s, clients).astype(np.int8) if self.reports else np.full(n, -1, dtype=np.int8)
            return Transfers(comm, comm / 2.0, zeros, no, no, state)
        mbit = self.model_size_mb * 8.0
        start = np.full(n, float(t0_s))
        first = self._usable(self.state_at(start, clients)).astype(np.int8)
        down_end, down_j, down_radio, last_end, lost_down = self._move(start, clients, mbit, False, np.full(n, -1), start.copy())
        up_start = down_end + np.asarray(compute_s, dtype=np.float64)
        up_end, up_j, up_radio, _, lost_up = self._move(up_start, clients, mbit, True, down_radio, last_end)
        # an abandoned download ends the task there: no training, no upload; the last radio's whole tail follows the last data
        energy = np.where(lost_down, down_j + _tail_j(down_radio), down_j + up_j + _tail_j(up_radio))
        comm = np.where(lost_down, down_end - start, (down_end - start) + (up_end - up_start))
        return Transfers(comm, down_end - start, energy, lost_down | lost_up, lost_down, first)

    def _rate(self, clients: np.ndarray, state: np.ndarray, t_s: np.ndarray, up: bool) -> np.ndarray:
        """Mbit/s of each client on ``state`` (0 for none), WiFi capped by the trace's link rate where known: a link above
        0 (a link of 0 or less is no reading, as :func:`flamingo_sim.traces.network.wifi_only` writes it; capping at it
        would stall the transfer for ever, neither moving data nor counting as a wait)."""
        rate = self.mbps(clients, state.astype(np.int64), up)
        link = self.traces.extra_of("wifi_link_mbps", self.population.trace_client[clients], t_s)
        if link is not None and self.capacity_kbps is None:
            link = np.asarray(link, dtype=np.float64)
            with np.errstate(invalid="ignore"):
                known = link > 0  # NaN compares False
            rate = np.where((state == ON_WIFI) & known, np.minimum(rate, link), rate)
        return rate

    def _move(self, start_s: np.ndarray, clients: np.ndarray, mbit: float, up: bool, radio: np.ndarray,
              last_end_s: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Move ``mbit`` one way from ``start_s``, slot by slot of the trace grid (the network is constant within one).

        ``radio``/``last_end_s``: the radio that last carried data (-1: none) and when. Returns the end
        times, the energy (without the last radio's tail, which the caller settles), the radio and
        time of the last data, and who gave up.
        """
        n = len(clients)
        step = float(self.traces.step_s)
        now, left, energy = start_s.astype(np.float64).copy(), np.full(n, float(mbit)), np.zeros(n)
        radio, last_end = np.asarray(radio, dtype=np.int64).copy(), last_end_s.astype(np.float64).copy()
        waited, gave_up = np.zeros(n), np.zeros(n, dtype=bool)
        shift = self.traces.shift_s[self.population.trace_client[clients]].astype(np.float64)
        active = left > 0
        while active.any():
            i = np.flatnonzero(active)
            t = now[i]
            state = self._usable(self.state_at(t, clients[i]))
            slot_end = (np.floor((np.floor(t) + shift[i]) / step) + 1.0) * step - shift[i]
            on = state != NONE
            new = state.astype(np.int64)
            # a radio starts carrying data: the same radio within its tail goes on (the tail so far is paid), else the old
            # radio's whole tail and the new one's promotion (energy and time)
            for r, model in enumerate(_RADIOS):
                if model is None:
                    continue
                mine = on & (new == r)
                same = mine & (radio[i] == r) & (t - last_end[i] < model.tail_s)
                energy[i[same]] += model.tail_power_w * (t[same] - last_end[i[same]])
                switch = mine & ~same
                for old, old_model in enumerate(_RADIOS):
                    if old_model is not None:
                        energy[i[switch & (radio[i] == old)]] += old_model.tail_j
                energy[i[switch]] += model.promotion_j
                t = np.where(switch, t + model.promotion_s, t)
            radio[i] = np.where(on, new, radio[i])
            rate = np.where(on, self._rate(clients[i], np.where(on, state, ON_WIFI), t, up), 0.0)
            room = np.maximum(slot_end - t, 0.0)
            with np.errstate(divide="ignore", invalid="ignore"):
                need = np.where(on, transfer_s(left[i], rate), np.inf)
            finish = on & (need <= room)
            dt = np.where(finish, need, room)
            for r, model in enumerate(_RADIOS):
                if model is not None:
                    flow = on & (new == r)
                    energy[i[flow]] += model.active_w(rate[flow], up) * dt[flow]
            left[i] = np.where(finish, 0.0, left[i] - np.where(on, rate * dt, 0.0))
            now[i] = np.where(finish, t + dt, np.maximum(t + dt, slot_end))  # a slot not finished in is left at its end
            last_end[i] = np.where(on, t + dt, last_end[i])
            waited[i] += np.where(on, 0.0, dt)
            stuck = ~on & (waited[i] >= MAX_WAIT_S)
            gave_up[i[stuck]] = True
            active[i] = ~finish & ~stuck
        return now, energy, radio, last_end, gave_up
