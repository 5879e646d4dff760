"""Devices: SoCs and execution choices, profiles, battery and energy accounting, runtime policies.

Public API (see each module's docstring for the models):

- :mod:`.soc`: :class:`Phone`, :class:`CoreLayout`, :class:`Choice`, :func:`state_space`,
  :func:`load_phones`.
- :mod:`.profiles`: :class:`Profile`, :class:`ChoiceProfile`, :func:`prune`,
  :func:`load_profile`, :func:`save_profile`, :class:`ProfileSet`.
- :mod:`.calibrate`: the physical model behind the shipped ``calibrated`` profiles.
- :mod:`.battery`: :func:`discharge_intervals`, :class:`EnergyBudget`, ``PopulationBudget``
  (one budget per trace/phone pair plus the clients training made deviate).
- :mod:`.online`: ``OnlineIndex``, ``OnlineClients``: count and draw the online clients without
  a whole-population pass.
- :mod:`.sparse`: ``SparseVector``, per-client numbers held only for the clients that have one.
- :mod:`.execution`: :class:`InterferenceModel`, :func:`run_ladder` (control loop, vectorised).
- :mod:`.scheduling`: training beside the owner's foreground app (Android's scheduling, or the
  fixed-slowdown model): where each thread runs and what a step then costs.
- :mod:`.power`: the physical power model of the cores (heat), and the checks every profile set passes.
- :mod:`.cores`: :func:`discover_cores` (this machine's cores grouped into core types).
- :mod:`.energy`: :class:`EnergySource` readers (RAPL, battery sysfs, Termux, battery level),
  :func:`detect_energy_source`, :class:`PowerMeter`.
- :mod:`.profiler`: ``flamingo-sim profile`` (imports torch; import it explicitly):
  :class:`ProfileRequest`, :func:`measure`, :func:`run_profile`.
- :mod:`.policies`: a package: ``base`` (the :class:`Policy` contract, :class:`TaskRequest`,
  :class:`TaskOutcome`, :class:`PolicyConfig`, the public pricing helpers of ``PricedPolicy``),
  ``baseline``, ``flamingo`` and ``least_energy`` (the shipped policies), :func:`make_policy`.
- :mod:`.phone_models`, :mod:`.catalogue`: the phone models an experiment can use.
- :mod:`.thermal`: a phone's heat (a first-order thermal circuit) and each cluster's throttling
  (``devices.thermal``); :mod:`.thermal_table`: sustained training under it (``flamingo-sim thermal``).
- :mod:`.memory`: a phone's RAM and app memory limit, the largest minibatch that fits (``devices.memory``).
- :mod:`.pricing`: the one place a cohort's tasks are priced (memory, the policy, heat, radio) into one record
  (``PricedCohort``), each task's power as it runs (``PowerTimeline``) read by the battery and the heat alike.
- :mod:`.radio`: the radio's power while it moves a model (Huang et al., MobiSys 2012: LTE and WiFi,
  promotion and tail), priced by :mod:`flamingo_sim.fl.sim.network`.
- :mod:`.cli`: ``flamingo-sim profile`` and the profile commands.
"""

from flamingo_sim.devices.battery import EnergyBudget, discharge_intervals
from flamingo_sim.devices.execution import InterferenceModel, run_ladder
from flamingo_sim.devices.policies import (
    BaselinePolicy,
    FlamingoPolicy,
    Policy,
    PolicyConfig,
    TaskOutcome,
    TaskRequest,
    make_policy,
)
from flamingo_sim.devices.profiles import BASELINE_LABEL, MODELS, ChoiceProfile, Profile, ProfileSet, load_profile, prune, save_profile
from flamingo_sim.devices.soc import Choice, CoreLayout, Phone, baseline_cores, load_phones, state_space

__all__ = [
    "EnergyBudget", "discharge_intervals",
    "InterferenceModel", "run_ladder",
    "BaselinePolicy", "FlamingoPolicy", "Policy", "PolicyConfig", "TaskOutcome", "TaskRequest", "make_policy",
    "BASELINE_LABEL", "MODELS", "ChoiceProfile", "Profile", "ProfileSet", "load_profile", "prune", "save_profile",
    "Choice", "CoreLayout", "Phone", "baseline_cores", "load_phones", "state_space",
]
