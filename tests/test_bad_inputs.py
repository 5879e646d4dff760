"""Issue 44's sweep of bad inputs: every value a user types is used as typed, or refused in one line
(file, key, what was expected) with exit code 2, before anything is written.

Each row was found by typing it (the issue's 47 inputs, and a sweep of every numeric key at its
extremes): before the fixes these ran into a traceback mid-run (``fl.lr=1e308``: an overflow in
``train_vmap`` after the run directory was written), a crash (``fl.threads=100000``: a
segmentation fault), a run that never ended (``network.bandwidth_sigma=1000``,
``fedbuff.concurrency=1e9``), memory exhausted (``data.proxy.n_clients=1e9``), or a silently
meaningless run (``fl.batch_size=100000``, ``fl.participants_per_round=1e9`` on 60 clients).
"""

from __future__ import annotations

import os
import re

import pandas as pd
import pytest

from flamingo_sim.cli import main
from flamingo_sim.fl.runner import estimate
from flamingo_sim.fl.runner.run import run_experiment

BASE = "name: x\nfl: {rounds: 2, participants_per_round: 5, local_steps: 2, eval_every: 1}\ndata: {proxy: {n_clients: 60}}\n"
F32 = re.escape(" that fits float32, the training's dtype (its size between 1.2e-38 and 3.4e+38, or 0)")
CPUS = os.cpu_count()

