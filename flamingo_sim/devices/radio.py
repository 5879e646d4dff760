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

**Bounded by the paper's era's phones.** Huang et al. fitted the linear model on a 2011 phone up
to a few Mbit/s; extrapolated to the 20-80 Mbit/s of the traces' era it gives 5-36 W. A radio
moving data draws at most what its vendor's power profile says its controller draws while
transmitting (up) or receiving (down): Android's ``power_profile.xml`` (currents in mA at the
controller's voltage; AOSP's "Power values" documentation), from the device trees of three of the
paper's phones, and the highest of them is the bound (:data:`POWER_PROFILE_CAPS`). A state that
moves no data (promotion, tail) draws at most the receive bound. The Galaxy S10e's and Tab S6's
profiles are not public.

=====  ==========================================  ==========================================
radio  up (transmit) bound                          down (receive) bound
=====  ==========================================  ==========================================
WiFi   1.295 W: Pixel 3 ``wifi.controller.tx``      0.584 W: OnePlus 8 ``wifi.controller.rx``
       350 mA x 3.7 V (OnePlus 8 0.888 W,           177 mA x 3.3 V (Pixel 3 0.463 W,
       Mi 10 0.703 W)                               Mi 10 0.562 W)
LTE    2.490 W: OnePlus 8 ``modem.controller.tx``   0.773 W: OnePlus 8 ``modem.controller.rx``
       top level 646.8 mA x 3.85 V (Pixel 3         200.8 mA x 3.85 V (Pixel 3 0.407 W)
       1.325 W)
=====  ==========================================  ==========================================

Sources (file, line): Pixel 3, AOSP ``device/google/crosshatch``
``blueline/overlay/frameworks/base/core/res/res/xml/power_profile.xml`` lines 170-178 (modem rx
110 mA, tx 116-358 mA by signal strength, 3700 mV) and 190-194 (WiFi rx 125 mA, tx 350 mA, 3700
mV); OnePlus 8, LineageOS ``android_device_oneplus_instantnoodle``
``overlay/OPlusFrameworksResTarget/res/xml/power_profile.xml`` (from OxygenOS IN2015_11.C.33)
lines 52-60 (modem rx 200.8 mA, tx 176.4-646.8 mA; its ``modem.controller.voltage`` reads 800 mV,
no supply voltage, so the cell's nominal 3.85 V is used) and 236-245 (WiFi rx 177 mA, tx 269 mA,
3300 mV); Mi 10, ``android_device_xiaomi_umi`` ``overlay/FrameworksResUmi/res/xml/power_profile.xml``
(from MIUI V14.0.2.0) lines 156-159 (WiFi rx 152 mA, tx 190 mA, 3700 mV; its modem entries are 0).

:func:`transfer_energy_j` is the closed form for one transfer on its own: promotion, the flow,
the tail. The simulator (:mod:`flamingo_sim.fl.sim.network`) strings transfers together: a
download and an upload less than a tail apart share it (the upload needs no promotion, and the
download's tail lasts only until the upload starts).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["RadioPower", "LTE", "WIFI", "POWER_PROFILE_CAPS", "transfer_energy_j"]


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
    max_up_w: float = float("inf")  # the transmit bound (module docstring)
    max_down_w: float = float("inf")  # the receive bound, and that of the states that move no data

    def active_w(self, rate_mbps, up: bool):
        """Power while moving data one way at ``rate_mbps`` (a number or an array): Huang et al.'s Table 4,
        never above the direction's bound."""
        linear = (self.alpha_up_w_per_mbps if up else self.alpha_down_w_per_mbps) * np.asarray(rate_mbps, dtype=float) + self.beta_w
        out = np.minimum(linear, self.max_up_w if up else self.max_down_w)
        return float(out) if out.ndim == 0 else out

    @property
    def promotion_j(self) -> float:
        return min(self.promotion_w, self.max_down_w) * self.promotion_s

    @property
    def tail_power_w(self) -> float:
        """The tail's power, never above the receive bound."""
        return min(self.tail_w, self.max_down_w)

    @property
    def tail_j(self) -> float:
        return self.tail_power_w * self.tail_s


#: (up, down) bounds of active power per radio from the phones' power profiles (module docstring), W.
POWER_PROFILE_CAPS = {"wifi": (0.350 * 3.7, 0.177 * 3.3), "lte": (0.6468 * 3.85, 0.2008 * 3.85)}
#: Huang et al. 2012, Tables 3 and 4 (mW -> W, ms -> s), bounded by :data:`POWER_PROFILE_CAPS`.
LTE = RadioPower("lte", 438.39e-3, 51.97e-3, 1288.04e-3, 1210.7e-3, 260.1e-3, 1060.0e-3, 11576.0e-3, *POWER_PROFILE_CAPS["lte"])
WIFI = RadioPower("wifi", 283.17e-3, 137.01e-3, 132.86e-3, 124.4e-3, 79.1e-3, 119.3e-3, 238.1e-3, *POWER_PROFILE_CAPS["wifi"])


def transfer_energy_j(radio: RadioPower, mbit: float, rate_mbps: float, up: bool) -> float:
    """Energy of one isolated transfer of ``mbit`` at ``rate_mbps``: promotion, ``mbit / rate_mbps``
    seconds at :meth:`RadioPower.active_w`, then the whole tail."""
    if mbit < 0 or rate_mbps <= 0:
        raise ValueError(f"transfer_energy_j: expected mbit >= 0 and rate_mbps > 0, got {mbit} and {rate_mbps}")
    return radio.promotion_j + radio.active_w(rate_mbps, up) * (mbit / rate_mbps) + radio.tail_j
