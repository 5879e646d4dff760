"""flamingo-sim: a trace-driven federated-learning simulator for real phones.

Data flows one way: GreenHub dump -> client traces -> (with device profiles) device states ->
FL rounds -> metrics -> report. Each stage is a subpackage, and imports only point down this
list (``pyproject.toml``'s import-linter contracts keep it so; ``lint-imports`` checks them):

- :mod:`flamingo_sim.cli`          the ``flamingo-sim`` command: parses arguments, prints errors as one line;
- :mod:`flamingo_sim.studies`      analyses that run whole experiments: ``reproduce``, ``sensitivity``;
- :mod:`flamingo_sim.report`       figures and summaries of run directories;
- :mod:`flamingo_sim.integrations` other FL systems (FedScale, Flower), imported only when used;
- :mod:`flamingo_sim.fl`           federated learning: data, local training, the round loop, metrics, the runner;
- :mod:`flamingo_sim.traces`       GreenHub readers, cleaning, selection, PCHIP resampling, shifts;
- :mod:`flamingo_sim.devices`      SoCs, execution choices, profiles, battery/energy, policies;
- :mod:`flamingo_sim.models`       the networks (the paper's and the proxy's), shared by devices and fl;
- :mod:`flamingo_sim.plugins`      the plug-in registries and their contracts;
- :mod:`flamingo_sim.provenance`   what wrote a results file: commit, command, machine, the code it comes from;
- :mod:`flamingo_sim.config`, :mod:`flamingo_sim.io`, :mod:`flamingo_sim.faults`, :mod:`flamingo_sim.resources`,
  :mod:`flamingo_sim.argtypes`  typed config loading, atomic writes, fault handling, shipped files, the commands' flag types;
- :mod:`flamingo_sim.rng`, :mod:`flamingo_sim.errors`, :mod:`flamingo_sim.numeric`  randomness from (seed, purpose,
  round); user-facing errors; libm's exp and pow element-wise (the same on every CPU).
"""

__version__ = "0.1.0"
