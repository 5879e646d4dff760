"""``train_mode: auto`` on a GPU (:mod:`flamingo_sim.fl.training.autotune`): the choice, the bound, the cache, the log and
the summary, tested on the CPU with the tuner's timings injected and its deviations real."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from flamingo_sim.fl.training import autotune
from flamingo_sim.fl.training.autotune import REFERENCE, Candidate, Choice, Trial, TuneCache, Tuner, gpu_candidates, select
from flamingo_sim.fl.training.trainer import CohortTask, CohortTrainer, model_state
from flamingo_sim.models import build_model
from tests.fl.training.test_batched import _datas, _TinyCNN

ROOT = Path(__file__).resolve().parents[3]
#: CPU candidates: the reference, fp32 strategies that only reorder float operations, and bf16.
CPU_CANDIDATES = [Candidate(REFERENCE, "sequential"), Candidate("vmap", "vmap"), Candidate("loop channels_last", "sequential", channels_last=True),
                  Candidate("vmap per client", "vmap", max_clients=1), Candidate("vmap bf16", "vmap", precision="bf16")]


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny models: one torch thread (two spinning threads on a busy 2-core machine cost seconds a pass)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _scripted(seconds: dict[str, float]):
    """A timer that runs the pass and reports the given seconds (the machine's own timing is not what is tested)."""
    calls: list[str] = []

    def timer(name, fn):
        fn()
        calls.append(name)
        return seconds[name]

    timer.calls = calls  # type: ignore[attr-defined]
    return timer


def _case(clients: int = 4):
    torch.manual_seed(0)
    model = _TinyCNN()
    datas = _datas(clients, (3, 8, 8), 4, torch.float32)
    return model, model_state(model), CohortTask(datas, list(range(clients)), n_steps=3, batch_size=8, lr=0.05, seed=1, round_idx=1)


def test_select_takes_the_fastest_within_the_bound_and_says_why():
    cands = [Candidate(REFERENCE, "sequential"), Candidate("vmap", "vmap"), Candidate("4 streams", "streams"),
             Candidate("vmap+graph bf16", "vmap", cuda_graphs=True, precision="bf16")]
    trials = [Trial(REFERENCE, 1.0, 0.0), Trial("vmap", 0.5, 1e-6), Trial("4 streams", error="OutOfMemoryError: CUDA out of memory"),
              Trial("vmap+graph bf16", 0.2, 1e-2)]
    choice = select(trials, cands, floor=1e-5, bound_factor=4.0, where="8 clients of round 1 on GPU X")
    assert choice.candidate.name == "vmap" and choice.bound == pytest.approx(4e-5)
    assert choice.line() == (
        "train_mode auto: vmap (0.5 s per client, 2.00x the per-client loop; fastest of the 2 of 4 candidates within the bound); "
        "bound: update deviation from the per-client loop <= 4 x float32 rounding's own (1.0e-05 -> 4.0e-05), checked on 8 clients "
        "of round 1 on GPU X; refused: 4 streams (OutOfMemoryError: CUDA out of memory), vmap+graph bf16 (deviation 1.0e-02 > bound 4.0e-05)")
    # with a looser bound bf16 is taken: it is the fastest
    assert select(trials, cands, floor=1e-2, bound_factor=4.0).candidate.name == "vmap+graph bf16"
    # ties go to the earlier candidate; nothing passing but the loop leaves the loop
    assert select([Trial(REFERENCE, 1.0, 0.0), Trial("vmap", 1.0, 0.0)], cands, 0.0).candidate.name == REFERENCE
    assert select([Trial(REFERENCE, 1.0, 0.0), Trial("vmap", 0.1, 1e-9)], cands, 0.0).candidate.name == REFERENCE


def test_candidates_for_a_gpu():
    mobilenet = build_model("mobilenet_v2", (3, 32, 32), 10, seed=0)
    names = [c.name for c in gpu_candidates(mobilenet)]
    assert names == [REFERENCE, "vmap", "vmap+graph", "graph per client", "4 streams", "4 streams channels_last", "vmap+graph bf16"]
    assert [c.precision for c in gpu_candidates(mobilenet, "bf16")] == ["bf16"] * 6  # asked for bf16: every candidate in it, no extra
    rnn = torch.nn.Sequential(torch.nn.LSTM(4, 4))
    assert [c.name for c in gpu_candidates(rnn)] == [REFERENCE, "4 streams"]


def test_the_tuner_refuses_bf16_on_its_real_deviation_and_trains_with_the_choice():
    """bf16 is scripted fastest but its measured deviation breaks the bound; the run then trains with the fastest that keeps it."""
    model, start, task = _case()
    timer = _scripted({REFERENCE: 1.0, "vmap": 0.6, "loop channels_last": 0.9, "vmap per client": 0.4, "vmap bf16": 0.1})
    lines: list[str] = []
    trainer = CohortTrainer(model, "auto", tuner=Tuner(CPU_CANDIDATES, timer=timer, log=lines.append))
    got = trainer.train(start, task)
    choice = trainer.choice
    devs = {t.candidate: t.deviation for t in choice.trials}
    assert devs[REFERENCE] == 0.0 and choice.floor > 0
    for name in ("vmap", "loop channels_last", "vmap per client"):  # float reordering only: within 4x float32 rounding's own
        assert 0 <= devs[name] <= choice.bound, (name, devs[name], choice.bound)
    assert devs["vmap bf16"] > 100 * choice.bound  # bfloat16's rounding is far beyond it
    assert choice.candidate.name == "vmap per client" and got.mode == "vmap"
    assert timer.calls == [c.name for c in CPU_CANDIDATES]  # every candidate timed once, in order
    assert lines == [choice.line()] and "refused: vmap bf16 (deviation" in lines[0]
    # the round trained with the chosen candidate, bit for bit, whatever was measured first
    ref = CPU_CANDIDATES[3].trainer(model).train(start, task)
    assert all(torch.equal(got.params[k], ref.params[k]) for k in ref.params) and torch.equal(got.losses, ref.losses)
    # the next round does not measure again
    trainer.train(start, task)
    assert len(timer.calls) == len(CPU_CANDIDATES)


def test_channels_last_loop_is_the_loop_in_float64():
    model, _, task = _case(2)
    model = model.double()
    start = model_state(model)
    datas = [(x.double(), y) for x, y in task.client_datas]
    t64 = CohortTask(datas, task.client_ids, task.n_steps, task.batch_size, task.lr, task.seed, task.round_idx)
    a = CohortTrainer(model, "sequential").train(start, t64)
    b = CohortTrainer(model, "sequential", channels_last=True).train(start, t64)
    c = CohortTrainer(model, "streams", n_streams=2, channels_last=True).train(start, t64)
    for other in (b, c):
        assert max(float((a.params[k] - other.params[k]).abs().max()) for k in a.params) < 1e-12
        assert all(v.is_contiguous() for v in other.params.values())


def test_a_candidate_that_fails_is_reported_not_fatal(monkeypatch):
    model, start, task = _case(2)
    tuner = Tuner([Candidate(REFERENCE, "sequential"), Candidate("bad", "vmap")], timer=_scripted({REFERENCE: 1.0, "bad": 0.1}))
    original = CohortTrainer.train

    def train(self, params, t):
        if self.strategy == "vmap":
            raise RuntimeError("CUDA error: an illegal memory access was encountered\nmore lines")
        return original(self, params, t)

    monkeypatch.setattr(CohortTrainer, "train", train)
    trials, floor, where = tuner.measure(CohortTrainer(model, "sequential"), start, task)
    assert trials[1] == Trial("bad", error="RuntimeError: CUDA error: an illegal memory access was encountered")
    choice = select(trials, tuner.candidates, floor, where=where)
    assert choice.candidate.name == REFERENCE and choice.refused() == ["bad (RuntimeError: CUDA error: an illegal memory access was encountered)"]


def test_the_cache_round_trip_and_what_it_refuses(tmp_path):
    path = tmp_path / "cache" / "train_auto.json"
    model, start, task = _case()
    seconds = {REFERENCE: 1.0, "vmap": 0.6, "loop channels_last": 0.9, "vmap per client": 0.4, "vmap bf16": 0.1}
    first_timer, lines = _scripted(seconds), []
    first = CohortTrainer(model, "auto", tuner=Tuner(CPU_CANDIDATES, TuneCache(path), "GPU X", timer=first_timer, log=lines.append))
    a = first.train(start, task)
    raw = json.loads(path.read_text())
    assert raw["format"] == 1 and raw["kind"] == "flamingo-sim train_mode auto" and len(raw["entries"]) == 1
    key = next(iter(raw["entries"]))
    assert key.startswith("GPU X | torch ") and "| input 3x8x8 | batch 8 | steps 3 |" in key
    # a second run reads it: no measurement, the same choice, said to come from the cache
    again_timer, again_lines = _scripted(seconds), []
    second = CohortTrainer(model, "auto", tuner=Tuner(CPU_CANDIDATES, TuneCache(path), "GPU X", timer=again_timer, log=again_lines.append))
    b = second.train(start, task)
    assert again_timer.calls == [] and second.choice.candidate == first.choice.candidate
    assert second.choice.trials == first.choice.trials and second.choice.floor == first.choice.floor
    assert again_lines == [first.choice.line() + f" [cached in {path}]"]
    assert all(torch.equal(a.params[k], b.params[k]) for k in a.params)
    # another GPU is another key: measured
    other = _scripted(seconds)
    CohortTrainer(model, "auto", tuner=Tuner(CPU_CANDIDATES, TuneCache(path), "GPU Y", timer=other)).train(start, task)
    assert len(other.calls) == len(CPU_CANDIDATES) and len(json.loads(path.read_text())["entries"]) == 2
    # an entry whose trials do not choose what it says it chose is not trusted: measured again (and rewritten)
    raw = json.loads(path.read_text())
    raw["entries"][key]["chosen"] = "vmap bf16"
    path.write_text(json.dumps(raw))
    damaged_timer, damaged_lines = _scripted(seconds), []
    CohortTrainer(model, "auto", tuner=Tuner(CPU_CANDIDATES, TuneCache(path), "GPU X", timer=damaged_timer, log=damaged_lines.append)).train(start, task)
    assert len(damaged_timer.calls) == len(CPU_CANDIDATES)
    assert damaged_lines[0] == (f"train_mode auto: {path}: entry not trusted (chosen 'vmap bf16', but its trials choose 'vmap per client'); "
                                "measuring again")
    assert json.loads(path.read_text())["entries"][key]["chosen"] == "vmap per client"
    # a file that is not this cache's is left as it is
    path.write_text("not json {")
    foreign_lines: list[str] = []
    CohortTrainer(model, "auto", tuner=Tuner(CPU_CANDIDATES, TuneCache(path), "GPU X", timer=_scripted(seconds), log=foreign_lines.append)).train(start, task)
    assert path.read_text() == "not json {"
    assert foreign_lines[0].startswith(f"train_mode auto: {path}: not read (JSONDecodeError: ") and foreign_lines[0].endswith("left as it is")
    assert foreign_lines[1].endswith("(the choice was not cached)") and foreign_lines[2].startswith("train_mode auto: vmap per client (")


@pytest.mark.parametrize("env, expected", [("off", None), ("/x/y.json", Path("/x/y.json")), ("", "xdg")])
def test_cache_path(monkeypatch, tmp_path, env, expected):
    monkeypatch.setenv(autotune.CACHE_ENV, env)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    got = autotune.cache_path()
    assert got == (tmp_path / "flamingo-sim" / "train_auto.json" if expected == "xdg" else expected)


def test_on_the_cpu_auto_has_no_tuner():
    model = _TinyCNN()
    assert autotune.tuner_for(torch.device("cpu"), "auto", model, "fp32", print) is None
    assert autotune.tuner_for(torch.device("cpu"), "vmap", model, "fp32", print) is None


def test_a_run_logs_and_records_the_choice(tmp_path, monkeypatch, capsys):
    """A run whose trainer has a tuner (a GPU's, here given the CPU's candidates) logs its line and records it in the summary."""
    from flamingo_sim.fl.runner.run import run_experiment

    seconds = {REFERENCE: 1.0, "vmap": 0.5, "vmap bf16": 0.1}
    cands = [Candidate(REFERENCE, "sequential"), Candidate("vmap", "vmap"), Candidate("vmap bf16", "vmap", precision="bf16")]
    monkeypatch.setattr(autotune, "tuner_for", lambda device, mode, model, precision, log: Tuner(
        cands, TuneCache(tmp_path / "cache.json"), "GPU X", timer=_scripted(seconds), log=log))
    lines: list[str] = []
    res = run_experiment(ROOT / "experiments/openimage_mobilenet.yaml", out_dir=tmp_path / "run", log=lines.append,
                         overrides=["fl.rounds=2", "fl.participants_per_round=4", "fl.local_steps=2", "fl.eval_every=1",
                                    "data.proxy.n_clients=100", "policies=[baseline]"])
    said = [ln for ln in lines if ln.startswith("train_mode auto: ")]
    assert len(said) == 1 and said[0].startswith("train_mode auto: vmap (0.125 s per client, 2.00x the per-client loop;")
    tm = json.loads((tmp_path / "run" / "summary.json").read_text())["train_mode"]
    assert tm == res.summary["train_mode"]
    assert tm["chosen"] == "vmap" and tm["settings"]["strategy"] == "vmap" and tm["source"] == "measured"
    assert tm["bound"]["factor"] == 4.0 and tm["bound"]["value"] == pytest.approx(4 * tm["bound"]["floor"])
    assert tm["checked_on"] == "4 clients of round 1 on GPU X"
    assert [t["candidate"] for t in tm["trials"]] == [REFERENCE, "vmap", "vmap bf16"]
    assert tm["refused"][0].startswith("vmap bf16 (deviation ")
    assert f"train_mode auto chose vmap ({tm['why']}); bound: " in capsys.readouterr().out


def test_the_cpu_summary_has_no_train_mode(tmp_path):
    from flamingo_sim.fl.runner.run import run_experiment

    res = run_experiment(ROOT / "experiments/openimage_mobilenet.yaml", out_dir=tmp_path / "run", log=lambda _m: None,
                         overrides=["fl.rounds=1", "fl.participants_per_round=4", "fl.local_steps=1", "data.proxy.n_clients=100",
                                    "policies=[baseline]"])
    assert "train_mode" not in res.summary


def test_choice_record_is_json():
    cands = gpu_candidates(_TinyCNN())
    choice = select([Trial(c.name, 1.0 + i, 0.0) for i, c in enumerate(cands)], cands, 1e-6, where="w")
    assert isinstance(choice, Choice) and json.loads(json.dumps(choice.record()))["chosen"] == REFERENCE


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the tuner's GPU candidates need a GPU")
def test_the_tuner_on_a_gpu_checks_and_times_every_candidate():
    """On a GPU: every candidate of :func:`gpu_candidates` runs (or says why not), fp32 ones keep to the bound, the choice
    trains the round, and a second cohort of the same shape reuses the choice."""
    torch.manual_seed(0)
    model = _TinyCNN(p_drop=0.1).cuda()
    datas = [(x.cuda(), y.cuda()) for x, y in _datas(6, (3, 8, 8), 4, torch.float32)]
    start = model_state(model)
    task = CohortTask(datas, list(range(6)), n_steps=3, batch_size=8, lr=0.05, seed=1, round_idx=1)
    lines: list[str] = []
    trainer = CohortTrainer(model, "auto", tuner=Tuner(gpu_candidates(model), None, torch.cuda.get_device_name(0), log=lines.append))
    got = trainer.train(start, task)
    choice = trainer.choice
    assert [t.candidate for t in choice.trials] == [c.name for c in gpu_candidates(model)]
    fp32 = {t.candidate: t for t in choice.trials if "bf16" not in t.candidate}
    assert all(t.error is None and t.s_per_client > 0 for t in fp32.values()), choice.trials
    assert all(t.deviation <= choice.bound for t in fp32.values()), (choice.floor, choice.trials)
    assert got.n_clients == 6 and all(torch.isfinite(v.float()).all() for v in got.params.values())
    assert lines == [choice.line()] and choice.where.endswith(torch.cuda.get_device_name(0))
    trainer.train(start, task)
    assert len(lines) == 1


@pytest.mark.skipif(not torch.cuda.is_available(), reason="channels_last on CUDA needs a GPU")
def test_channels_last_streams_on_a_gpu_are_close_to_the_loop():
    torch.manual_seed(0)
    model = _TinyCNN().cuda()
    datas = [(x.cuda(), y.cuda()) for x, y in _datas(3, (3, 8, 8), 4, torch.float32)]
    start = model_state(model)
    task = CohortTask(datas, [0, 1, 2], n_steps=3, batch_size=8, lr=0.05, seed=1, round_idx=1)
    ref = CohortTrainer(model, "sequential").train(start, task)
    got = CohortTrainer(model, "streams", n_streams=2, channels_last=True).train(start, task)
    assert max(float((ref.params[k].float() - got.params[k].float()).abs().max()) for k in ref.params) < 1e-4
