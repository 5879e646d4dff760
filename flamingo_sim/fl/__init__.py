"""Federated learning: the round loop over simulated phones, real local training, selection, aggregation.

Sub-packages, lowest first (an import only points down this list; ``pyproject.toml``'s
import-linter contract keeps it so):

- :mod:`~flamingo_sim.fl.strategy`  who trains (selectors) and how updates combine (aggregators, pure maths);
- :mod:`~flamingo_sim.fl.data`      client-partitioned datasets: the contract, the proxy, FedScale layouts, packs;
- :mod:`~flamingo_sim.fl.training`  local training of a cohort (vmap, threads, streams, sequential), device, memory;
- :mod:`flamingo_sim.fl.extends`    ``extends:``: an experiment built on a shipped one or a file, keys merged;
- :mod:`flamingo_sim.fl.plugins`    an experiment's plug-ins (policies, selector, aggregator) checked and built in one place, their display names;
- :mod:`flamingo_sim.fl.config`     the typed experiment config and its loader; :mod:`flamingo_sim.fl.config_reference` the reference page generated from it;
- :mod:`flamingo_sim.fl.readings`   the readings the paper leaves open, one named setting each (``--readings paper``);
- :mod:`~flamingo_sim.fl.sim`       the synchronous round loop, FedBuff, the rules of a round, records, population;
- :mod:`~flamingo_sim.fl.metrics`   ``metrics.parquet`` columns, the run summary, comparisons with intervals;
- :mod:`~flamingo_sim.fl.distributed` one round's training split over torchrun's processes (world, seam, launch);
- :mod:`~flamingo_sim.fl.compose`   a simulation assembled from an experiment: a seed's parts (and their checks against the config), then one policy and seed;
- :mod:`~flamingo_sim.fl.runner`    run an experiment down one path: plan, units handed to an executor, one unit on its engine, its files, results;
- :mod:`flamingo_sim.fl.cli`        ``flamingo-sim run`` and ``pack-data``; :mod:`flamingo_sim.fl.contract_reference` the plug-in guide's contract tables.
"""
