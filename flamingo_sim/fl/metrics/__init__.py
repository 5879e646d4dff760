"""What a run measured, and how two policies compare.

- :mod:`~flamingo_sim.fl.metrics.summary`  ``metrics.parquet``'s columns and the run summary (time to target, ratios);
- :mod:`~flamingo_sim.fl.metrics.target`   time to target: which curve, which target, where each is read;
- :mod:`~flamingo_sim.fl.metrics.compare`  ratios of means with bootstrap intervals on three comparison bases.
"""
