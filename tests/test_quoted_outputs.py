"""The `parsim simulate` outputs the docs quote are the ones parsim prints now.

Each file under results/simulated/ (and docs/frameworks.md's priced configs, results/frameworks/
*.simulate.txt, made by docs/make_frameworks.sh) records its commands on `$ ` lines, each followed
by what it printed.  Every `$ parsim simulate` command is run again here and its step line (the step time,
its band, bubble, waits and exposed communication) must equal the committed one: a change of the
cost model, a profile or the residuals behind the bands that moves a quoted figure turns this red
until the file is made again (its header says how) and the docs say the new figure.  Plans
(`$ parsim plan`) search for seconds to minutes each; the two that take seconds, the README's
quick start among them, are run again here whole (FAST_PLANS: every line they print, the search
time left out as rerun.py leaves it out); the others are made again by
results/simulated/machines/regenerate.sh and the commands in their headers (four of them had gone
stale by a refit's fourth digit before the fast ones were checked).
"""

from __future__ import annotations

import glob
import re
import shlex

import pytest

from parsim.cli import main

FILES = sorted(glob.glob("results/simulated/**/*.txt", recursive=True)
               + glob.glob("results/frameworks/*.simulate.txt"))     # docs/frameworks.md's priced configs


def _quoted_simulations() -> list[tuple[str, str, str]]:
    """(file, command, the committed step line) of every `$ parsim simulate` in FILES."""
    out = []
    for path in FILES:
        lines = open(path).read().splitlines()
        for i, line in enumerate(lines):
            if not line.startswith("$ parsim simulate "):
                continue
            block = []
            for later in lines[i + 1:]:
                if later.startswith("$ "):
                    break
                block.append(later)
            step = next((x for x in block if x.startswith("step ")), None)
            assert step is not None, f"{path}: `{line}` is followed by no step line"
            out.append((path, line[2:], step))
    return out


QUOTED = _quoted_simulations()


def test_the_quoted_simulations_are_found():
    """The files the docs quote hold simulate commands (the parse above is not vacuous)."""
    assert len(QUOTED) >= 10
    assert {p for p, _, _ in QUOTED} >= {"results/simulated/2026-11-30-options.txt",
                                          "results/simulated/2026-11-30-network-tiers.txt",
                                          "results/frameworks/gpt_plan.megatron.simulate.txt",
                                          "results/frameworks/torchtitan_llama3_8b_h100x8.simulate.txt"}


@pytest.mark.parametrize("path, command, step", QUOTED, ids=[f"{p.split('/')[-1]}:{i}" for i, (p, _, _) in
                                                             enumerate(QUOTED)])
def test_a_quoted_simulation_prints_what_its_file_says(path, command, step, capsys):
    argv = shlex.split(command)[1:]
    assert main(argv) in (0, None)
    printed = next((x for x in capsys.readouterr().out.splitlines() if x.startswith("step ")), None)
    assert printed == step, (f"{path}: `{command}` now prints\n  {printed}\nwhere the file says\n  {step}\n"
                             "make the file again (its header says how) and update the docs that quote it")


FAST_PLANS = ["results/simulated/resnet50_cifar10_seeds_plan_ascend910_8.txt", "results/simulated/llama3_8b_plan_h100_32.txt"]


@pytest.mark.parametrize("path", FAST_PLANS)
def test_a_quoted_fast_plan_prints_what_its_file_says(path, tmp_path, capsys):
    lines = open(path).read().splitlines()
    commands = [i for i, x in enumerate(lines) if x.startswith("$ ")]
    assert len(commands) == 1 and lines[commands[0]].startswith("$ parsim plan "), path
    argv = shlex.split(lines[commands[0]][2:])[1:]
    if "-o" in argv:                       # written where the test runs, not into the checkout
        argv[argv.index("-o") + 1] = str(tmp_path / "plan.json")
    assert main(argv) in (0, None)
    printed = [re.sub(r"(simulated \d+) in [\d.]+ s", r"\1", x) for x in capsys.readouterr().out.splitlines()
               if not x.startswith("wrote ")]
    committed = [x for x in lines[commands[0] + 1:] if not x.startswith("wrote ")]
    assert printed == committed, (f"{path}: `{lines[commands[0]][2:]}` prints otherwise now: make the file again "
                                  "(python results/simulated/rerun.py, its header says why) and update the docs "
                                  "that quote it")
