"""Matplotlib figures: a Gantt chart of the step, memory over time, and where each rank's step
goes.  Each ``*_figure`` builds a figure; ``save`` writes it to a file, ``png_bytes`` renders it
in memory (for the plan report's page)."""

from __future__ import annotations

import io

from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.ticker import PercentFormatter

from parsim.fileio import atomic_path
from parsim.report.cli_text import config_text
from parsim.fmt import bytes_unit, human_bytes, human_time, time_unit
from parsim.report.timeline import bars, memory_timeline
from parsim.sim.engine import COMPUTE, DP, INPUT, P2P
from parsim.sim.estimate import Estimate

# Each kind of bar (parsim.report.timeline.record_kind): its colour and its legend entry.  Compute
# kinds draw in a rank's upper lane, the rest (communication, loading) in its lower lane.
KINDS = {"F": ("#4C72B0", "F forward"), "B": ("#DD8452", "B backward"),
         "I": ("#CCB974", "I backward, input gradient"), "W": ("#C44E52", "W backward, weight gradient"),
         "OPTIMIZER": ("#8172B3", "optimizer step"), "INPUT": ("#8C8C8C", "loading samples"),
         "SEND_F": ("#55A868", "SEND_F activation"), "SEND_B": ("#64B5CD", "SEND_B input gradient"),
         "GATHER": ("#1B7F79", "ZeRO parameter gather"), "REDUCE_GRAD": ("#937860", "gradient bucket reduce"),
         "REDUCE_TIED": ("#DA8BC3", "tied-weight gradient reduce")}
COLORS = {k: color for k, (color, _) in KINDS.items()}
LANE = {COMPUTE: (0.0, 0.55), INPUT: (0.0, 0.55), P2P: (0.62, 0.3), DP: (0.62, 0.3)}   # stream: (offset, height)
LABEL_PT = 6            # bar labels' font size, points


def subplots(*grid, figsize: tuple[float, float], **options):
    """(figure, axes) as ``pyplot.subplots`` gives them, but outside pyplot: these figures are
    written to files, never shown, and the caller's backend (a notebook's inline plots) is left
    as it is; no backend is chosen at import (Matplotlib's advice for figures made in a library
    or a server, "Embedding in a web application server")."""
    fig = Figure(figsize=figsize)
    return fig, fig.subplots(*grid, **options)


def draw_records(ax, records, num_ranks: int, span_s: float) -> set[str]:
    """Bars for (rank, action, stream, start_s, end_s) records (parsim.report.timeline.bars): the
    compute stream above, the rest below, times in the unit the page prints ``span_s`` in; the
    kinds drawn returned, for the legend.  Bar labels come after the layout (label_bars)."""
    unit, scale = time_unit(span_s)
    drawn = set()
    for r, stream, kind, _, start, end in bars(records):
        off, h = LANE[stream]
        ax.broken_barh([(start / scale, (end - start) / scale)], (r + off, h), facecolors=COLORS[kind],
                       edgecolor="white", linewidth=0.3 if stream == COMPUTE else 0)
        drawn.add(kind)
    ax.set_yticks([r + 0.3 for r in range(num_ranks)])
    ax.set_yticklabels([f"rank {r}" for r in range(num_ranks)])
    ax.set_ylim(num_ranks, -0.1)
    ax.set_xlim(0, span_s / scale * 1.005)
    ax.set_xlabel(f"time ({unit})")
    return drawn


def label_bars(ax, records, span_s: float) -> None:
    """Each compute bar's action ('1F3') inside it, where the text fits the bar (after the
    figure's layout: the bar's width in points depends on the axes')."""
    _, scale = time_unit(span_s)
    lo, hi = ax.get_xlim()
    fig = ax.get_figure()
    axes_pt = ax.get_position().width * fig.get_figwidth() * 72
    for r, stream, kind, name, start, end in bars(records):
        if stream != COMPUTE:
            continue
        width_pt = (end - start) / scale / (hi - lo) * axes_pt
        if width_pt >= 0.62 * LABEL_PT * len(name) + 2:        # DejaVu Sans: about 0.6 em a character
            off, h = LANE[stream]
            ax.text((start + end) / 2 / scale, r + off + h / 2, name, ha="center", va="center", fontsize=LABEL_PT,
                    color="white", clip_on=True)


