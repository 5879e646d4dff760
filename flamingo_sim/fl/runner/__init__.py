"""Running an experiment end to end.

- :mod:`~flamingo_sim.fl.runner.run`         :func:`run_experiment`: policies x seeds into one run directory;
- :mod:`~flamingo_sim.fl.runner.setup`       config -> traces, phones, data, model and :class:`Simulation`;
- :mod:`~flamingo_sim.fl.runner.engines`     the :class:`Engine` contract and the registry (native, fedscale by import path);
- :mod:`~flamingo_sim.fl.runner.callbacks`   the :class:`Callback` contract: metrics, progress, checkpoints;
- :mod:`~flamingo_sim.fl.runner.tracking`    TensorBoard and MLflow callbacks;
- :mod:`~flamingo_sim.fl.runner.checkpoint`  verified checkpoints;
- :mod:`~flamingo_sim.fl.runner.rundir`      the run directory, its lock and its config record.
"""
