"""Write the tiny bring-your-own-data fixtures shipped in experiments/data/ (deterministic).

- ``leaf_femnist_tiny/``: LEAF's FEMNIST layout, 6 writers x 16 images (28 x 28, 1 decimal),
  10 of the 62 classes used, each class a distinct stroke pattern plus noise;
- ``leaf_shakespeare_tiny/``: LEAF's Shakespeare layout, 4 speakers, 80-character windows and
  the next character;
- ``arrays_tiny/``: one ``.npz`` per client (``x`` (n, 12), ``y``) and ``test.npz``.

Run from the repository root: ``python experiments/data/make_fixtures.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

OUT = Path("experiments/data")
TEXT = (
    "To be, or not to be, that is the question: Whether 'tis nobler in the mind to suffer "
    "The slings and arrows of outrageous fortune, Or to take arms against a sea of troubles "
    "And by opposing end them. To die: to sleep; No more; and by a sleep to say we end "
    "The heart-ache and the thousand natural shocks That flesh is heir to, 'tis a consummation "
    "Devoutly to be wish'd. To die, to sleep; To sleep: perchance to dream: ay, there's the rub; "
    "For in that sleep of death what dreams may come When we have shuffled off this mortal coil, "
    "Must give us pause: there's the respect That makes calamity of so long life."
)


def leaf_file(path: Path, users: dict[str, dict[str, list]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    blob = {"users": list(users), "num_samples": [len(u["y"]) for u in users.values()], "user_data": users}
    path.write_text(json.dumps(blob, separators=(",", ":")))


def femnist(gen: np.random.Generator) -> None:
    patterns = gen.random((10, 784)) < 0.15  # a stroke mask per class

    def samples(n: int) -> dict[str, list]:
        y = gen.integers(0, 10, n)
        x = np.where(patterns[y], 0.1, 1.0) + gen.normal(0, 0.15, (n, 784))
        return {"x": np.round(np.clip(x, 0, 1), 1).tolist(), "y": y.tolist()}

    writers = [f"f{i:04d}_{gen.integers(10, 99)}" for i in range(6)]
    root = OUT / "leaf_femnist_tiny"
    leaf_file(root / "train" / "all_data_0_niid_05_keep_0_train_9.json", {w: samples(16) for w in writers})
    leaf_file(root / "test" / "all_data_0_niid_05_keep_0_test_9.json", {w: samples(4) for w in writers})


def shakespeare() -> None:
    speakers = ["THE_TRAGEDY_OF_HAMLET_HAMLET", "THE_TRAGEDY_OF_HAMLET_OPHELIA", "THE_TRAGEDY_OF_HAMLET_HORATIO", "THE_TRAGEDY_OF_HAMLET_LAERTES"]

    def windows(start: int, n: int) -> dict[str, list]:
        idx = [(start + 7 * i) % (len(TEXT) - 81) for i in range(n)]
        return {"x": [TEXT[i : i + 80] for i in idx], "y": [TEXT[i + 80] for i in idx]}

    root = OUT / "leaf_shakespeare_tiny"
    leaf_file(root / "train" / "all_data_niid_0_keep_0_train_9.json", {s: windows(60 * k, 24) for k, s in enumerate(speakers)})
    leaf_file(root / "test" / "all_data_niid_0_keep_0_test_9.json", {s: windows(60 * k + 3, 6) for k, s in enumerate(speakers)})


def arrays(gen: np.random.Generator) -> None:
    root = OUT / "arrays_tiny"
    (root / "train").mkdir(parents=True, exist_ok=True)
    w = gen.normal(size=(12, 4))

    def samples(n: int) -> tuple[np.ndarray, np.ndarray]:
        x = gen.normal(size=(n, 12)).astype(np.float32)
        return x, np.argmax(x @ w, axis=1).astype(np.int64)

    for c in range(8):
        x, y = samples(int(gen.integers(20, 60)))
        np.savez(root / "train" / f"client_{c:03d}.npz", x=x, y=y)
    x, y = samples(200)
    np.savez(root / "test.npz", x=x, y=y)


if __name__ == "__main__":
    g = np.random.default_rng(0)
    femnist(g)
    shakespeare()
    arrays(g)
