"""The radio's power while it moves a model: Huang et al.'s model for LTE and WiFi, promotion and tail included.

Source: J. Huang, F. Qian, A. Gerber, Z. M. Mao, S. Sen, O. Spatscheck, "A Close Examination of
Performance and Power Characteristics of 4G LTE Networks", MobiSys 2012. While data flows the
phone draws (their Table 4, "data transfer power model")::

    P = alpha_u * t_u + alpha_d * t_d + beta        (mW; t_u, t_d the uplink and downlink throughput in Mbit/s)

Before the first byte the radio is promoted to its high-power state (Table 3: promotion power
and duration); after the last byte it stays there for a *tail* (Table 3: tail base power and
duration) before it drops back. The parameters (Table 3 and Table 4):

=====  =========  =========  =======  ============  ============  ===========  ===========
radio  alpha_u    alpha_d    beta     promotion     promotion     tail power   tail time
       mW/Mbps    mW/Mbps    mW       power mW      time ms       mW           ms
=====  =========  =========  =======  ============  ============  ===========  ===========
LTE    438.39     51.97      1288.04  1210.7        260.1         1060.0       11576.0
WiFi   283.17     137.01     132.86   124.4         79.1          119.3        238.1
=====  =========  =========  =======  ============  ============  ===========  ===========

The LTE values are those AT&T's Application Resource Optimizer ships as its default LTE
profile (attdevsupport/ARO, ``ARODataAnalyzer/src/lte.conf``: ``LTE_ALPHA_UP=438.39``,
``LTE_ALPHA_DOWN=51.97``, ``T_PROMOTION=0.26``, ``P_PROMOTION=1.21``, ``P_TAIL=1.06``), and its
WiFi profile's tail is 0.25 s (``WiFi.conf``). The tail's DRX wake-ups (1.0 ms at 1680 mW every
40 ms, Table 3) are left out: they add 1.5 % to the tail's power. Every cellular transfer is
priced with LTE's model (the cellular technology of a 2017-2020 phone; the trace's
``mobile_generation`` tells how many slots were 2G/3G, which the run reports).

:func:`transfer_energy_j` is the closed form for one transfer on its own: promotion, the flow,
the tail. The simulator (:mod:`flamingo_sim.fl.sim.network`) strings transfers together: a
download and an upload less than a tail apart share it (the upload needs no promotion, and the
download's tail lasts only until the upload starts).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RadioPower", "LTE", "WIFI", "transfer_energy_j"]


@dataclass(frozen=True)
class RadioPower:
    """One radio's power model (SI units: W, W per Mbit/s, s)."""

    name: str
    alpha_up_w_per_mbps: float
    alpha_down_w_per_mbps: float
    beta_w: float
    promotion_w: float
    promotion_s: float
    tail_w: float
    tail_s: float

    def active_w(self, rate_mbps: float, up: bool) -> float:
        """Power while moving data one way at ``rate_mbps`` (Huang et al., Table 4)."""
        return (self.alpha_up_w_per_mbps if up else self.alpha_down_w_per_mbps) * rate_mbps + self.beta_w

    @property
    def promotion_j(self) -> float:
        return self.promotion_w * self.promotion_s

    @property
    def tail_j(self) -> float:
        return self.tail_w * self.tail_s


#: Huang et al. 2012, Tables 3 and 4 (mW -> W, ms -> s).
LTE = RadioPower("lte", 438.39e-3, 51.97e-3, 1288.04e-3, 1210.7e-3, 260.1e-3, 1060.0e-3, 11576.0e-3)
WIFI = RadioPower("wifi", 283.17e-3, 137.01e-3, 132.86e-3, 124.4e-3, 79.1e-3, 119.3e-3, 238.1e-3)


def transfer_energy_j(radio: RadioPower, mbit: float, rate_mbps: float, up: bool) -> float:
    """Energy of one isolated transfer of ``mbit`` at ``rate_mbps``: promotion, ``mbit / rate_mbps``
    seconds at :meth:`RadioPower.active_w`, then the whole tail."""
    if mbit < 0 or rate_mbps <= 0:
        raise ValueError(f"transfer_energy_j: expected mbit >= 0 and rate_mbps > 0, got {mbit} and {rate_mbps}")
    return radio.promotion_j + radio.active_w(rate_mbps, up) * (mbit / rate_mbps) + radio.tail_j
