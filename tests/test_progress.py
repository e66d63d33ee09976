"""Progress bars (tqdm): on rank 0 only and only where stderr is a terminal; a line printed while a
bar is up reaches its file unchanged."""

import io
import re
import sys

from parsim.cost.compute import AnalyticalCompute
from parsim.hardware import load_cluster
from parsim.model.spec import load_model
from parsim.progress import print_above, progress_bar
from parsim.search.planner import Constraints, plan


class Terminal(io.StringIO):
    def isatty(self):
        return True


def _count_to(n, **kw):
    bar = progress_bar(n, "steps", mininterval=0, **kw)
    for _ in range(n):
        bar.update()
    bar.close()


def test_a_bar_shows_on_rank_0_only_and_only_on_a_terminal(monkeypatch):
    shown = {}
    for case, stream, kw in (("terminal", Terminal(), {}), ("pipe", io.StringIO(), {}),
                             ("rank 1", Terminal(), {"rank": 1}), ("forced off", Terminal(), {"enabled": False}),
                             ("forced on", io.StringIO(), {"enabled": True}),
                             ("forced on, rank 1", io.StringIO(), {"enabled": True, "rank": 1})):
        monkeypatch.setattr(sys, "stderr", stream)
        _count_to(3, **kw)
        shown[case] = stream.getvalue()
    assert {case for case, text in shown.items() if text} == {"terminal", "forced on"}
    assert "steps:   0%" in shown["terminal"] and "| 3/3 " in shown["terminal"]


def test_a_line_printed_under_a_bar_is_unchanged_and_the_bar_comes_back(monkeypatch):
    screen = Terminal()
    monkeypatch.setattr(sys, "stderr", screen)
    line = "epoch: 1 step: 2, loss is 2.3025851"
    bar = progress_bar(4, "training", initial=1, unit="step", mininterval=0)
    bar.update()
    print_above(line, screen)                   # the line and the bar share the screen
    after = screen.getvalue().split(line + "\n")
    assert len(after) == 2 and "1/4" in after[0] and "2/4" in after[1]     # cleared, printed, redrawn
    log = io.StringIO()                         # a file that is not the screen gets the line alone
    print_above(line, log)
    bar.close()
    assert log.getvalue() == line + "\n"


def test_the_planner_shows_its_bar_on_a_terminal_and_nothing_elsewhere(monkeypatch):
    spec = load_model("tests/data/two_layers.yaml")
    cluster = load_cluster("local-cpu:2x2")
    compute = AnalyticalCompute.for_training(cluster.device, spec.training)
    for stream, expect in ((io.StringIO(), False), (Terminal(), True)):
        monkeypatch.setattr(sys, "stderr", stream)
        result = plan(spec, cluster, compute, Constraints(top=2))
        first = re.search(r"planning:\s+0%\|.*\| 0/(\d+) ", stream.getvalue())
        assert bool(first) is expect
        if expect:        # every candidate the search simulated was counted in the bar's total
            assert int(first.group(1)) >= result.simulated >= 2
    monkeypatch.setattr(sys, "stderr", Terminal())
    plan(spec, cluster, compute, Constraints(top=2), progress=False)
    assert sys.stderr.getvalue() == ""


def test_a_bar_that_is_off_is_no_tqdm_bar(monkeypatch):
    """Where no bar is shown, none is made (NoBar counts and draws nothing): tqdm's first bar of a
    process, even a disabled one, creates its multiprocessing lock, a few ms of the planner's
    timed search (results/2026-11-29-amd-epyc/no-bar.txt)."""
    from tqdm import tqdm

    from parsim.progress import NoBar

    monkeypatch.setattr(sys, "stderr", io.StringIO())
    for kw in ({}, {"enabled": False}, {"enabled": True, "rank": 1}):
        bar = progress_bar(3, "steps", unit="step", **kw)
        assert isinstance(bar, NoBar) and not isinstance(bar, tqdm), kw
        bar.update()
        bar.close()
    bar = progress_bar(3, "steps", enabled=True)
    assert isinstance(bar, tqdm)
    bar.close()
