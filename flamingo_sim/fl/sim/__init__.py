"""The simulated federation: rounds over phones with batteries, energy budgets and owners.

- :mod:`~flamingo_sim.fl.sim.engine`      :class:`Simulation`, the synchronous round loop (plan, train, finish);
- :mod:`~flamingo_sim.fl.sim.rounds`      the rules of one round (declines, drop-outs, K fastest, deadline);
- :mod:`~flamingo_sim.fl.sim.fedbuff`     the asynchronous loop (FedBuff);
- :mod:`~flamingo_sim.fl.sim.records`     :class:`RoundRecord`, what one round produced;
- :mod:`~flamingo_sim.fl.sim.population`  which trace, phone and bandwidth each client has;
- :mod:`~flamingo_sim.fl.sim.fairness`    Jain's index over clients.
"""
