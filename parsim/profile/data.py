"""``parsim profile-data``: time the executor's own input loader on this machine and write it into
a cluster profile's ``input_pipeline:`` section (priced by parsim.cost.input).

The loader is the one ``parsim run`` uses (parsim/exec/data.py ``make_loader``: CIFAR records or
synthetic CIFAR-shaped images, random crop with 4-pixel padding, flip, normalize, HWC -> CHW,
DataLoader with num_workers=0), in one thread, so the section it writes is an inline loader
(``overlap: false``) with the median seconds per sample over the repeats.
"""

from __future__ import annotations

import datetime
import os
import platform
import re
import statistics
import time
from dataclasses import dataclass

from parsim.errors import InputError

SECTION = re.compile(r"^input_pipeline:")
SAMPLE_ELEMENTS = 3 * 32 * 32      # what the loader yields per sample (CHW float32)


@dataclass(frozen=True)
class LoaderTiming:
    samples: int               # per repeat
    batch: int
    per_sample_s: tuple[float, ...]   # one per repeat

    @property
    def median_s(self) -> float:
        return statistics.median(self.per_sample_s)

    @property
    def samples_per_s(self) -> float:
        return 1.0 / self.median_s

    @property
    def spread(self) -> float:
        """(max - min) / median over the repeats."""
        return (max(self.per_sample_s) - min(self.per_sample_s)) / self.median_s


def time_loader(data_path: str | None, samples: int, batch: int, repeats: int, seed: int = 0) -> LoaderTiming:
    """Per-sample seconds of iterating ``samples`` samples (whole batches) through the executor's
    loader, ``repeats`` times after one untimed pass, in one thread."""
    import torch

    from parsim.exec.data import make_loader

    if samples < batch:
        raise InputError(f"--samples {samples}: time at least one batch of {batch}; raise --samples or lower --batch")
    torch.set_num_threads(1)
    loader, sampler, _ = make_loader(data_path, batch, 1, 0, ("image", 32), seed, synthetic_size=samples)
    batches = samples // batch
    if len(loader) < batches:
        raise InputError(f"--samples {samples}: {data_path} holds only {len(loader) * batch} samples; lower --samples")

    def one_pass(epoch: int) -> float:
        sampler.set_epoch(epoch)
        loader.dataset.set_epoch(epoch)
        t = time.perf_counter()
        for i, _ in enumerate(loader):
            if i + 1 == batches:
                break
        return (time.perf_counter() - t) / (batches * batch)

    one_pass(0)                                 # warm-up: page in records, first allocations
    return LoaderTiming(batches * batch, batch, tuple(one_pass(e + 1) for e in range(repeats)))


def machine() -> str:
    return f"{platform.node() or 'host'} ({platform.machine()}, {os.cpu_count()} cores, {platform.system()})"


def section_text(timing: LoaderTiming, command: str, source: str) -> str:
    today = datetime.date.today().isoformat()
    return (f"# input_pipeline measured {today} by `{command}`: the executor's loader ({source}), one thread, "
            f"{len(timing.per_sample_s)} repeats of {timing.samples} samples in batches of {timing.batch}:\n"
            f"# input_pipeline median {timing.median_s * 1e6:.1f} us per sample ({timing.samples_per_s:,.0f} samples/s), "
            f"spread (max - min) / median {timing.spread:.1%}\n"
            "input_pipeline:\n"
            "  overlap: false   # inline in the training process (DataLoader num_workers=0), as parsim run loads\n"
            f"  per_sample_s: {timing.median_s:.4g}   # measured: median over repeats\n"
            f"  sample_elements: {SAMPLE_ELEMENTS}   # the input it is for: 3 x 32 x 32 images (other models: not priced)\n"
            f"  measured: {{date: '{today}', machine: '{machine()}', command: '{command}'}}\n")


def replace_section(text: str, section: str) -> str:
    """``text`` (a profile YAML) with its top-level input_pipeline block, and the comment lines
    profile-data put above it, replaced by ``section`` (appended where there was none)."""
    lines = text.splitlines(keepends=True)
    out, i = [], 0
    while i < len(lines):
        line = lines[i]
        if line.startswith(("# input_pipeline measured", "# input_pipeline median")):
            i += 1
            continue
        if SECTION.match(line):
            i += 1
            while i < len(lines) and (lines[i][:1] in (" ", "\t") or not lines[i].strip()):
                i += 1
            continue
        out.append(line)
        i += 1
    body = "".join(out)
    if body and not body.endswith("\n"):
        body += "\n"
    return body + section


def check_target(path: str) -> None:
    """The profile to update must exist and load; ``parsim profile-data`` checks it before timing."""
    from parsim.hardware.cluster import load_profile

    if not os.path.isfile(path):
        raise InputError(f"-o {path}: no cluster profile there to update; give an existing profile YAML "
                         f"(e.g. one written by parsim profile-comm, or a copy of hardware_profiles/local-cpu.yaml)")
    load_profile(path)                         # a broken profile is reported under its own name


def write_section(path: str, section: str) -> None:
    """Update the profile at ``path`` atomically; the result must load as a profile."""
    from parsim.fileio import atomic_path
    from parsim.hardware.cluster import load_profile
    from parsim.inputs import read_text

    check_target(path)
    text = replace_section(read_text(path), section)
    with atomic_path(path) as tmp:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        load_profile(tmp)
