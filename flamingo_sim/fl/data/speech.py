"""Google Speech Commands in FedScale's client-partitioned layout, as log-mel "images".

The layout is FedScale's (see :class:`~flamingo_sim.fl.data.openimage.FedScaleLayout`): mapping files
``root/client_data_mapping/{train,test}.csv`` (e.g. ``client_id,data_path,label_name,label_id``)
and one WAV file per row at ``root/<train|test>/<sample_path>`` (16 kHz mono 16-bit PCM, about
1 s, 35 keyword classes). As FedScale's ``SPEECH`` reader does, the label is the keyword in the
second-to-last field, numbered by its position in FedScale's keyword list :data:`CLASSES`
(so there are always 35 classes); the last field is not read.

Each clip becomes a spectrogram image the way FedScale feeds ResNet-34 (a 32-band mel
spectrogram of a 1 s clip, in dB relative to the clip's maximum), computed here with the
standard library's :mod:`wave`, numpy and :func:`torch.stft`:

1. read the PCM samples, scale to [-1, 1) (several channels are averaged);
2. fix the duration to ``clip_s`` (1 s = 16,000 samples): longer clips are cropped at the
   end, shorter ones zero-padded at the end;
3. power spectrogram: ``|STFT|^2`` with a Hann window of ``n_fft`` = 2048 samples (128 ms),
   hop ``hop_length`` = 512 samples (32 ms), frames centred with zero padding, so a 1 s clip
   gives ``1 + 16000 // 512 = 32`` frames;
4. ``n_mels`` = 32 triangular mel filters (HTK mel scale ``2595 log10(1 + f / 700)``, band
   edges evenly spaced in mel from 0 Hz to ``sample_rate / 2``, peak weight 1);
5. dB relative to the clip's largest value, floored at ``-top_db`` = -80 dB, so every value
   lies in [-80, 0] (silence, all zero, maps to 0 dB everywhere);
6. resized bilinearly to ``image_size`` x ``image_size`` (a no-op at 32), rows are mel bands
   (row 0 the lowest) and columns time frames;
7. normalised with a fixed affine map ``(dB + top_db / 2) / (top_db / 2)``, i.e.
   ``(dB + 40) / 40``, into [-1, 1] (fixed, so no pass over the data is needed and reading
   stays lazy); with ``channels`` 1 (FedScale's input, 1 x 32 x 32, for its own one-channel
   ResNet-34, model ``resnet34_speech``) it stays one channel, with ``channels`` 3 (the
   default) it is repeated to 3 identical channels so the torchvision ResNet-34 (3-channel
   first convolution) takes it unchanged.

Departures from FedScale's pipeline: no training-time augmentation (amplitude, speed, stretch,
time shift, background noise), the HTK mel scale with unnormalised triangles instead of
librosa's Slaney default, and the fixed normalisation of step 7.
"""

from __future__ import annotations

import wave
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from flamingo_sim.errors import InputDataError
from flamingo_sim.fl.data.openimage import FedScaleLayout

__all__ = ["CLASSES", "FedScaleSpeechDataset", "read_wav", "fix_length", "mel_filterbank", "log_mel_spectrogram", "hz_to_mel", "mel_to_hz"]

SAMPLE_RATE_HZ = 16_000
N_FFT = 2048
HOP_LENGTH = 512
N_MELS = 32
TOP_DB = 80.0
#: Google Speech Commands v2 keywords in the order of FedScale's ``SPEECH`` reader: label = position.
CLASSES = (
    "up", "two", "sheila", "zero", "yes", "five", "one", "happy", "marvin", "no", "go", "seven", "eight", "tree", "stop",
    "down", "forward", "learn", "house", "three", "six", "backward", "dog", "cat", "wow", "left", "off", "on", "four",
    "visual", "nine", "bird", "right", "follow", "bed",
)
_CLASS_INDEX = {name: i for i, name in enumerate(CLASSES)}


def hz_to_mel(f_hz):
    """HTK mel scale: ``2595 log10(1 + f / 700)``."""
    return 2595.0 * np.log10(1.0 + np.asarray(f_hz, dtype=np.float64) / 700.0)


def mel_to_hz(mel):
    """Inverse of :func:`hz_to_mel`."""
    return 700.0 * (10.0 ** (np.asarray(mel, dtype=np.float64) / 2595.0) - 1.0)


