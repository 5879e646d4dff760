"""Running an experiment: one straight path from the command line to each unit's simulation.

A run's path, top to bottom; each module calls only the ones below it, and nothing calls back up
(``lint-imports`` holds the order):

1. ``flamingo-sim run`` (:mod:`flamingo_sim.fl.cli`) calls :mod:`~flamingo_sim.fl.runner.run`'s
   :func:`~flamingo_sim.fl.runner.run.run_experiment`, with the :class:`~flamingo_sim.fl.runner.options.RunOptions`
   of :mod:`~flamingo_sim.fl.runner.options` (under ``torchrun``, :mod:`~flamingo_sim.fl.runner.ranks`
   takes the same path on every process: rank 0 writes, the others serve);
2. :mod:`~flamingo_sim.fl.runner.plan`: the plan, every check before anything is written (config,
   engine, device and machine, plug-ins, run directory, the first seed's parts built and checked
   against the config: :mod:`flamingo_sim.fl.compose.checks`), its units, and the run's length
   estimated (:mod:`~flamingo_sim.fl.runner.estimate`: a long run needs a confirmation);
3. :mod:`~flamingo_sim.fl.runner.rundir`: the run directory held (lock, ``config.yaml``, the
   inputs' checksums of :mod:`~flamingo_sim.fl.runner.inputs`);
4. :mod:`~flamingo_sim.fl.runner.execute`: the units handed to an executor, each with its share
   of the cores;
5. :mod:`~flamingo_sim.fl.runner.executors`: the executor (this process, a pool of
   :mod:`~flamingo_sim.fl.runner.worker` processes forked from the preloaded parent of
   :mod:`~flamingo_sim.fl.runner.forkserver`, Ray, a plug-in) runs each unit with
6. :mod:`~flamingo_sim.fl.runner.units`' :func:`~flamingo_sim.fl.runner.units.run_unit`: the
   unit's simulation assembled (:mod:`flamingo_sim.fl.compose`), resumed from its checkpoint
   (:mod:`~flamingo_sim.fl.runner.checkpoint`), and its rounds run by
7. the engine of ``flamingo_sim.fl.runner.engines`` (native, FedScale, Flower, a plug-in) on the
   :class:`~flamingo_sim.fl.sim.simulation.Simulation`, calling the run loop's callbacks
   (:mod:`~flamingo_sim.fl.runner.callbacks`, :mod:`~flamingo_sim.fl.runner.tracking`) after each round;
8. the unit's files (:mod:`~flamingo_sim.fl.runner.unit_files`), then, back in
   :func:`~flamingo_sim.fl.runner.run.run_experiment` once every unit has returned,
   :mod:`~flamingo_sim.fl.runner.results`: ``metrics.parquet`` and ``summary.json``.

:mod:`~flamingo_sim.fl.runner.kernels` sets the CPU kernels and threads of each process that
trains. A study (:mod:`flamingo_sim.studies.study`) enters the same path at step 2, with many runs.
"""
