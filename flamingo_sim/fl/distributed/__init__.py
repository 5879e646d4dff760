"""One run over many processes, GPUs and hosts with torch.distributed, launched by ``torchrun``.

- :mod:`~flamingo_sim.fl.distributed.world`   the process group from torchrun's environment, and the
  counted, timed-out collectives every rank uses;
- :mod:`~flamingo_sim.fl.distributed.seam`  a round's training and evaluation split over the ranks
  (rank 0 coordinates, the others serve its jobs), bit-identical to one process on the CPU;
- :mod:`~flamingo_sim.fl.distributed.launch`  ``flamingo-sim run --nproc N``: torchrun's own launcher
  (``torch.distributed.run``) on this machine, and one line when a rank fails.

:func:`flamingo_sim.fl.runner.run.run_experiment` joins the group when torchrun started it.
"""
