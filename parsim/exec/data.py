"""CIFAR-10 input, as in the seeds' create_dataset: the ``cifar-10-batches-bin`` layout (one
label byte then 3072 pixel bytes, R then G then B planes, per record), sharded by data-parallel
rank (``num_shards``/``shard_id`` become DistributedSampler's num_replicas/rank), and the seeds'
augmentation: random crop 32 with 4-pixel padding, horizontal flip, rescale by 1/255, normalize,
HWC -> CHW.  Without a path, a synthetic dataset of the same shape.  Nothing is downloaded.

Augmentation draws from a generator seeded by (seed, epoch, index), so a single-process reference
reproduces exactly what every rank sees.
"""

from __future__ import annotations

import glob
import os

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler

from parsim.errors import InputError
from parsim.fileio import atomic_path

RECORD_BYTES = 1 + 32 * 32 * 3
# The seeds' Normalize constants (MindSpore ResNet-50 CIFAR-10 example), kept as given.
MEAN = (0.4465, 0.4822, 0.4914)
STD = (0.2010, 0.1994, 0.2023)


def cifar_files(path: str, train: bool = True) -> list[tuple[str, int]]:
    """(file, records) of every ``data_batch_*.bin`` in ``path`` (``test_batch.bin`` with
    train=False), counted from the file sizes without reading them."""
    pattern = "data_batch_*.bin" if train else "test_batch.bin"
    files = sorted(glob.glob(os.path.join(path, pattern)))
    if not files:
        raise InputError(f"--data: no {pattern} in {path}; point it at a cifar-10-batches-bin folder")
    out = []
    for f in files:
        size = os.path.getsize(f)
        if size % RECORD_BYTES:
            raise InputError(f"{f}: {size} bytes is not a whole number of {RECORD_BYTES}-byte CIFAR records")
        out.append((f, size // RECORD_BYTES))
    return out


def check_data(data_path: str | None, kind: tuple, global_batch: int, synthetic_size: int) -> None:
    """The run's dataset must exist and fill one step; checked from file sizes, so that ``parsim
    run`` can refuse it before starting any process."""
    if kind[0] == "tokens" and data_path:
        raise InputError("--data: language-model runs use synthetic tokens for now; leave --data out")
    samples = sum(n for _, n in cifar_files(data_path)) if data_path else synthetic_size
    if samples < global_batch:
        where = f"--data {data_path}" if data_path else "--synthetic-size"
        raise InputError(f"{where}: {samples} samples cannot fill one step of the global batch ({global_batch}); "
                         f"give at least {global_batch}")


class CifarBinary(Dataset):
    """Records from every ``data_batch_*.bin`` (training) in ``path`` (``test_batch.bin`` with train=False)."""

    def __init__(self, path: str, train: bool = True):
        self.records = np.concatenate([np.fromfile(f, dtype=np.uint8).reshape(-1, RECORD_BYTES)
                                       for f, _ in cifar_files(path, train)])

    def __len__(self) -> int:
        return len(self.records)

    def raw(self, i: int) -> tuple[np.ndarray, int]:
        rec = self.records[i]
        return rec[1:].reshape(3, 32, 32).transpose(1, 2, 0), int(rec[0])   # HWC uint8, label


class SyntheticCifar(Dataset):
    """Deterministic random images and labels of CIFAR-10's shape (no file needed)."""

    def __init__(self, size: int = 50_000, seed: int = 0):
        self.size, self.seed = size, seed

    def __len__(self) -> int:
        return self.size

    def raw(self, i: int) -> tuple[np.ndarray, int]:
        rng = np.random.default_rng((self.seed, i))
        return rng.integers(0, 256, (32, 32, 3), dtype=np.uint8), int(rng.integers(0, 10))


class Augmented(Dataset):
    """The seeds' map operations over a raw dataset, reproducible per (seed, epoch, index)."""

    def __init__(self, base, image_size: int = 32, train: bool = True, seed: int = 0):
        self.base, self.image_size, self.train, self.seed, self.epoch = base, image_size, train, seed, 0
        self.mean = torch.tensor(MEAN).view(3, 1, 1)
        self.std = torch.tensor(STD).view(3, 1, 1)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.base)

    def __getitem__(self, i: int):
        img, label = self.base.raw(i)
        x = torch.from_numpy(np.ascontiguousarray(img)).permute(2, 0, 1).float()   # HWC -> CHW
        if self.train:
            rng = np.random.default_rng((self.seed, self.epoch, i))
            top, left = rng.integers(0, 9, size=2)                                 # RandomCrop(32, pad 4)
            x = torch.nn.functional.pad(x, (4, 4, 4, 4))[:, top:top + 32, left:left + 32]
            if rng.random() < 0.5:                                                 # RandomHorizontalFlip
                x = x.flip(2)
        if self.image_size != 32:                                                  # the seeds' Resize
            x = torch.nn.functional.interpolate(x[None], size=(self.image_size, self.image_size),
                                                mode="bilinear", align_corners=False)[0]
        x = (x / 255.0 - self.mean) / self.std                                     # Rescale, Normalize
        return x, label


class SyntheticTokens(Dataset):
    """Deterministic random token sequences for a language model: (tokens, the next tokens)."""

    def __init__(self, size: int, seq_len: int, vocab: int, seed: int = 0):
        self.size, self.seq_len, self.vocab, self.seed = size, seq_len, vocab, seed

    def set_epoch(self, epoch: int) -> None:
        pass                              # no augmentation: the same sequence every epoch

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, i: int):
        tokens = torch.from_numpy(np.random.default_rng((self.seed, i)).integers(0, self.vocab, self.seq_len + 1))
        return tokens[:-1], tokens[1:]


