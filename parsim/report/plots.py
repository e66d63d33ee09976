"""Matplotlib figures: a Gantt chart of the step, memory over time, and where each rank's step
goes.  Each ``*_figure`` builds a figure; ``save`` writes it to a file, ``png_bytes`` renders it
in memory (for the plan report's page)."""

from __future__ import annotations

import io

from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.ticker import PercentFormatter

from parsim.fileio import atomic_path
from parsim.report.timeline import memory_timeline
from parsim.sim.estimate import Estimate

COLORS = {"F": "#4C72B0", "B": "#DD8452", "I": "#DD8452", "W": "#C44E52", "OPTIMIZER": "#8172B3",
          "SEND_F": "#55A868", "SEND_B": "#64B5CD", "REDUCE_GRAD": "#937860", "REDUCE_TIED": "#DA8BC3"}
LANE = {"compute": 0.0, "p2p": 0.62, "dp": 0.62, "input": 0.0}


def subplots(*grid, figsize: tuple[float, float], **options):
    """(figure, axes) as ``pyplot.subplots`` gives them, but outside pyplot: these figures are
    written to files, never shown, and the caller's backend (a notebook's inline plots) is left
    as it is; no backend is chosen at import (Matplotlib's advice for figures made in a library
    or a server, "Embedding in a web application server")."""
    fig = Figure(figsize=figsize)
    return fig, fig.subplots(*grid, **options)


def draw_records(ax, records, num_ranks: int, span_s: float) -> None:
    """Bars for (rank, action, stream, start_s, end_s) records: compute above, communication below."""
    for r, a, stream, start, end in records:
        y = r + LANE[stream]
        h = 0.55 if stream == "compute" else 0.3
        ax.broken_barh([(start, end - start)], (y, h), facecolors="#999999" if stream == "input" else COLORS.get(a.kind.value, "#999999"),
                       edgecolor="white", linewidth=0.3)
        if stream == "compute" and end - start > span_s / 60:
            ax.text((start + end) / 2, y + h / 2, str(a), ha="center", va="center", fontsize=6, color="white")
    ax.set_yticks([r + 0.3 for r in range(num_ranks)])
    ax.set_yticklabels([f"rank {r}" for r in range(num_ranks)])
    ax.set_ylim(num_ranks, -0.1)
    ax.set_xlabel("time (s)")


def gantt(est: Estimate, path: str, title: str | None = None) -> None:
    save(gantt_figure(est, title), path)


def gantt_figure(est: Estimate, title: str | None = None):
    fig, ax = subplots(figsize=(12, 0.9 + 0.7 * len(est.ranks)))
    draw_records(ax, est.timeline.records, len(est.ranks), est.step_time_s)
    c = est.config
    ax.set_title(title or f"{c.get('model', '')}: {c.get('schedule')} dp={c.get('dp')} pp={c.get('pp')} "
                          f"m={c.get('microbatches')}  step {est.step_time_s:.4g} s, bubble {est.bubble_fraction:.1%}, "
                          f"sync wait {est.sync_wait_fraction:.1%}")
    handles = [Rectangle((0, 0), 1, 1, color=col) for col in COLORS.values()]
    ax.legend(handles, list(COLORS), loc="upper right", fontsize=7, ncol=4)
    fig.tight_layout()
    return fig


def memory_plot(est: Estimate, path: str) -> None:
    save(memory_figure(est), path)


def memory_figure(est: Estimate):
    fig, ax = subplots(figsize=(10, 4))
    for r, points in enumerate(memory_timeline(est)):
        ts, bs = zip(*points)
        ax.step(ts, [b / 2**30 for b in bs], where="post", label=f"rank {r}")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("memory (GiB)")
    ax.set_title("memory over one step (static + activations in flight)")
    ax.legend(fontsize=7)
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
