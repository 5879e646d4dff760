"""Federated learning: data, models, batched local training, the round loop, selection, aggregation, metrics."""
