"""The simulated federation: rounds over phones with batteries, energy budgets and owners.

- :mod:`~flamingo_sim.fl.sim.simulation`  :class:`Simulation`, the synchronous round loop (plan, train, finish);
- :mod:`~flamingo_sim.fl.sim.seam`        the training seam: who trains a round's cohort and evaluates (:class:`LocalSeam` here);
- :mod:`~flamingo_sim.fl.sim.rounds`      the rules of one round (declines, drop-outs, K fastest, deadline);
- :mod:`~flamingo_sim.fl.sim.rules`       :class:`RoundRules`, what the loop reads of an experiment, and all it reads;
- :mod:`~flamingo_sim.fl.sim.fedbuff`     the asynchronous loop (FedBuff);
- :mod:`~flamingo_sim.fl.sim.records`     :class:`RoundRecord`, what one round produced;
- :mod:`~flamingo_sim.fl.sim.population`  which trace, phone and bandwidth each client has;
- :mod:`~flamingo_sim.fl.sim.network`     the network each model transfer runs on, its time and the radio's energy;
- :mod:`~flamingo_sim.fl.sim.capacity`    FedScale's device-capacity file, read without executing it;
- :mod:`~flamingo_sim.fl.sim.fairness`    Jain's index over clients;
- :mod:`~flamingo_sim.fl.sim.limits`      the experiment's heat and memory keys read into the pricing stage (:mod:`flamingo_sim.devices.pricing`).
"""
