"""Integrations with other FL systems. Each lives in its own module or package and imports its system lazily.

- :mod:`flamingo_sim.integrations.fedscale`: run an experiment on FedScale's aggregator and
  executors (in-process or over gRPC); needs ``pip install 'flamingo-sim[fedscale]'``.
- :mod:`flamingo_sim.integrations.flower`: flamingo-sim's phones inside Flower: ``FlamingoStrategy``
  around a Flower Message API strategy, and ``--engine flower`` (Flower's Ray simulation
  engine); needs ``pip install 'flamingo-sim[flower]'``.
- :mod:`flamingo_sim.integrations.fedscale_traces`: FedScale's ``device_conf_file`` and
  ``device_avail_file`` from our traces and profiles, and back (no FedScale needed).
"""
