"""flamingo-sim: a trace-driven federated-learning simulator for real phones.

Data flows one way: GreenHub dump -> client traces -> (with device profiles) device states ->
FL rounds -> metrics -> report. Each stage is a subpackage:

- :mod:`flamingo_sim.traces`  GreenHub readers, cleaning, selection, PCHIP resampling, shifts.
- :mod:`flamingo_sim.devices` SoCs, execution choices, profiles, battery/energy, policies.
- :mod:`flamingo_sim.fl`      data, models, batched local training, the round loop, metrics.
"""

__version__ = "0.1.0"