#: (id, the experiment file's text, the --set values, the error after "exp.yaml: ": a regular expression the line starts with)
REFUSED = [
    # floats the training holds in float32 (issue 44, item 1: a traceback mid-run)
    ("lr 1e308", BASE, ["fl.lr=1e308"], rf"fl\.lr: expected a number > 0{F32}, got 1e\+308$"),
    ("lr 1e39", BASE, ["fl.lr=1e39"], rf"fl\.lr: expected a number > 0{F32}, got 1e\+39$"),
    ("fedprox mu", BASE, ["aggregation={name: fedprox, mu: 1e308}"], rf"aggregation\.mu: expected a number >= 0{F32}, got 1e\+308$"),
    ("fedadam server_lr", BASE, ["aggregation={name: fedadam, server_lr: 1e308}"],
     rf"aggregation\.server_lr: expected a number > 0{F32}, got 1e\+308$"),
    ("fedyogi tau underflows", BASE, ["aggregation={name: fedyogi, tau: 1e-300}"], rf"aggregation\.tau: expected a number > 0{F32}, got 1e-300$"),
    ("fedbuff server_lr", BASE, ["fl.mode=fedbuff", "fedbuff.server_lr=1e308"], rf"fedbuff\.server_lr: expected a number > 0{F32}, got 1e\+308$"),
    # sizes against the data and the population (items 2 and 4)
    ("batch above every client", BASE, ["fl.batch_size=100000"],
     r"fl\.batch_size: expected at most 747, the samples of the largest client, got 100,000 \(a client with fewer samples than the "
     r"batch repeats some of them within a batch; a batch larger than every client would repeat samples in every batch\)$"),
    ("participants above the clients", BASE, ["fl.participants_per_round=1000000000"],
     r"fl\.participants_per_round: expected at most the 60 clients of the data, got 1,000,000,000$"),
    ("participants one above", BASE, ["fl.participants_per_round=61"], r"fl\.participants_per_round: expected at most the 60 clients"),
    ("fedbuff concurrency", BASE, ["fl.mode=fedbuff", "fedbuff.concurrency=1000000000"],
     r"fedbuff\.concurrency: expected at most the 60 clients of the data \(each trains one task at a time\), got 1,000,000,000$"),
    # a run's length: an estimate, and a confirmation it did not get (item 4)
    ("rounds 1e9", BASE, ["fl.rounds=1e9"],
     r"fl\.rounds: 1,000,000,000 rounds x 5 clients x 2 local steps x 2 runs \(policies x seeds\) = 2e\+10 local steps, about "
     r"[0-9.e+]+ (days|years) here \(one step of 16 samples measured at [0-9.e-]+ ms on cpu\); more than 24 h: confirm with --yes, "
     r"or lower fl\.rounds$"),
    ("local steps 1e9", BASE, ["fl.local_steps=1e9"], r"fl\.local_steps: 2 rounds x 5 clients x 1,000,000,000 local steps .* or lower fl\.local_steps$"),
    ("fedbuff buffer 1e9", BASE, ["fl.mode=fedbuff", "fedbuff.buffer_size=1000000000"],
     r"fedbuff\.buffer_size: 2 rounds x 1,000,000,000 updates x 2 local steps .* or lower fedbuff\.buffer_size$"),
    # the machine (a segmentation fault; an overflow mid-run)
    ("threads", BASE, ["fl.threads=100000"], rf"fl\.threads: expected at most {CPUS}, the logical CPUs of this machine, got 100,000$"),
    ("memory budget", BASE, ["fl.memory_budget_gb=1e308"], r"fl\.memory_budget_gb: expected at most [0-9.]+, this machine's RAM in GiB, got 1e\+308$"),
    # transfers that never end (an overflow mid-run; sigma 1000: a run that hung)
    ("bandwidth 1e-308", BASE, ["network.bandwidth_mbps=1e-308"],
     r"network: client \d+'s model transfers \(2 x 8\.95 MB at [0-9.e+-]+ Mbit/s, seed 0\) would never end; bandwidths are log-normal "
     r"around network\.bandwidth_mbps 1e-308 with log-sd network\.bandwidth_sigma 0\.5: lower the sigma or network\.model_size_mb, or raise the bandwidth$"),
    ("model size 1e308", BASE, ["network.model_size_mb=1e308"], r"network: client \d+'s model transfers \(2 x 1e\+308 MB at .* would never end"),
    ("bandwidth sigma 1000", BASE, ["network.bandwidth_sigma=1000"], r"network: client \d+'s model transfers \(2 x 8\.95 MB at 0 Mbit/s"),
    ("bandwidth sigma 10", BASE, ["network.bandwidth_sigma=10"],
     r"network: client \d+'s model transfers .* would take [0-9.e+]+ h, longer than the traces' wrap-free horizon of 697\.3 h"),
    # the generated task: memory exhausted, or a negative count
    ("proxy mean samples", BASE, ["data.proxy.mean_samples=1e308"],
     r"data\.proxy\.mean_samples 1e\+308: the largest client would hold inf samples, more than the 9\.01e\+15 \(2\*\*53\)"),
    ("proxy clients", BASE, ["data.proxy.n_clients=1e12"],
     r"data\.proxy: the proxy task needs at least [0-9,.]+ GiB \(1,000,000,000,000 clients' arrays: [0-9,.]+ GiB\), more than the "
     r"[0-9.]+ GiB of memory of this machine; lower data\.proxy\.n_clients, n_classes, n_features or mean_samples$"),
    ("proxy classes", BASE, ["data.proxy.n_classes=1e12"], r"data\.proxy: the proxy task needs at least .*teachers of n_classes 1,000,000,000,000 x n_features 60"),
    ("proxy features", BASE, ["data.proxy.n_features=1e12"], r"data\.proxy: the proxy task needs at least .*n_features 1,000,000,000,000"),
    # seeds are stored as int64 (an overflow in pyarrow after the run directory was written)
    ("seed 1e20", BASE, ["seeds=[100000000000000000000]"], r"seeds\[0\]: expected an integer in \[0, 9223372036854775808\), got 100000000000000000000$"),
    # YAML's unique keys (item 4: fl: written twice ran, the last one winning)
    ("a section twice", BASE + "fl: {rounds: 3}\n", [],
     r"line 4: key 'fl' written twice in one mapping \(lines 2 and 4\); YAML takes each key once$"),
]


@pytest.fixture(autouse=True)
def quiet(monkeypatch):
    monkeypatch.setenv("FLAMINGO_SIM_QUIET", "1")


