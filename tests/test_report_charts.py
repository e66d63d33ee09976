"""The pictures agree with the numbers (issue 31): for every kind of plan, each chart of the
simulated step peaks at the estimate's peak memory -- the memory plot as drawn, the report page's
chart data, the Chrome trace's memory counter -- and no record off the compute stream (ZeRO's
parameter gathers, stage 0's loading, communication) draws or is named as a compute action.

The kinds are test_plan_kinds.py's (dp; pp with each schedule; tp; recompute; ZeRO 1-3; cp), on
the tiny GPT, with inline loading priced (parsim.cost.input) so stage 0's forwards have INPUT
records, and two combinations (interleaved with ZeRO-1 and recompute over dp; ZeRO-3 with tp and
recompute).  ZeRO-3 runs with pp=1 only (parsim.sim.simulate refuses it with pp > 1; ZeRO-2 beside a
pipeline: tests/test_fsdp_pipeline.py)."""

from dataclasses import replace

import pytest
from matplotlib.colors import to_hex

from parsim.cost.compute import AnalyticalCompute
from parsim.hardware import load_cluster
from parsim.hardware.cluster import InputPipeline
from parsim.model.spec import load_model
from parsim.report.html import chart_data
from parsim.report.plots import COLORS, LANE, gantt_figure, memory_figure
from parsim.report.timeline import chrome_trace, memory_timeline, record_kind, record_name
from parsim.schedule.actions import COMPUTE, Action, Kind
from parsim.search.resolve import resolve_config
from parsim.sim import simulate

MODEL = "examples/gpt_tiny_local.yaml"
COMPUTE_KINDS = {k.value for k in COMPUTE}            # F, B, I, W, OPTIMIZER
KINDS = {
    "dp": dict(dp=2, pp=1),
    "pp-gpipe": dict(dp=1, pp=2, schedule="gpipe"),
    "pp-1f1b": dict(dp=1, pp=2, schedule="1f1b"),
    "pp-interleaved": dict(dp=1, pp=2, schedule="interleaved", chunks=2),
    "pp-zbh1": dict(dp=1, pp=2, schedule="zbh1"),
    "tp": dict(dp=1, pp=1, tp=2, tp_layout="megatron"),
    "recompute": dict(dp=2, pp=1, recompute=True),
    "zero1": dict(dp=2, pp=1, zero=1),
    "zero2": dict(dp=2, pp=1, zero=2),
    "zero3": dict(dp=2, pp=1, zero=3),
    "cp": dict(dp=1, pp=1, cp=2),
    "pp-interleaved-zero1-recompute": dict(dp=2, pp=2, schedule="interleaved", chunks=2, zero=1, recompute=True),
    "zero3-tp-recompute": dict(dp=2, pp=1, tp=2, tp_layout="megatron", zero=3, recompute=True),
}
GIVEN = dict(tp=1, tp_layout=None, recompute=False, zero=0, cp=1, microbatches=4)


@pytest.fixture(scope="module")
def setup():
    spec = load_model(MODEL)
    cluster = load_cluster("local-cpu:2x2")
    # inline loading: stage 0's forwards load their samples first (an INPUT record each)
    cluster = replace(cluster, profile=replace(cluster.profile, input_pipeline=InputPipeline(False, per_sample_s=1e-4)))
    return spec, cluster, AnalyticalCompute.for_training(cluster.device, spec.training)


def _estimate(setup, kind: str):
    spec, cluster, compute = setup
    cfg = resolve_config(spec, cluster, compute, **{**GIVEN, **KINDS[kind]})
    return simulate(spec.graph, spec.training, cluster, cfg, compute, strategies=spec.shard)


