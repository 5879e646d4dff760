"""Analyses that run whole experiments: ``reproduce`` (the paper's evaluation) and ``sensitivity``.

- :mod:`~flamingo_sim.studies.study`        a study: several runs into one output directory, run as units;
- :mod:`~flamingo_sim.studies.reproduce`    ``flamingo-sim reproduce``: the paper's three tasks, its tables and figures;
- :mod:`~flamingo_sim.studies.sensitivity`  ``flamingo-sim sensitivity``: how much each modelling knob moves the headline ratios;
- :mod:`~flamingo_sim.studies.unknowns`     what the device model does not know, each a stated range (``sensitivity --unknowns``);
- :mod:`~flamingo_sim.studies.names`        the run directory of a sensitivity point, shared with the docs' ``points`` blocks;
- :mod:`~flamingo_sim.studies.cli`          the two commands' arguments."""