@pytest.mark.parametrize("text, sets, error", [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_a_bad_input_is_one_line_with_exit_code_2_before_anything_is_written(tmp_path, capsys, monkeypatch, text, sets, error):
    exp = tmp_path / "exp.yaml"
    exp.write_text(text)
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    assert main(["run", str(exp), "--out", str(out), *[a for s in sets for a in ("--set", s)]]) == 2
    printed = capsys.readouterr()
    assert printed.out == ""
    # the one line, nothing before it: before issue 50 the proxy task's WARNING line came first wherever the
    # refusal was made while the parts were built (the batch, the bandwidths, the proxy's sizes)
    assert printed.err.count("\n") == 1 and printed.err.endswith("\n"), printed.err
    assert re.match(rf"flamingo-sim run: error: {re.escape(str(exp))}: {error}", printed.err), printed.err
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exp.yaml"]


def test_a_set_value_with_a_key_twice_is_one_line(tmp_path, capsys):
    exp = tmp_path / "exp.yaml"
    exp.write_text(BASE)
    assert main(["run", str(exp), "--out", str(tmp_path / "out"), "--set", "fl={rounds: 2, rounds: 3}"]) == 2
    assert capsys.readouterr().err.strip() == ("flamingo-sim run: error: --set 'fl={rounds: 2, rounds: 3}': key 'rounds' written twice in one "
                                               "mapping (twice on line 1); YAML takes each key once")


def test_an_overcommitment_beyond_the_population_selects_everyone_online(tmp_path):
    """``fl.overcommit: 1e308`` overflowed ``ceil(K x overcommit)``; it means: select every client online."""
    exp = tmp_path / "exp.yaml"
    exp.write_text(BASE)
    result = run_experiment(exp, out_dir=tmp_path / "out", overrides=("fl.overcommit=1e308", "policies=[baseline]"))
    m = pd.read_parquet(tmp_path / "out" / "metrics.parquet").query("round >= 1")
    assert len(m) == 2 and (m["n_selected"] == m["n_online"]).all() and (m["n_selected"] > 5).all()
    assert result.summary["policies"]["baseline"]


def _small_limits(monkeypatch, long_run_s: float = 1e-9) -> None:
    """Make the main job's size a "long" run: timed from 1 step, and any estimate over the limit."""
    monkeypatch.setattr(estimate, "MEASURED_FROM", 1)
    monkeypatch.setattr(estimate, "LONG_RUN_S", long_run_s)


def test_a_long_run_runs_when_confirmed_with_yes(tmp_path, capsys, monkeypatch):
    _small_limits(monkeypatch)
    exp = tmp_path / "exp.yaml"
    exp.write_text(BASE)
    assert main(["run", str(exp), "--out", str(tmp_path / "out"), "--set", "policies=[baseline]", "--yes"]) == 0
    err = capsys.readouterr().err
    assert re.search(r"^fl\.local_steps: 2 rounds x 5 clients x 2 local steps x 1 runs \(policies x seeds\) = 20 local steps, about \d+ s here "
                     r"\(one step of 16 samples measured at [0-9.e-]+ ms on cpu\): confirmed, running$", err, re.M), err
    assert (tmp_path / "out" / "summary.json").is_file()


def test_a_long_run_asks_and_the_answer_decides(tmp_path, monkeypatch):
    _small_limits(monkeypatch)
    exp = tmp_path / "exp.yaml"
    exp.write_text(BASE)
    asked: list[str] = []

    def no(line: str) -> bool:
        asked.append(line)
        return False

    from flamingo_sim.errors import ConfigError

    with pytest.raises(ConfigError, match=r"more than 0 s: confirm with --yes, or lower fl\.local_steps$"):
        run_experiment(exp, out_dir=tmp_path / "a", overrides=("policies=[baseline]",), confirm=no)
    assert len(asked) == 1 and asked[0].startswith("fl.local_steps: 2 rounds x 5 clients")
    assert not (tmp_path / "a").exists()
    run_experiment(exp, out_dir=tmp_path / "b", overrides=("policies=[baseline]",), confirm=lambda _line: True)
    assert (tmp_path / "b" / "summary.json").is_file()


def test_a_run_under_the_limit_is_not_asked(tmp_path, monkeypatch):
    _small_limits(monkeypatch, long_run_s=1e9)
    exp = tmp_path / "exp.yaml"
    exp.write_text(BASE)

    def never(line: str) -> bool:
        raise AssertionError(f"asked: {line}")

    run_experiment(exp, out_dir=tmp_path / "out", overrides=("policies=[baseline]",), confirm=never)


@pytest.mark.parametrize("seconds, text", [(40, "40 s"), (7200, "2 h"), (3 * 86400, "3 days"), (86400 * 365.25 * 31710, "3.2e+04 years")])
def test_duration_text(seconds, text):
    assert estimate.duration_text(seconds) == text


def test_run_steps_counts_units_rounds_clients_and_steps():
    from flamingo_sim.config import from_mapping
    from flamingo_sim.fl.config import ExperimentConfig

    cfg = from_mapping(ExperimentConfig, {"name": "x", "seeds": [0, 1, 2], "fl": {"rounds": 10, "participants_per_round": 7, "local_steps": 3}})
    assert estimate.run_steps(cfg) == (2 * 3 * 10 * 7 * 3, "10 rounds x 7 clients x 3 local steps x 6 runs (policies x seeds) = 1.26e+03 local steps",
                                       "fl.local_steps")
    assert estimate.run_steps(from_mapping(ExperimentConfig, {"name": "x", "fl": {"rounds": None, "horizon_h": 5}})) is None


@pytest.mark.parametrize("flags, error", [
    (["--seeds", "1000000000"], "--seeds: expected at most 100,000 (each seed a run of every policy), got 1,000,000,000"),
    (["--executors", "100000", "--engine", "fedscale"], "--executors: expected at most fl.participants_per_round, 5 (each executor trains "
                                                        "whole clients of a round; more would wait idle), got 100,000"),
], ids=["seeds 1e9", "executors 1e5"])
def test_run_counts_are_bounded_before_anything_is_built(tmp_path, capsys, flags, error):
    """Issue 50: ``--seeds 1000000000`` built a list of a billion seeds (24 GB) and was killed; ``--executors 100000``
    started processes until gRPC failed (tracebacks), then hung."""
    exp = tmp_path / "exp.yaml"
    exp.write_text(BASE)
    assert main(["run", str(exp), "--out", str(tmp_path / "out"), *flags]) == 2
    printed = capsys.readouterr()
    assert printed.out == "" and printed.err == f"flamingo-sim run: error: {error}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exp.yaml"]


def test_seeds_stay_below_the_largest_seed(tmp_path, capsys):
    exp = tmp_path / "exp.yaml"
    exp.write_text(BASE + "seeds: [9223372036854775806]\n")
    assert main(["run", str(exp), "--out", str(tmp_path / "out"), "--seeds", "5"]) == 2
    assert capsys.readouterr().err == ("flamingo-sim run: error: --seeds: 5 seeds from seeds[0] 9223372036854775806 run past the largest "
                                       "seed, 9223372036854775807\n")


@pytest.mark.parametrize("command", [["run", "{exp}"], ["reproduce"], ["sensitivity", "{exp}", "--vary", "fl.rounds=2,3"]])
def test_a_ray_address_without_the_ray_executor_is_refused(tmp_path, capsys, command):
    """Issue 50: ``--ray-address auto`` without ``--executor ray`` was ignored, and the units ran on this machine."""
    exp = tmp_path / "exp.yaml"
    exp.write_text(BASE)
    argv = [a.replace("{exp}", str(exp)) for a in command] + ["--out", str(tmp_path / "out"), "--ray-address", "auto"]
    assert main(argv) == 2
    printed = capsys.readouterr()
    assert printed.out == ""
    assert printed.err == (f"flamingo-sim {command[0]}: error: --ray-address: names the Ray cluster of --executor ray, and the executor is "
                           "'local', which would ignore it: add --executor ray, or leave --ray-address out\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exp.yaml"]
