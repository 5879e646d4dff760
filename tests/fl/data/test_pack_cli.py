"""``flamingo-sim pack-data``: a pack is written whole or not at all, verified when read, and must fit the experiment."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from flamingo_sim.cli import main
from flamingo_sim.errors import ConfigError, InputDataError
from flamingo_sim.fl.data.openimage import FedScaleImageDataset
from flamingo_sim.fl.data.pipeline import PACK_MANIFEST, PackedDataset, pack_dataset
from flamingo_sim.fl.runner.results import load_run
from flamingo_sim.fl.runner.run import run_experiment
from tests.fl.data.test_data import _write_fedscale
from tests.fl.runner.test_run import ROOT, TINY_REAL

EXP = ROOT / "experiments/openimage_mobilenet.yaml"
CLIENTS = {"a": 16, "b": 20, "c": 16}  # 52 samples; labels i % 3 within each client


@pytest.fixture(autouse=True)
def quiet(monkeypatch):
    monkeypatch.setenv("FLAMINGO_SIM_QUIET", "1")


@pytest.fixture(scope="module")
def raw(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("raw") / "openimage"
    _write_fedscale(root, CLIENTS)
    return root


@pytest.fixture(scope="module")
def packed(raw, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("packs") / "pack"
    assert main(["pack-data", str(EXP), "--out", str(out), "--set", f"data.root={raw}", "--set", "data.image_size=32"]) == 0
    return out


@pytest.fixture
def pack(packed, tmp_path) -> Path:
    """A copy of the module's pack, to damage."""
    return Path(shutil.copytree(packed, tmp_path / "pack"))


def _pack_args(raw: Path, out: Path, *more: str) -> list[str]:
    return ["pack-data", str(EXP), "--out", str(out), "--set", f"data.root={raw}", "--set", "data.image_size=32", *more]


def _error(capsys) -> str:
    """The one line on stderr (after the progress lines, if the pack had begun)."""
    err = capsys.readouterr().err.strip().splitlines()
    assert all(line.startswith("packing ") for line in err[:-1]), err
    return err[-1]


def test_pack_data_round_trip_then_run_on_the_pack(raw, tmp_path, capsys):
    out = tmp_path / "pack"
    assert main(_pack_args(raw, out, "--workers", "2")) == 0
    captured = capsys.readouterr()
    assert captured.err.splitlines()[-1].startswith("packed 3/3 clients, 52/52 samples, ")  # progress on stderr
    [line] = captured.out.splitlines()  # the result on stdout
    size = sum(f.stat().st_size for f in out.iterdir())
    assert line.startswith(f"packed dataset at {out}: 3 clients, 52 samples (+ 4 test), {size / 2**20:.1f} MiB on disk; decoded ")
    assert line.endswith(" samples/s on 2 threads")
    assert sorted(p.name for p in out.iterdir()) == sorted([".flamingo-sim.json", PACK_MANIFEST, "x.npy", "y.npy", "offsets.npy",
                                                            "test_x.npy", "test_y.npy"])
    assert [p.name for p in tmp_path.iterdir()] == ["pack"]  # no staging directory left beside it
    manifest = json.loads((out / PACK_MANIFEST).read_text())
    assert manifest["format_version"] == 2 and manifest["n_clients"] == 3 and manifest["n_samples"] == 52
    assert manifest["input_shape"] == [3, 32, 32] and manifest["n_classes"] == 3 and manifest["n_test_samples"] == 4
    assert manifest["settings"]["data.image_size"] == 32 and manifest["settings"]["data.name"] == "openimage"
    for name, entry in manifest["files"].items():
        assert entry["sha256"] == hashlib.sha256((out / name).read_bytes()).hexdigest()
        assert entry["bytes"] == (out / name).stat().st_size
    assert manifest["files"]["x.npy"]["bytes"] == 128 + 52 * 3 * 32 * 32 * 2  # the .npy header, then float16 samples

    reader = FedScaleImageDataset(raw, "train", image_size=32)
    ds = PackedDataset(out)
    assert ds.samples_per_client.tolist() == [16, 20, 16]
    for cid in range(3):
        x, y = ds.client_data(cid)
        rx, ry = reader.client_data(cid)
        assert torch.equal(y, ry)
        np.testing.assert_allclose(x.numpy(), rx.numpy(), atol=2e-3, rtol=1e-3)  # float16 on disk

    assert main(["pack-data", "--verify", str(out)]) == 0
    assert capsys.readouterr().out.startswith(f"{out}: packed dataset verified: 3 clients, 52 samples, inputs 3x32x32, 3 classes; ")

    run = tmp_path / "run"
    sets = [a for s in [f"data.root={out}", *TINY_REAL] for a in ("--set", s)]
    assert main(["run", str(EXP), "--out", str(run), *sets, "--device", "cpu"]) == 0
    metrics, summary = load_run(run)
    assert summary["data"].startswith(f"packed dataset at {out} (3 clients, float16) of: FedScale image dataset at {raw}")
    assert metrics["n_kept"].tolist() == [0, 2, 2]  # round 0 (the initial model), then 2 rounds