def input_kind(spec) -> tuple:
    """("image", size) for the image models, ("tokens", sequence length, vocabulary) for the GPT
    and any model whose input is integer tokens (``hf:``, or ``module:`` with an int input), its
    vocabulary read from the last layer's logits per sample, as the layer profiler does
    (parsim.profile.layers._sample_input)."""
    if spec.source.kind == "builtin" and spec.source.target == "gpt":
        from parsim.model.spec import build_module

        with torch.device("meta"):
            cfg = build_module(spec.source, spec.path).config
        return ("tokens", cfg.seq_len, cfg.vocab)
    if spec.input is not None and spec.input.dtype.startswith("int"):
        from parsim.model.graph import DTYPE_BYTES

        seq = spec.input.shape[0]
        per_sample = int(spec.graph.layers[-1].output_bytes // DTYPE_BYTES[spec.graph.dtype])   # logits per sample
        return ("tokens", seq, per_sample // seq)
    return ("image", spec.input.shape[-1])


def make_loader(data_path: str | None, batch: int, dp: int, dp_rank: int, kind: tuple, seed: int,
                synthetic_size: int = 50_000) -> tuple[DataLoader, DistributedSampler, Dataset]:
    """``kind`` from ``input_kind``: CIFAR (or synthetic images), or synthetic tokens."""
    check_data(data_path, kind, batch * dp, synthetic_size)
    if kind[0] == "tokens":
        data = SyntheticTokens(synthetic_size, kind[1], kind[2], seed)
    else:
        base = CifarBinary(data_path) if data_path else SyntheticCifar(synthetic_size, seed)
        data = Augmented(base, kind[1], train=True, seed=seed)
    sampler = DistributedSampler(data, num_replicas=dp, rank=dp_rank, shuffle=True, seed=seed, drop_last=True)
    loader = DataLoader(data, batch_size=batch, sampler=sampler, drop_last=True, num_workers=0)
    return loader, sampler, data


def write_cifar_binary(path: str, images_hwc: np.ndarray, labels: np.ndarray) -> None:
    """Write uint8 images (N, 32, 32, 3) and labels in the cifar-10-batches-bin record layout."""
    images_hwc = np.asarray(images_hwc, dtype=np.uint8)
    if images_hwc.shape[1:] != (32, 32, 3):
        raise ValueError(f"expected (N, 32, 32, 3) images, got {images_hwc.shape}")
    planes = images_hwc.transpose(0, 3, 1, 2).reshape(len(images_hwc), -1)
    records = np.concatenate([np.asarray(labels, dtype=np.uint8)[:, None], planes], axis=1)
    with atomic_path(path) as tmp:
        records.tofile(tmp)


def digits_as_cifar(out_dir: str, seed: int = 0) -> tuple[str, str]:
    """scikit-learn's 8x8 digits (1797 real images) scaled to 32x32 RGB in the CIFAR layout:
    ``data_batch_1.bin`` (1500 images) and ``test_batch.bin`` (the rest).  Needs scikit-learn."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise InputError("digits: scikit-learn is not installed; pip install -e '.[realdata]'") from None
    d = load_digits()
    imgs = (d.images * (255.0 / 16.0)).astype(np.uint8)                  # 0..16 -> 0..255
    imgs = imgs.repeat(4, axis=1).repeat(4, axis=2)                        # 8x8 -> 32x32
    imgs = np.repeat(imgs[..., None], 3, axis=3)                           # gray -> RGB
    order = np.random.default_rng(seed).permutation(len(imgs))
    imgs, labels = imgs[order], d.target[order]
    os.makedirs(out_dir, exist_ok=True)
    train, test = os.path.join(out_dir, "data_batch_1.bin"), os.path.join(out_dir, "test_batch.bin")
    write_cifar_binary(train, imgs[:1500], labels[:1500])
    write_cifar_binary(test, imgs[1500:], labels[1500:])
    return train, test
