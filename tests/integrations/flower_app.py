"""A small Flower app (Message API) for tests/integrations/test_flower.py: a linear classifier on generated partitions.

Its ClientApp ``app`` refuses a training message meant for another flamingo-sim client than its own
``partition-id``, so a wrong node-to-client map shows up as failed replies, and fails where the
training config names its client (``fail-clients``) and round (``fail-round``); ``plain_app`` is a
Flower app as written without flamingo-sim (no partition query, nothing from flamingo-sim).
Importable by Flower's Ray workers (they import it by name).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from flamingo_sim.integrations.flower.client import register_partition_query

N_FEATURES, N_CLASSES = 8, 3


def make_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Linear(N_FEATURES, N_CLASSES)


def load_data(partition_id: int, n: int = 32) -> tuple[torch.Tensor, torch.Tensor]:
    teacher = torch.randn(N_FEATURES, N_CLASSES, generator=torch.Generator().manual_seed(99))
    x = torch.randn(n, N_FEATURES, generator=torch.Generator().manual_seed(partition_id))
    return x, (x @ teacher).argmax(dim=1)


def central_evaluate(server_round: int, arrays: ArrayRecord) -> MetricRecord:
    """Accuracy and loss on partitions 1000-1003 (no node holds them)."""
    model = make_model()
    model.load_state_dict(arrays.to_torch_state_dict())
    x, y = (torch.cat(t) for t in zip(*(load_data(1000 + i) for i in range(4))))
    with torch.no_grad():
        out = model(x)
    return MetricRecord({"accuracy": float((out.argmax(1) == y).double().mean()), "loss": float(F.cross_entropy(out, y))})


app = ClientApp()
register_partition_query(app)


@app.train()
def train(msg: Message, context: Context) -> Message:
    partition = int(context.node_config["partition-id"])
    meant_for = int(msg.content["flamingo"]["client-id"])  # type: ignore[arg-type]
    if meant_for != partition:
        raise RuntimeError(f"node of partition {partition} was sent client {meant_for}'s task")
    config = msg.content["config"]
    if "fail-round" in config and int(msg.content["flamingo"]["round"]) == config["fail-round"] and partition in config["fail-clients"]:  # type: ignore[index,operator,arg-type]
        raise RuntimeError(f"client {partition} fails in round {config['fail-round']} (the test asked it to)")  # type: ignore[index]
    model = make_model()
    model.load_state_dict(msg.content["arrays"].to_torch_state_dict())  # type: ignore[union-attr]
    x, y = load_data(partition)
    opt = torch.optim.SGD(model.parameters(), lr=float(msg.content["config"]["lr"]))  # type: ignore[arg-type]
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    metrics = MetricRecord({"train_loss": float(loss), "num-examples": len(y)})
    return Message(RecordDict({"arrays": ArrayRecord(model.state_dict()), "metrics": metrics}), reply_to=msg)


plain_app = ClientApp()


@plain_app.train()
def plain_train(msg: Message, context: Context) -> Message:
    """A plain Flower training function: this node's partition, one SGD step."""
    model = make_model()
    model.load_state_dict(msg.content["arrays"].to_torch_state_dict())  # type: ignore[union-attr]
    x, y = load_data(int(context.node_config["partition-id"]))
    opt = torch.optim.SGD(model.parameters(), lr=float(msg.content["config"]["lr"]))  # type: ignore[arg-type]
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    metrics = MetricRecord({"train_loss": float(loss), "num-examples": len(y)})
    return Message(RecordDict({"arrays": ArrayRecord(model.state_dict()), "metrics": metrics}), reply_to=msg)