def test_pack_data_refuses_a_non_empty_out_and_leaves_it_alone(raw, tmp_path, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("my notes\n")
    assert main(_pack_args(raw, out)) == 2
    assert _error(capsys) == (f"flamingo-sim pack-data: error: --out {out}: holds files flamingo-sim did not write "
                              "(no .flamingo-sim.json); refusing to replace it - choose a new or empty directory")
    assert [p.name for p in out.iterdir()] == ["notes.txt"] and (out / "notes.txt").read_text() == "my notes\n"
    assert [p.name for p in tmp_path.iterdir()] == ["mine"]


def test_a_failed_pack_leaves_no_pack_and_an_earlier_pack_intact(raw, pack, tmp_path, capsys):
    broken = Path(shutil.copytree(raw, tmp_path / "broken"))
    (broken / "train" / "b_3.png").write_bytes(b"not an image")  # client b (the second) is unreadable
    out = tmp_path / "new"
    assert main(_pack_args(broken, out)) == 2
    line = _error(capsys)
    assert line.startswith(f"flamingo-sim pack-data: error: {EXP}: data.root: {broken / 'client_data_mapping/train.csv'}: line 21: "
                           f"image {broken / 'train/b_3.png'} unreadable (")
    assert not out.exists()
    before = {p.name: p.read_bytes() for p in pack.iterdir()}
    assert main(_pack_args(broken, pack)) == 2  # a pack again over an earlier pack: replaced only when complete
    capsys.readouterr()
    assert {p.name: p.read_bytes() for p in pack.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken", "pack"]  # no staging directory left
    assert main(_pack_args(raw, pack, "--workers", "1")) == 0  # a complete pack replaces it
    assert capsys.readouterr().out.endswith(" samples/s on 1 thread\n")
    assert PackedDataset(pack).n_clients == 3


def test_ctrl_c_while_packing_removes_the_unfinished_pack(raw, tmp_path, monkeypatch, capsys):
    read = FedScaleImageDataset._read_client

    def interrupted_after_one(self, cid):
        if cid >= 1:
            raise KeyboardInterrupt
        return read(self, cid)

    monkeypatch.setattr(FedScaleImageDataset, "_read_client", interrupted_after_one)
    out = tmp_path / "pack"
    assert main(_pack_args(raw, out, "--workers", "1")) == 130
    assert _error(capsys) == "flamingo-sim pack-data: interrupted (SIGINT)"
    assert list(tmp_path.iterdir()) == []


def _record(pack: Path, name: str, array: np.ndarray) -> None:
    """Replace ``name`` and record its new size and digest: a pack whose writer was wrong, not damaged later."""
    np.save(pack / name, array)
    manifest = json.loads((pack / PACK_MANIFEST).read_text())
    manifest["files"][name] = {"bytes": (pack / name).stat().st_size, "sha256": hashlib.sha256((pack / name).read_bytes()).hexdigest()}
    (pack / PACK_MANIFEST).write_text(json.dumps(manifest))


def _tamper_y(pack: Path) -> None:
    y = np.load(pack / "y.npy")
    y[0] = 2
    np.save(pack / "y.npy", y)


def _truncate_x(pack: Path) -> None:
    data = (pack / "x.npy").read_bytes()
    (pack / "x.npy").write_bytes(data[:-100])


def _bad_label(pack: Path) -> None:
    y = np.load(pack / "y.npy")
    y[5] = 3
    _record(pack, "y.npy", y)


CASES = {
    "tampered y.npy": (_tamper_y, "y.npy", "SHA-256 differs from the manifest's (changed since it was packed; pack the data again)"),
    "truncated x.npy": (_truncate_x, "x.npy", f"{319616 - 100:,} bytes, the manifest says 319,616 "
                                              "(truncated or changed since it was packed; pack the data again)"),
    "offsets not ending at len(x)": (lambda p: _record(p, "offsets.npy", np.array([0, 16, 36, 51])), "offsets.npy",
                                     "the last offset is 51, expected 52 (the rows of x.npy)"),
    "offsets not starting at 0": (lambda p: _record(p, "offsets.npy", np.array([1, 16, 36, 52])), "offsets.npy",
                                  "the first offset is 1, expected 0"),
    "offsets decreasing": (lambda p: _record(p, "offsets.npy", np.array([0, 36, 16, 52])), "offsets.npy",
                           "offsets decrease at client 1 (36 then 16)"),
    "label out of range": (_bad_label, "y.npy", "label 3 at row 5 is outside [0, 3)"),
    "test label out of range": (lambda p: _record(p, "test_y.npy", np.array([0, 1, -1, 0])), "test_y.npy",
                                "label -1 at row 2 is outside [0, 3)"),
    "missing file": (lambda p: (p / "test_y.npy").unlink(), "test_y.npy", f"missing (the manifest {PACK_MANIFEST} lists it)"),
    "wrong dtype": (lambda p: _record(p, "y.npy", np.zeros(52, dtype=np.int32)), "y.npy",
                    "int32 of shape (52,), the manifest says int64 of shape (52,)"),
    "pickled objects": (lambda p: _record(p, "test_y.npy", np.array([0, 1, 2, None], dtype=object)), "test_y.npy",
                        "not a readable .npy array (Object arrays cannot be loaded when allow_pickle=False)"),
}


@pytest.mark.parametrize("case", CASES)
def test_each_damage_is_one_line_naming_the_file(pack, tmp_path, case):
    damage, name, what = CASES[case]
    damage(pack)
    with pytest.raises(InputDataError) as err:
        PackedDataset(pack)
    assert str(err.value) == f"{pack / name}: {what}"
    with pytest.raises(ConfigError) as err:  # a run names the experiment and data.root, before writing anything
        run_experiment(EXP, out_dir=tmp_path / "run", overrides=[f"data.root={pack}", *TINY_REAL], device="cpu", log=lambda m: None)
    assert str(err.value) == f"{EXP}: data.root: {pack / name}: {what}"
    assert not (tmp_path / "run").exists()


def test_manifest_without_format_version_is_refused(pack):
    manifest = json.loads((pack / PACK_MANIFEST).read_text())
    del manifest["format_version"]
    (pack / PACK_MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(InputDataError) as err:
        PackedDataset(pack)
    assert str(err.value) == (f"{pack / PACK_MANIFEST}: no format_version (written by an older flamingo-sim); "
                              "pack the data again with flamingo-sim pack-data")


def test_only_verify_hashes_x(pack, capsys):
    with open(pack / "x.npy", "r+b") as f:  # same size, one sample changed
        f.seek(1000)
        f.write(b"\x00\x3c")
    assert PackedDataset(pack).n_clients == 3  # a load checks x's size and shape only (hashing GBs each time is too slow)
    assert main(["pack-data", "--verify", str(pack)]) == 2
    assert _error(capsys) == (f"flamingo-sim pack-data: error: {pack / 'x.npy'}: SHA-256 differs from the manifest's "
                              "(changed since it was packed; pack the data again)")


def test_a_pack_that_does_not_fit_the_experiment_is_refused_before_any_output(packed, tmp_path):
    run = tmp_path / "run"
    with pytest.raises(ConfigError) as err:
        run_experiment(EXP, out_dir=run, overrides=[f"data.root={packed}", *TINY_REAL, "data.image_size=48"], device="cpu")
    assert str(err.value) == (f"{EXP}: data.root: packed dataset {packed} holds inputs of shape 3x32x32, the experiment reads 3x48x48 "
                              "(data.image_size 48, 3 channels); pack it again with these settings (flamingo-sim pack-data) "
                              "or change data.image_size")
    with pytest.raises(ConfigError) as err:
        run_experiment(EXP, out_dir=run, overrides=[f"data.root={packed}", *TINY_REAL, "data.transform=fedscale"], device="cpu")
    assert str(err.value) == (f"{EXP}: data.root: packed dataset {packed} was packed with data.transform 'default', the experiment sets "
                              "'fedscale'; pack it again with these settings (flamingo-sim pack-data) or set data.transform to match")
    speech = ROOT / "experiments/speech_resnet34.yaml"
    with pytest.raises(ConfigError) as err:
        run_experiment(speech, out_dir=run, overrides=[f"data.root={packed}", *TINY_REAL], device="cpu")
    assert str(err.value) == f"{speech}: data.root: packed dataset {packed} holds openimage data, the experiment reads data.name 'google_speech'"
    assert not run.exists()


def test_pack_data_has_nothing_to_pack_for_the_proxy_or_a_pack(packed, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["pack-data", str(EXP), "--out", str(out)]) == 2
    assert _error(capsys) == (f"flamingo-sim pack-data: error: {EXP}: data.root: null, the generated proxy task: nothing to pack "
                              "(set data.root to a FedScale openimage layout)")
    assert main(["pack-data", str(EXP), "--out", str(out), "--set", f"data.root={packed}"]) == 2
    assert _error(capsys) == f"flamingo-sim pack-data: error: {EXP}: data.root: {packed} is a packed dataset already: nothing to pack"
    assert main(["pack-data", str(EXP), "--out", str(out), "--set", "fl.rounds=0"]) == 2  # validated as run validates
    assert _error(capsys).startswith(f"flamingo-sim pack-data: error: {EXP}: fl.rounds")
    assert main(["pack-data", "--verify", str(out), "--out", str(out)]) == 2
    assert _error(capsys) == "flamingo-sim pack-data: error: --verify DIR checks a pack and takes no EXPERIMENT, --out, --set or --workers"
    assert not out.exists()


def test_a_pack_keeps_the_fedscale_transforms_random_flip(raw, tmp_path):
    reader = FedScaleImageDataset(raw, "train", image_size=8, transform="fedscale")
    ds = PackedDataset(pack_dataset(reader, tmp_path / "pack").root)
    x = torch.arange(20 * 3 * 8 * 8, dtype=torch.float32).view(20, 3, 8, 8)  # no image is its own mirror image
    flipped = ds.train_augment(x, 1, round_idx=3, seed=7)
    assert torch.equal(flipped, reader.train_augment(x, 1, round_idx=3, seed=7))
    n_flipped = sum(torch.equal(flipped[i], x[i].flip(-1)) for i in range(20))
    assert 0 < n_flipped < 20 and n_flipped + sum(torch.equal(flipped[i], x[i]) for i in range(20)) == 20
    plain = PackedDataset(pack_dataset(FedScaleImageDataset(raw, "train", image_size=8), tmp_path / "plain").root)
    assert plain.train_augment(x, 1, round_idx=3, seed=7) is x


def test_a_speech_pack_records_its_channels(tmp_path, capsys):
    from tests.fl.data.test_speech import _write_speech

    _write_speech(tmp_path / "speech", {"s1": 16, "s2": 17})
    speech = ROOT / "experiments/speech_resnet34.yaml"
    out = tmp_path / "pack"
    sets = ["--set", f"data.root={tmp_path / 'speech'}", "--set", "data.image_size=32", "--set", "data.speech_channels=1"]
    assert main(["pack-data", str(speech), "--out", str(out), *sets]) == 0
    assert capsys.readouterr().out.startswith(f"packed dataset at {out}: 2 clients, 33 samples (+ 3 test), ")
    ds = PackedDataset(out)
    assert ds.input_shape == (1, 32, 32) and ds.n_classes == 35 and ds.augment is None
    with pytest.raises(ConfigError) as err:  # the 3-channel input of torchvision's ResNet-34
        run_experiment(speech, out_dir=tmp_path / "run", overrides=[f"data.root={out}", *TINY_REAL], device="cpu")
    assert str(err.value) == (f"{speech}: data.root: packed dataset {out} holds inputs of shape 1x32x32, the experiment reads 3x32x32 "
                              "(data.image_size 32, data.speech_channels 3); pack it again with these settings (flamingo-sim pack-data) "
                              "or change data.speech_channels")


def test_a_pack_of_the_first_clients_serves_no_more(raw, tmp_path, capsys):
    out = tmp_path / "pack"
    assert main(_pack_args(raw, out, "--set", "data.max_clients=2")) == 0
    assert capsys.readouterr().out.startswith(f"packed dataset at {out}: 2 clients, 36 samples (+ 4 test), ")
    with pytest.raises(ConfigError) as err:
        run_experiment(EXP, out_dir=tmp_path / "run", overrides=[f"data.root={out}", *TINY_REAL], device="cpu")
    assert str(err.value) == (f"{EXP}: data.root: packed dataset {out} holds at most 2 clients (data.max_clients 2 when packed), the "
                              "experiment asks for all; pack it again or set data.max_clients <= 2")
    assert not (tmp_path / "run").exists()
