"""Who trains and how their updates combine.

- :mod:`~flamingo_sim.fl.strategy.base`         the contracts: :class:`~flamingo_sim.fl.strategy.base.Selector` and
  :class:`~flamingo_sim.fl.strategy.base.Aggregator` with their optional parts' defaults, and the coordinator's view;
- :mod:`~flamingo_sim.fl.strategy.selection`    the uniform, battery and Oort selectors, and :func:`make_selector`;
- :mod:`~flamingo_sim.fl.strategy.aggregators`  FedAvg, FedProx, FedAdam, FedYogi, and :func:`make_aggregator`;
- :mod:`~flamingo_sim.fl.strategy.aggregate`    the pure aggregation maths they share;
- :mod:`~flamingo_sim.fl.strategy.parameters`   the shipped aggregators' ``Params`` (no torch: the config checks them).
"""
