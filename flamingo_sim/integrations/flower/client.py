"""The ClientApp side: the partition query a user's app answers, and the experiment's own ClientApp.

- :func:`register_partition_query` adds to a user's ``ClientApp`` (optionally) a reply to
  ``query.flamingo`` with the node's ``partition-id``. Flower's server sees only random node
  ids; with the reply, :class:`~flamingo_sim.integrations.flower.strategy.FlamingoStrategy`
  maps each node to the flamingo-sim client (phone, battery trace, bandwidth) of its partition,
  the same in every run; without it, to one in node-id order. The app's training stays as it is.
- :data:`experiment_client_app` is the ClientApp of ``flamingo-sim run --engine flower``: it
  trains the experiment's model on the experiment's data, one client per message, exactly as the
  native engine trains that client (the ``threads`` strategy's per-client rule: its own
  minibatches ``(seed, round, client)``, its own dropout generator, one torch thread), so that
  the two engines give the same models. It builds the experiment's parts once per process
  (Ray actor) and keeps them.
"""

from __future__ import annotations

import json
from typing import Any

from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

#: The message type of the partition query (``query`` category, ``flamingo`` action).
QUERY_TYPE = "query.flamingo"
#: The record FlamingoStrategy adds to every training message: ``client-id``, ``round``, ``seed``.
FLAMINGO_RECORD = "flamingo"
#: Keys of the ``config`` record the engine's strategy sends (what the ClientApp loads).
EXPERIMENT_KEY, OVERRIDES_KEY, PROX_MU_KEY = "flamingo.experiment", "flamingo.overrides", "flamingo.prox-mu"

__all__ = ["QUERY_TYPE", "FLAMINGO_RECORD", "register_partition_query", "answer_partition", "experiment_client_app"]


def answer_partition(message: Message, context: Context) -> Message:
    """Reply to ``query.flamingo`` with this node's ``partition-id`` (from its node config)."""
    if "partition-id" not in context.node_config:
        raise ValueError("this node has no partition-id in its node config (simulation sets it; a SuperNode needs --node-config 'partition-id=N')")
    return Message(RecordDict({FLAMINGO_RECORD: ConfigRecord({"partition-id": int(context.node_config["partition-id"])})}), reply_to=message)


def register_partition_query(app: ClientApp) -> ClientApp:
    """Make ``app`` answer FlamingoStrategy's partition query; returns ``app``. One line in a user's client module."""
    app.query("flamingo")(answer_partition)
    return app


# -- the experiment's own ClientApp (``--engine flower``) ---------------------------------------------
_PARTS: dict[tuple[str, str, int], tuple[Any, Any]] = {}  # (experiment, overrides, seed) -> (components, trainer), per process


def _parts(experiment: str, overrides_json: str, seed: int) -> tuple[Any, Any]:
    """The experiment's parts (built as the runner builds them) and a per-client trainer, once per process."""
    key = (experiment, overrides_json, seed)
    if key not in _PARTS:
        from flamingo_sim.fl.compose import build_components
        from flamingo_sim.fl.config import load_experiment
        from flamingo_sim.fl.runner.kernels import pin_run_kernels
        from flamingo_sim.fl.training.threads import threads_safe
        from flamingo_sim.fl.training.trainer import CohortTrainer

        cfg = load_experiment(experiment, json.loads(overrides_json))
        pin_run_kernels(cfg)  # the kernels the native run uses
        parts = build_components(cfg, experiment, seed, log=lambda _m: None)
        # the threads strategy trains each client on its own (one torch thread, its own dropout
        # generator): a cohort of one gives what the native cohort gives that client
        mode = "threads" if threads_safe(parts.model) else "sequential"
        _PARTS[key] = (parts, CohortTrainer(parts.model, strategy=mode, precision=cfg.fl.precision))
    return _PARTS[key]


experiment_client_app = ClientApp()
register_partition_query(experiment_client_app)


@experiment_client_app.train()
def train_experiment_client(message: Message, context: Context) -> Message:
    """Train the client the message names (``flamingo.client-id``) from the message's model, as the native engine would."""
    who: Any = message.content.config_records[FLAMINGO_RECORD]
    conf: Any = message.content.config_records["config"]
    client, round_idx, seed = int(who["client-id"]), int(who["round"]), int(who["seed"])
    parts, trainer = _parts(str(conf[EXPERIMENT_KEY]), str(conf[OVERRIDES_KEY]), seed)
    fl = parts.cfg.fl
    x, y = parts.dataset.client_data(client)
    from flamingo_sim.fl.training.trainer import CohortTask

    x = parts.dataset.train_augment(x, client, round_idx, seed)  # the identity unless the dataset augments (FedScale's flip)
    state = message.content.array_records["arrays"].to_torch_state_dict()
    task = CohortTask([(x, y)], [client], n_steps=fl.local_steps, batch_size=fl.batch_size, lr=fl.lr,
                      seed=seed, round_idx=round_idx, prox_mu=float(conf[PROX_MU_KEY]))
    result = trainer.train(state, task)
    trained = {name: value.detach().cpu().contiguous() for name, value in result.client_params(0).items()}
    metrics = MetricRecord({"num-examples": int(y.shape[0]), "train_loss": float(result.losses[0])})
    return Message(RecordDict({"arrays": ArrayRecord(trained), "metrics": metrics}), reply_to=message)