@pytest.mark.parametrize("kind", KINDS)
def test_every_chart_peaks_at_the_estimates_peak(setup, kind):
    e = _estimate(setup, kind)
    peaks = e.peak_memory_bytes
    records = e.timeline.records
    streams = {(stream, a.kind) for _, a, stream, _, _ in records}
    assert ("input", Kind.F) in streams                                 # stage 0 loads inline
    if e.config["zero"] >= 2:                                           # the gathers that were counted twice
        assert ("dp", Kind.F) in streams
    # memory over time, per rank: its maximum is the rank's estimated peak
    timeline = memory_timeline(e)
    assert [max(b for _, b in points) for points in timeline] == pytest.approx(peaks, rel=1e-12)
    # the memory plot, as drawn: each rank's step line (in the unit on its axis) tops out at its peak
    fig = memory_figure(e)
    ax = fig.axes[0]
    unit = ax.get_ylabel().removeprefix("memory (").removesuffix(")")
    scale = 2 ** (10 * ["B", "KiB", "MiB", "GiB", "TiB"].index(unit))
    lines = [line for line in ax.get_lines() if line.get_label().startswith("rank ")]
    assert len(lines) == len(e.ranks)
    assert [max(line.get_ydata()) * scale for line in lines] == pytest.approx(peaks, rel=1e-12)
    # the report page's chart data
    data = chart_data(e)["memory"]
    assert [max(b for _, b in r["points"]) for r in data] == pytest.approx(peaks, rel=1e-12)
    assert [r["estimated_peak_bytes"] for r in data] == peaks
    # the Chrome trace's memory counter, in MiB per pipeline rank
    trace = chrome_trace(e)["traceEvents"]
    counter = [max(ev["args"]["MiB"] for ev in trace if ev["ph"] == "C" and ev["pid"] == r.rank) for r in e.ranks]
    assert [x * 2**20 for x in counter] == pytest.approx(peaks, rel=1e-12)


@pytest.mark.parametrize("kind", ["zero2", "zero3-tp-recompute", "pp-interleaved-zero1-recompute", "pp-zbh1"])
def test_no_record_off_the_compute_stream_draws_as_compute(setup, kind):
    e = _estimate(setup, kind)
    records = e.timeline.records
    # the trace: compute kinds and action names on the compute thread (tid 0) only
    trace = [ev for ev in chrome_trace(e)["traceEvents"] if ev["ph"] == "X"]
    assert len(trace) == len(records)
    compute_names = {str(a) for _, a, stream, _, _ in records if stream == "compute"}
    for ev in trace:
        assert (ev["cat"] in COMPUTE_KINDS) == (ev["tid"] == 0), ev
        if ev["tid"] != 0:
            assert ev["name"] not in compute_names, ev
    assert {ev["cat"] for ev in trace if ev["tid"] != 0} >= {"INPUT"}
    # the page's Gantt data: the same
    for rank, stream, what, name, start, end in chart_data(e)["gantt"]["bars"]:
        assert (what in COMPUTE_KINDS) == (stream == "compute"), (rank, stream, what, name)
    # the Gantt chart as drawn: every bar in a rank's lower lane has a non-compute colour, every
    # bar in the upper lane the colour of what it is
    fig = gantt_figure(e)
    compute_colors = {COLORS[k] for k in COMPUTE_KINDS if k in COLORS}
    lower = upper = 0
    for coll in fig.axes[0].collections:
        color = to_hex(coll.get_facecolor()[0])
        for path in coll.get_paths():
            y = path.vertices[:, 1].min()
            if round(y % 1, 6) == LANE["p2p"][0]:
                lower += 1
                assert color not in compute_colors
            else:
                upper += 1
    assert lower == sum(stream in ("p2p", "dp") for _, _, stream, _, _ in records)
    assert upper == sum(stream in ("compute", "input") for _, _, stream, _, _ in records)
    # the legend names every kind drawn
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert len(legend) == len({record_kind(a, s) for _, a, s, _, _ in records})


def test_record_kinds_and_names():
    f = Action(1, Kind.F, 3)
    assert (record_kind(f, "compute"), record_name(f, "compute")) == ("F", "1F3")
    assert (record_kind(f, "dp"), record_name(f, "dp")) == ("GATHER", "GATHER 1F3")
    assert (record_kind(f, "input"), record_name(f, "input")) == ("INPUT", "INPUT 1F3")
    opt = Action(0, Kind.OPTIMIZER)
    assert record_kind(opt, "compute") == "OPTIMIZER" and record_kind(opt, "dp") == "GATHER"   # ZeRO-1's gather
    for k in (Kind.SEND_F, Kind.SEND_B):
        assert record_name(Action(0, k, 2), "p2p") == f"0{k.value}2"
    assert record_name(Action(0, Kind.REDUCE_GRAD, 1), "dp") == "0REDUCE_GRAD1"
    assert set(COLORS) >= {"I", "B", "GATHER", "INPUT"} and COLORS["I"] != COLORS["B"]


def test_the_validation_overlay_draws_both_steps_with_one_legend(setup, tmp_path):
    from parsim.report.validation import overlay

    e = _estimate(setup, "pp-interleaved-zero1-recompute")
    measured = {"actions": [[r, str(a), s, t0 * 1.1, t1 * 1.1] for r, a, s, t0, t1 in e.timeline.records],
                "step_time_s": e.step_time_s * 1.1}
    overlay(e, measured, str(tmp_path / "overlay.png"), "simulated against a copy 10% slower")
    assert (tmp_path / "overlay.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
