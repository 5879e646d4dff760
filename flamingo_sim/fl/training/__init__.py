"""Local training of a round's cohort.

- :mod:`~flamingo_sim.fl.training.autotune` ``auto`` on a GPU: the candidates measured, checked against a bound, the fastest taken;
- :mod:`~flamingo_sim.fl.training.trainer`  the contract, :class:`CohortTrainer`, and the strategy choice;
- :mod:`~flamingo_sim.fl.training.batched`  clients side by side with ``torch.func.vmap``;
- :mod:`~flamingo_sim.fl.training.threads`  clients on CPU worker threads;
- :mod:`~flamingo_sim.fl.training.device`   device, threads and precision;
- :mod:`~flamingo_sim.fl.training.memory`   how many clients fit in one vmap chunk.
"""