def kinds_legend(fig, drawn: set[str], height_in: float) -> float:
    """A legend below the axes with an entry for every kind drawn, in KINDS' order; returns the
    share of the figure's height it takes (for tight_layout's rect)."""
    shown = [k for k in KINDS if k in drawn]
    # as many columns as the widest entry allows: handle and gaps about 0.45 in, text 0.6 em a character
    entry_in = 0.45 + max((len(KINDS[k][1]) for k in shown), default=1) * 0.6 * 8 / 72
    ncol = max(1, min(len(shown), int(0.95 * fig.get_figwidth() / entry_in)))
    fig.legend([Rectangle((0, 0), 1, 1, color=COLORS[k]) for k in shown], [KINDS[k][1] for k in shown],
               loc="lower center", fontsize=8, ncol=ncol, frameon=False, borderaxespad=0.2)
    rows = -(-len(shown) // ncol)
    return min(0.5, (0.08 + 0.17 * rows) / height_in)


def gantt(est: Estimate, path: str, title: str | None = None) -> None:
    save(gantt_figure(est, title), path)


def gantt_figure(est: Estimate, title: str | None = None):
    height_in = 1.9 + 0.7 * len(est.ranks)
    fig, ax = subplots(figsize=(12, height_in))
    drawn = draw_records(ax, est.timeline.records, len(est.ranks), est.step_time_s)
    c = est.config
    ax.set_title(title or f"{c.get('model', '')}: {config_text(c)}\nstep {human_time(est.step_time_s)}, "
                          f"bubble {est.bubble_fraction:.1%}, waiting on other ranks {est.sync_wait_fraction:.1%}, "
                          f"exposed communication {est.exposed_comm_fraction:.1%}", fontsize=10)
    bottom = kinds_legend(fig, drawn, height_in)
    fig.tight_layout(rect=(0, bottom, 1, 1))
    label_bars(ax, est.timeline.records, est.step_time_s)
    return fig


def memory_plot(est: Estimate, path: str) -> None:
    save(memory_figure(est), path)


def memory_figure(est: Estimate):
    """Each rank's memory over the step (parsim.report.timeline.memory_timeline), in the units
    human_bytes and human_time pick for the largest value and the step, with the estimate's peak
    dotted: the curve's highest point touches it."""
    timeline = memory_timeline(est)
    top = max((b for points in timeline for _, b in points), default=0.0)
    bunit, bscale = bytes_unit(top)
    tunit, tscale = time_unit(est.step_time_s)
    fig, ax = subplots(figsize=(10, 4))
    for r, points in enumerate(timeline):
        ts, bs = zip(*points)
        line, = ax.step([t / tscale for t in ts], [b / bscale for b in bs], where="post", label=f"rank {r}")
        ax.axhline(est.ranks[r].peak_memory_bytes / bscale, color=line.get_color(), linestyle=":", linewidth=1)
    ax.set_xlim(0, est.step_time_s / tscale * 1.005)
    ax.set_ylim(0, top / bscale * 1.08)
    ax.set_xlabel(f"time ({tunit})")
    ax.set_ylabel(f"memory ({bunit})")
    ax.set_title(f"memory over one step: held state, plus the activations in flight; dotted: each rank's "
                 f"estimated peak (highest {human_bytes(max(est.peak_memory_bytes))})", fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0), ncol=1 + (len(timeline) - 1) // 16)
    fig.tight_layout()
    return fig


# The parts of a rank's step, which add up to it (parsim.sim.estimate.RankEstimate), and their colours.
SHARES = (("busy", "busy_s", "#4C72B0"), ("input", "input_s", "#999999"),
          ("exposed communication", "exposed_comm_s", "#55A868"), ("bubble", "bubble_s", "#DD8452"),
          ("waiting on other ranks", "sync_wait_s", "#C44E52"))


def shares_figure(est: Estimate):
    """One bar per pipeline rank: its step split by cause, as shares of the step."""
    height_in = 1.6 + 0.45 * len(est.ranks)
    fig, ax = subplots(figsize=(10, height_in))
    left = [0.0] * len(est.ranks)
    for label, attr, color in SHARES:
        part = [getattr(r, attr) / est.step_time_s for r in est.ranks]
        ax.barh([r.rank for r in est.ranks], part, left=left, color=color, label=label, height=0.6)
        left = [a + b for a, b in zip(left, part)]
    ax.set_yticks([r.rank for r in est.ranks])
    ax.set_yticklabels([f"rank {r.rank}" for r in est.ranks])
    ax.set_ylim(len(est.ranks) - 0.5, -0.5)
    ax.set_xlim(0, 1)
    ax.xaxis.set_major_formatter(PercentFormatter(1.0))
    ax.set_xlabel("share of the step")
    ax.set_title(f"where each rank's step goes (mean over ranks: bubble {est.bubble_fraction:.1%}, "
                 f"waiting {est.sync_wait_fraction:.1%}, exposed comm. {est.exposed_comm_fraction:.1%})")
    fig.legend(fontsize=7, ncol=len(SHARES), loc="lower center")
    fig.tight_layout(rect=(0, 0.3 / height_in, 1, 1))        # the legend's strip at the bottom
    return fig


def png_bytes(fig) -> bytes:
    """The figure as PNG bytes, rendered in memory (a Figure outside pyplot needs no closing)."""
    buf = io.BytesIO()
    fig.savefig(buf, dpi=100, format="png")
    return buf.getvalue()


def save(fig, path: str) -> None:
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=120, format=path.rsplit(".", 1)[-1] if "." in path else "png")
