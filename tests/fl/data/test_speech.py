"""Google Speech in FedScale's layout: WAV reading, log-mel images, errors, and a run end to end."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from flamingo_sim.errors import ConfigError, InputDataError
from flamingo_sim.fl.data.base import FederatedDataset
from flamingo_sim.fl.data.speech import FedScaleSpeechDataset, fix_length, hz_to_mel, log_mel_spectrogram, mel_filterbank, mel_to_hz, read_wav
from tests.layouts import RATE, TONES_HZ, WORDS  # noqa: F401 - names the tests below use
from tests.layouts import tone as _tone
from tests.layouts import write_speech as _write_speech
from tests.layouts import write_wav as _write_wav

ROOT = Path(__file__).resolve().parents[3]

# ---------------------------------------------------------------- signal processing


def test_read_wav_scales_pcm_and_averages_channels(tmp_path):
    _write_wav(tmp_path / "m.wav", np.array([0.0, 0.5, -0.5, -1.0]))
    samples, rate = read_wav(tmp_path / "m.wav")
    assert rate == RATE and samples.dtype == np.float32
    assert samples.tolist() == [0.0, 0.5, -0.5, -1.0]
    _write_wav(tmp_path / "s.wav", np.array([0.5, 0.25, -0.5, 0.0]), channels=2)  # two stereo frames
    assert read_wav(tmp_path / "s.wav")[0].tolist() == [0.375, -0.25]
    assert fix_length(np.ones(3, np.float32), 5).tolist() == [1, 1, 1, 0, 0]
    assert fix_length(np.arange(6, dtype=np.float32), 4).tolist() == [0, 1, 2, 3]


def test_mel_filterbank_by_hand():
    assert float(hz_to_mel(700.0)) == pytest.approx(2595 * np.log10(2))
    assert float(mel_to_hz(hz_to_mel(1234.0))) == pytest.approx(1234.0)
    fb = mel_filterbank(RATE, 2048, 32)
    assert fb.shape == (32, 1025) and fb.min() == 0.0 and fb.max() <= 1.0
    # 34 edges evenly spaced in mel over [0, 8000 Hz]: filter m peaks at edge m + 1
    step = 2595 * np.log10(1 + 8000 / 700) / 33
    centre_hz = 700 * (10 ** (step * np.arange(1, 33) / 2595) - 1)
    peak_bins = fb.argmax(axis=1)
    assert np.all(np.abs(peak_bins * RATE / 2048 - centre_hz) <= RATE / 2048 / 2 + 1e-9)


@pytest.mark.parametrize(
    "freq_hz, band",
    # mel(500 Hz) = 607.4 and mel(4000 Hz) = 2146.1; the band step is mel(8000 Hz) / 33 = 86.06,
    # so 500 Hz sits at edge 7.06 (centre of filter 6) and 4000 Hz at edge 24.94 (filter 24).
    [(500.0, 6), (4000.0, 24)],
)
def test_pure_tone_energy_lands_in_its_mel_band(freq_hz, band):
    fb = torch.from_numpy(mel_filterbank(RATE, 2048, 32)).float()
    db = log_mel_spectrogram(torch.tensor(_tone(freq_hz), dtype=torch.float32)[None], fb)
    assert db.shape == (1, 32, 1 + RATE // 512)
    assert float(db.max()) == 0.0 and float(db.min()) >= -80.0
    profile = db[0, :, 2:-2].mean(dim=1)  # away from the zero-padded edge frames
    assert int(profile.argmax()) == band
    assert float(profile[band]) > -1.0
    far = torch.cat([profile[: band - 2], profile[band + 3 :]])
    assert float(far.max()) < -60.0  # nothing 60 dB near the tone two bands away


# ---------------------------------------------------------------- the dataset


def test_reads_layout_as_three_channel_images(tmp_path):
    _write_speech(tmp_path, {"spk9": 5, "spk1": 2, "spk5": 6})
    ds = FedScaleSpeechDataset(tmp_path, "train", image_size=32, min_samples_per_client=3)
    assert isinstance(ds, FederatedDataset)
    assert ds.n_clients == 2 and list(ds.client_keys) == ["spk9", "spk5"]  # spk1 (2 < 3) dropped
    assert ds.samples_per_client.tolist() == [5, 6] and ds.n_classes == 35
    assert ds.input_shape == (3, 32, 32) and ds.n_frames == 32
    x, y = ds.client_data(1)
    assert x.shape == (6, 3, 32, 32) and x.dtype == torch.float32
    assert y.tolist() == [0, 1, 2, 0, 1, 2]
    assert torch.equal(x[:, 0], x[:, 1]) and torch.equal(x[:, 0], x[:, 2])
    assert float(x.max()) == pytest.approx(1.0) and float(x.min()) >= -1.0  # (dB + 40) / 40
    # the tone's band is brightest: 500 Hz -> row 6, 1000 Hz -> rows 10-11, 4000 Hz -> row 24
    rows = x[:3, 0, :, 4:20].mean(dim=2).argmax(dim=1).tolist()
    assert rows[0] == 6 and rows[1] in (10, 11) and rows[2] == 24
    xt, yt = ds.test_data()
    assert xt.shape == (3, 3, 32, 32) and yt.tolist() == [0, 1, 2]
    assert ds.description.startswith(f"FedScale Google Speech dataset at {tmp_path} (train split): 2 clients, 11 samples, 35 classes")
    assert FedScaleSpeechDataset(tmp_path, image_size=16, min_samples_per_client=3).client_data(0)[0].shape == (5, 3, 16, 16)


def test_deterministic_lazy_and_cached(tmp_path):
    _write_speech(tmp_path, {"a": 4, "b": 4, "c": 4})
    (tmp_path / "train" / "two" / "c_nohash_1.wav").unlink()  # only client 2 is broken
    ds = FedScaleSpeechDataset(tmp_path, min_samples_per_client=1, cache_clients=1)
    assert ds.n_read == 0  # nothing read at construction
    first = ds.client_data(0)[0].clone()
    ds.client_data(0)
    assert ds.n_read == 1  # cached
    ds.client_data(1)  # evicts client 0
    assert torch.equal(ds.client_data(0)[0], first) and ds.n_read == 3
    assert torch.equal(FedScaleSpeechDataset(tmp_path, min_samples_per_client=1).client_data(0)[0], first)
    with pytest.raises(InputDataError, match=r"train\.csv: line 11: audio .*c_nohash_1\.wav not found"):
        ds.client_data(2)


def test_missing_mapping_too_few_fields_and_unknown_keyword(tmp_path):
    with pytest.raises(InputDataError, match=r"client_data_mapping.train\.csv.*not found"):
        FedScaleSpeechDataset(tmp_path)
    _write_speech(tmp_path, {"a": 3})
    test_csv = tmp_path / "client_data_mapping" / "test.csv"
    test_csv.write_text("client_id,sample_path,label_id\nt,up/t_nohash_0.wav,0\n")
    with pytest.raises(InputDataError) as exc:
        FedScaleSpeechDataset(tmp_path, min_samples_per_client=1)
    assert str(exc.value) == f"{test_csv}: line 2: 3 field(s), expected at least 4 (client id, sample file, ..., label name, label id)"
    test_csv.write_text("client_id,sample_path,label_name,label_id\nt,up/t_nohash_0.wav,up,0\nt,up/t_nohash_1.wav,word0,0\n")
    with pytest.raises(InputDataError) as exc:
        FedScaleSpeechDataset(tmp_path, min_samples_per_client=1)
    assert str(exc.value) == f"{test_csv}: line 3: label name 'word0' (second-to-last field) is not one of the 35 keywords"


def test_label_is_the_keyword_by_fedscales_class_order(tmp_path):
    """FedScale's SPEECH reader: label = CLASSES.index(row[-2]); the last field is not read."""
    from flamingo_sim.fl.data.speech import CLASSES

    assert len(CLASSES) == len(set(CLASSES)) == 35 and CLASSES[:3] == WORDS and CLASSES[-1] == "bed"
    _write_speech(tmp_path, {"a": 3})
    path = tmp_path / "client_data_mapping" / "train.csv"
    lines = path.read_text().splitlines()
    lines[1] = lines[1].replace(",up,0", ",bed,7")  # label id 7 is ignored: 'bed' is class 34
    path.write_text("\n".join(lines) + "\n")
    assert FedScaleSpeechDataset(tmp_path, min_samples_per_client=1).client_data(0)[1].tolist() == [34, 1, 2]


