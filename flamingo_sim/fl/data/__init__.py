"""Client-partitioned datasets.

- :mod:`~flamingo_sim.fl.data.base`       the contract, :class:`FederatedDataset`, and the shared LRU cache;
- :mod:`~flamingo_sim.fl.data.proxy`      the embedded synthetic proxy task;
- :mod:`~flamingo_sim.fl.data.openimage`  FedScale's mapping layout and OpenImage images;
- :mod:`~flamingo_sim.fl.data.speech`     FedScale's Google Speech (WAV) layout;
- :mod:`~flamingo_sim.fl.data.byo`        bring-your-own data (arrays, LEAF JSON);
- :mod:`~flamingo_sim.fl.data.pipeline`   parallel decoding, the decoded cache and packed datasets.
"""
