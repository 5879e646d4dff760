"""Tiny data sets in FedScale's real layouts, written from scratch: OpenImage (PNG images) and Google Speech (WAV clips).

Used by the data tests, the run and pack tests, and ``benchmarks/reproduce_real.py`` (random data in the real
layouts, the whole real-data path of ``reproduce`` on a CPU).
"""

from __future__ import annotations

import wave
from pathlib import Path

import numpy as np
from PIL import Image

__all__ = ["COLORS", "RATE", "TONES_HZ", "WORDS", "write_openimage", "write_speech", "write_wav", "tone"]

COLORS = [(255, 0, 0), (0, 255, 0), (0, 0, 255)]
RATE = 16_000
TONES_HZ = (500.0, 1000.0, 4000.0)  # class k is a sine tone of TONES_HZ[k]
WORDS = ("up", "two", "sheila")  # labels 0, 1, 2 in FedScale's keyword order (speech.CLASSES)


def write_openimage(root: Path, clients: dict[str, int], n_test: int = 4) -> None:
    """A tiny OpenImage-layout dataset: client -> number of samples; label = i % 3."""
    (root / "client_data_mapping").mkdir(parents=True)
    for split, rows in (("train", [(c, i) for c, n in clients.items() for i in range(n)]), ("test", [("t", i) for i in range(n_test)])):
        (root / split).mkdir()
        lines = ["client_id,sample_path,label_name,label_id"]
        for c, i in rows:
            label = i % 3
            name = f"{c}_{i}.png"
            Image.new("RGB", (10 + i, 8), COLORS[label]).save(root / split / name)
            lines.append(f"{c},{name},class{label},{label}")
        (root / "client_data_mapping" / f"{split}.csv").write_text("\n".join(lines) + "\n")


def write_wav(path: Path, samples: np.ndarray, rate: int = RATE, width: int = 2, channels: int = 1) -> None:
    with wave.open(str(path), "wb") as wav:
        wav.setnchannels(channels)
        wav.setsampwidth(width)
        wav.setframerate(rate)
        if width == 2:
            frames = (np.clip(samples, -1, 1 - 2**-15) * 32768).astype("<i2").tobytes()
        else:
            frames = (samples * 127 + 128).astype(np.uint8).tobytes()
        wav.writeframes(frames)


def tone(freq_hz: float, seconds: float = 1.0, amplitude: float = 0.5) -> np.ndarray:
    t = np.arange(int(seconds * RATE)) / RATE
    return amplitude * np.sin(2 * np.pi * freq_hz * t)


def write_speech(root: Path, clients: dict[str, int], n_test: int = 3) -> None:
    """A tiny Google Speech-layout dataset: client -> number of clips; label = i % 3 (keyword WORDS[i % 3]).

    Clip lengths vary around 1 s (0.8 s to 1.1 s) to exercise padding and cropping.
    """
    (root / "client_data_mapping").mkdir(parents=True)
    for split, rows in (("train", [(c, i) for c, n in clients.items() for i in range(n)]), ("test", [("t", i) for i in range(n_test)])):
        lines = ["client_id,data_path,label_name,label_id"]
        for c, i in rows:
            label = i % 3
            rel = f"{WORDS[label]}/{c}_nohash_{i}.wav"  # FedScale keeps the keyword folders
            (root / split / WORDS[label]).mkdir(parents=True, exist_ok=True)
            write_wav(root / split / rel, tone(TONES_HZ[label], seconds=0.8 + 0.1 * (i % 4)))
            lines.append(f"{c},{rel},{WORDS[label]},{label}")
        (root / "client_data_mapping" / f"{split}.csv").write_text("\n".join(lines) + "\n")