def test_one_channel_fedscale_input(tmp_path):
    _write_speech(tmp_path, {"a": 3})
    three = FedScaleSpeechDataset(tmp_path, min_samples_per_client=1).client_data(0)[0]
    one = FedScaleSpeechDataset(tmp_path, min_samples_per_client=1, channels=1)
    assert one.input_shape == (1, 32, 32) and "1 channel;" in one.description
    x = one.client_data(0)[0]
    assert x.shape == (3, 1, 32, 32) and torch.equal(x[:, 0], three[:, 0])


@pytest.mark.parametrize(
    "write, message",
    [
        (lambda p: p.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64)), r"unreadable \(file does not start with RIFF id\)"),
        (lambda p: _write_wav(p, _tone(500.0), width=1), r"unreadable \(8-bit samples, expected 16-bit PCM\)"),
        (lambda p: _write_wav(p, _tone(500.0), rate=8000), r"unreadable \(sample rate 8000 Hz, expected 16000 Hz\)"),
        (lambda p: p.write_bytes(b"RIFF"), r"unreadable \(truncated WAV file\)"),
    ],
    ids=["not-wav", "8-bit", "8-kHz", "truncated"],
)
def test_bad_audio_names_file_and_line(tmp_path, write, message):
    _write_speech(tmp_path, {"a": 3})
    write(tmp_path / "train" / "sheila" / "a_nohash_2.wav")
    ds = FedScaleSpeechDataset(tmp_path, min_samples_per_client=1)
    with pytest.raises(InputDataError, match=r"train\.csv: line 4: audio .*a_nohash_2\.wav " + message):
        ds.client_data(0)