def mel_filterbank(sample_rate_hz: int, n_fft: int, n_mels: int, f_min_hz: float = 0.0, f_max_hz: float | None = None) -> np.ndarray:
    """Triangular mel filters, shape ``(n_mels, n_fft // 2 + 1)``, peak weight 1.

    Filter ``m`` rises linearly (in Hz) from edge ``m`` to edge ``m + 1`` and falls to edge
    ``m + 2``, where the ``n_mels + 2`` edges are evenly spaced on the mel scale between
    ``f_min_hz`` and ``f_max_hz`` (default ``sample_rate_hz / 2``).
    """
    f_max_hz = sample_rate_hz / 2 if f_max_hz is None else f_max_hz
    if n_mels < 1 or n_fft < 2 or not 0 <= f_min_hz < f_max_hz <= sample_rate_hz / 2:
        raise ValueError(f"bad mel filterbank parameters: n_mels={n_mels}, n_fft={n_fft}, f_min={f_min_hz}, f_max={f_max_hz}")
    bins_hz = np.arange(n_fft // 2 + 1) * sample_rate_hz / n_fft
    edges_hz = mel_to_hz(np.linspace(hz_to_mel(f_min_hz), hz_to_mel(f_max_hz), n_mels + 2))
    lower, centre, upper = edges_hz[:-2, None], edges_hz[1:-1, None], edges_hz[2:, None]
    rising = (bins_hz - lower) / (centre - lower)
    falling = (upper - bins_hz) / (upper - centre)
    return np.maximum(0.0, np.minimum(rising, falling))


def read_wav(path: str | Path) -> tuple[np.ndarray, int]:
    """``(samples float32 in [-1, 1), sample rate in Hz)`` of a 16-bit PCM WAV file.

    Raises :class:`wave.Error` for a file that is not a PCM WAV or is truncated, and
    :class:`ValueError` for a sample width other than 16 bits.
    """
    try:
        wav = wave.open(str(path), "rb")
    except EOFError:
        raise wave.Error("truncated WAV file") from None
    with wav:
        width = wav.getsampwidth()
        channels = wav.getnchannels()
        rate = wav.getframerate()
        if width != 2:
            raise ValueError(f"{8 * width}-bit samples, expected 16-bit PCM")
        raw = wav.readframes(wav.getnframes())
    usable = len(raw) // (2 * channels) * (2 * channels)  # a truncated data chunk ends mid-frame
    samples = np.frombuffer(raw[:usable], dtype="<i2").astype(np.float32) / 32768.0
    if channels > 1:
        samples = samples.reshape(-1, channels).mean(axis=1)
    return samples, rate


def fix_length(samples: np.ndarray, n: int) -> np.ndarray:
    """The first ``n`` samples, zero-padded at the end if there are fewer."""
    if len(samples) >= n:
        return samples[:n]
    return np.pad(samples, (0, n - len(samples)))


def log_mel_spectrogram(
    waves: Tensor,
    filterbank: Tensor,
    n_fft: int = N_FFT,
    hop_length: int = HOP_LENGTH,
    top_db: float = TOP_DB,
) -> Tensor:
    """dB mel spectrograms ``(batch, n_mels, frames)`` of ``waves`` ``(batch, samples)``.

    Values are relative to each clip's maximum and floored at ``-top_db``, so they lie in
    ``[-top_db, 0]``; ``frames = 1 + samples // hop_length`` (centred frames).
    """
    window = torch.hann_window(n_fft, dtype=waves.dtype)
    spec = torch.stft(waves, n_fft, hop_length=hop_length, window=window, center=True, pad_mode="constant", return_complex=True)
    mel = filterbank.to(waves.dtype) @ spec.abs().square()  # (n_mels, bins) @ (batch, bins, frames)
    db = 10.0 * torch.log10(mel.clamp_min(1e-10))
    ref = db.amax(dim=(1, 2), keepdim=True)
    return torch.maximum(db - ref, torch.tensor(-top_db, dtype=db.dtype))


class FedScaleSpeechDataset(FedScaleLayout):
    """Google Speech clips in FedScale's layout as ``channels`` x ``image_size`` x ``image_size`` log-mel images.

    The preprocessing (steps, parameters, departures from FedScale) is described in the module
    docstring. Client partitioning, filtering, laziness and errors are
    :class:`~flamingo_sim.fl.data.openimage.FedScaleLayout`'s; an audio file that is missing, not a WAV,
    or not 16-bit PCM is an :class:`~flamingo_sim.errors.InputDataError` naming the mapping
    file's line and the audio file, raised when its client is first read. A clip whose sample
    rate differs from ``sample_rate_hz`` is an error too (nothing is resampled).
    """

    SAMPLE_KIND = "audio"
    READ_ERRORS = (wave.Error, ValueError, OSError)
    MIN_FIELDS = 4
    FIELDS_HINT = "client id, sample file, ..., label name, label id"

    def __init__(
        self,
        root: str | Path,
        split: str = "train",
        image_size: int = 32,
        max_clients: int | None = None,
        min_samples_per_client: int = 16,
        max_test_samples: int | None = None,
        n_classes: int | None = None,
        cache_clients: int = 64,
        sample_rate_hz: int = SAMPLE_RATE_HZ,
        clip_s: float = 1.0,
        n_fft: int = N_FFT,
        hop_length: int = HOP_LENGTH,
        n_mels: int = N_MELS,
        top_db: float = TOP_DB,
        channels: int = 3,
    ) -> None:
        if image_size < 1:
            raise ValueError(f"image_size must be >= 1, got {image_size}")
        if channels not in (1, 3):
            raise ValueError(f"channels must be 1 or 3, got {channels}")
        if clip_s <= 0 or hop_length < 1 or top_db <= 0:
            raise ValueError(f"need clip_s > 0, hop_length >= 1 and top_db > 0, got {clip_s}, {hop_length}, {top_db}")
        self._filterbank = torch.from_numpy(mel_filterbank(sample_rate_hz, n_fft, n_mels)).to(torch.float32)
        super().__init__(root, split, max_clients, min_samples_per_client, max_test_samples,
                         len(CLASSES) if n_classes is None else n_classes, cache_clients)
        self.image_size = int(image_size)
        self.channels = int(channels)
        self.input_shape: tuple[int, ...] = (self.channels, self.image_size, self.image_size)
        self.sample_rate_hz = int(sample_rate_hz)
        self.clip_samples = int(round(clip_s * sample_rate_hz))
        self.n_fft, self.hop_length, self.n_mels, self.top_db = int(n_fft), int(hop_length), int(n_mels), float(top_db)
        self.n_frames = 1 + self.clip_samples // self.hop_length
        self.name = f"fedscale-speech:{self.root.name}"
        self.description = (
            f"FedScale Google Speech dataset at {self.root} {self._layout_summary()}, "
            f"{clip_s:g} s clips at {self.sample_rate_hz} Hz as {self.n_mels}-band log-mel spectrograms "
            f"(n_fft {self.n_fft}, hop {self.hop_length}, {self.n_frames} frames) resized to "
            f"{self.image_size}x{self.image_size}, {self.channels} channel{'s' if self.channels > 1 else ''}; {self._dropped_summary()}"
        )

    def _label(self, fields: list[str], path: Path, line: int) -> int:
        """FedScale's: the keyword in the second-to-last field, numbered by :data:`CLASSES`."""
        label = _CLASS_INDEX.get(fields[-2].strip())
        if label is None:
            raise InputDataError(f"{path}: line {line}: label name {fields[-2]!r} (second-to-last field) is not one of the 35 keywords")
        return label

    def _read_sample(self, path: Path) -> Tensor:
        samples, rate = read_wav(path)
        if rate != self.sample_rate_hz:
            raise ValueError(f"sample rate {rate} Hz, expected {self.sample_rate_hz} Hz")
        return torch.from_numpy(fix_length(samples, self.clip_samples))

    def _collate(self, samples: list[Tensor]) -> Tensor:
        return self.images(torch.stack(samples))

    def images(self, waves: Tensor) -> Tensor:
        """Fixed-length clips ``(n, clip_samples)`` -> normalised images ``(n, *input_shape)``."""
        db = log_mel_spectrogram(waves.to(torch.float32), self._filterbank, self.n_fft, self.hop_length, self.top_db)
        img = db.unsqueeze(1)  # (n, 1, n_mels, frames)
        size = (self.image_size, self.image_size)
        if tuple(img.shape[-2:]) != size:
            img = torch.nn.functional.interpolate(img, size=size, mode="bilinear", align_corners=False)
        img = (img + self.top_db / 2) / (self.top_db / 2)
        return img.expand(-1, self.channels, -1, -1).contiguous()

