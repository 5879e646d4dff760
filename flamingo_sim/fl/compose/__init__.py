"""A run's simulations assembled from its experiment: a seed's parts, then one (policy, seed) on them.

In the order a unit uses them:

- :mod:`~flamingo_sim.fl.compose.assemble`  :func:`resolve_config` (the run's config), :func:`config_record` (what the run
  directory keeps of it, and what its units build from) and :func:`compose` (a
  :class:`~flamingo_sim.fl.sim.simulation.Simulation` of one policy and seed: policy, selector and aggregator on the seed's parts);
- :mod:`~flamingo_sim.fl.compose.parts`     :func:`build_components`: traces, profiles, data, model, population and network of a seed;
- :mod:`~flamingo_sim.fl.compose.checks`    the config against what its values meet: the data, the population, the traces (``check_fit``,
  where the parts are built) and the machine (``check_machine``, by the run's plan);
- :mod:`~flamingo_sim.fl.compose.datasets`  the dataset of a ``data`` section (proxy, arrays, FedScale layouts, packs), ``pack-data``.

Running them (units, executors, run directories) is :mod:`flamingo_sim.fl.runner`'s job; this
package only builds, from a validated config, and writes nothing.
"""

from flamingo_sim.fl.compose.assemble import Prebuilt, compose, config_from_record, config_record, plugin_record, resolve_config
from flamingo_sim.fl.compose.parts import (
    build_components,
    experiment_network,
    experiment_population,
    phone_assignment,
    profile_dirs,
    update_size_mb,
)

__all__ = ["compose", "resolve_config", "config_record", "config_from_record", "plugin_record", "Prebuilt", "build_components",
           "experiment_network", "experiment_population", "phone_assignment", "profile_dirs", "update_size_mb"]