# ---------------------------------------------------------------- wired into a run


@pytest.mark.slow
def test_speech_experiment_trains_resnet34_on_the_layout(tmp_path):
    from flamingo_sim.fl.runner.run import run_experiment
    from tests.fl.runner.test_run import TINY_REAL

    root = tmp_path / "google_speech"
    _write_speech(root, {"a": 16, "b": 17, "c": 16, "d": 5})
    result = run_experiment(
        ROOT / "experiments/speech_resnet34.yaml",
        out_dir=tmp_path / "run",
        overrides=[f"data.root={root}", *TINY_REAL],
        log=lambda m: None,
    )
    assert result.summary["data"].startswith(f"FedScale Google Speech dataset at {root} (train split): 3 clients, 49 samples, 35 classes")
    assert "1 clients left out" in result.summary["data"] and "NOT real data" not in result.summary["data"]
    assert result.metrics["n_kept"].tolist() == [0, 2, 2]  # round 0 (the initial model), then 2 rounds
    assert result.metrics["accuracy"].notna().all()


@pytest.mark.slow
def test_speech_experiment_with_fedscales_one_channel_resnet34(tmp_path):
    from flamingo_sim.fl.runner.run import run_experiment
    from tests.fl.runner.test_run import TINY_REAL

    root = tmp_path / "google_speech"
    _write_speech(root, {"a": 21, "b": 20, "c": 22})
    result = run_experiment(
        ROOT / "experiments/speech_resnet34.yaml",
        out_dir=tmp_path / "run",
        overrides=[f"data.root={root}", *TINY_REAL, "data.speech_channels=1", "data.filter_less=21"],
        log=lambda m: None,
    )
    assert result.summary["data"].startswith(f"FedScale Google Speech dataset at {root} (train split): 2 clients, 43 samples, 35 classes")
    assert "32x32, 1 channel;" in result.summary["data"] and "1 clients left out (fewer than 21 samples" in result.summary["data"]
    assert result.metrics["accuracy"].notna().all()


def test_broken_speech_root_is_a_config_error(tmp_path):
    from flamingo_sim.fl.runner.run import run_experiment

    root = tmp_path / "google_speech"
    root.mkdir()
    with pytest.raises(ConfigError, match=r"speech_resnet34\.yaml: data\.root: .*client_data_mapping.train\.csv: mapping file not found"):
        run_experiment(ROOT / "experiments/speech_resnet34.yaml", out_dir=tmp_path / "run", overrides=[f"data.root={root}"], log=lambda m: None)


def test_real_data_of_another_name_is_a_config_error(tmp_path):
    from flamingo_sim.fl.runner.run import run_experiment

    with pytest.raises(ConfigError, match=r"data\.name: real 'synthetic' data cannot be read \(only 'openimage', 'google_speech', 'arrays', 'leaf'\)"):
        run_experiment(ROOT / "experiments/speech_resnet34.yaml", out_dir=tmp_path / "run",
                       overrides=[f"data.root={tmp_path}", "data.name=synthetic"], log=lambda m: None)
