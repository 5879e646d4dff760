"""Running an experiment end to end: a run directory of (policy, seed) units, each run wherever it runs.

In the order a run uses them:

- :mod:`~flamingo_sim.fl.runner.run`         :func:`run_experiment`: policies x seeds into one run directory, :func:`run_units`;
- :mod:`~flamingo_sim.fl.runner.options`     :class:`RunOptions` and :class:`Execution`: where and how a run or a study runs (frozen);
- :mod:`~flamingo_sim.fl.runner.prepare`     :func:`prepare_run`: every check before anything is written, :class:`PreparedRun`;
- :mod:`~flamingo_sim.fl.runner.compose`     the one place a run is assembled: config -> traces, phones, data, model, policy, :class:`Simulation`;
- :mod:`~flamingo_sim.fl.runner.checks`      the config against where its values are used: the data, the population, the traces, the machine;
- :mod:`~flamingo_sim.fl.runner.estimate`    the run's length estimated before it starts, and the confirmation a long one needs;
- :mod:`~flamingo_sim.fl.runner.datasets`    the dataset of a ``data`` section (proxy, arrays, FedScale layouts, packs), ``pack-data``;
- :mod:`~flamingo_sim.fl.runner.kernels`     the CPU kernels and threads of a process that trains;
- :mod:`~flamingo_sim.fl.runner.units`       :func:`run_unit`: one (policy, seed), the same function in any process, and its result file;
- :mod:`~flamingo_sim.fl.runner.execute`     units handed to an executor, and each unit's share of the cores;
- :mod:`~flamingo_sim.fl.runner.executors`   the executors' contract and registry: here, a pool of worker processes, Ray, plug-ins;
- :mod:`~flamingo_sim.fl.runner.worker`      a ``--jobs`` pool's long-lived worker (and a Ray task's body);
- :mod:`~flamingo_sim.fl.runner.forkserver`  the workers' preloaded parent, started as early as a command can;
- :mod:`~flamingo_sim.fl.runner.ranks`       a run over torchrun's processes: rank 0 writes, the others serve;
- :mod:`~flamingo_sim.fl.runner.engines`     the :class:`Engine` contract (what runs one simulation's rounds) and its registry;
- :mod:`~flamingo_sim.fl.runner.callbacks`   the :class:`Callback` contract of the run loop and the progress bar;
- :mod:`~flamingo_sim.fl.runner.checkpoint`  verified checkpoints, the checkpoint callback and resuming, the inputs a resume checks;
- :mod:`~flamingo_sim.fl.runner.tracking`    TensorBoard and MLflow callbacks;
- :mod:`~flamingo_sim.fl.runner.results`     the units gathered into ``metrics.parquet`` and ``summary.json``, and read back;
- :mod:`~flamingo_sim.fl.runner.rundir`      the run directory, its lock and its config record.
"""
