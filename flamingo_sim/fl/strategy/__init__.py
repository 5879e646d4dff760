"""Who trains and how their updates combine.

- :mod:`~flamingo_sim.fl.strategy.selection`    the :class:`Selector` contract and the uniform, battery and Oort selectors;
- :mod:`~flamingo_sim.fl.strategy.aggregators`  the :class:`Aggregator` contract and FedAvg, FedProx, FedAdam, FedYogi;
- :mod:`~flamingo_sim.fl.strategy.aggregate`    the pure aggregation maths they share;
- :mod:`~flamingo_sim.fl.strategy.parameters`   the built-in aggregators' names and parameters (no torch: the config checks them).
"""
