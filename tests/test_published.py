"""Published measurements: the rows' configurations, the committed benchmark's currency (its
in-sample column reproduced by the shipped profiles), the fitted values the profiles hold, and
what the planner does with the papers' models.

Every row lives in results/published/*figures*.yaml (parsim.profile.published) with its citation,
configuration and tolerance; benchmarks/bench_published.py scores them out of sample (each
source priced with the profile numbers fitted on the others: parsim.profile.loso) and writes
results/published/bench_published.txt.  FLOPs of the GPT rows are counted as Narayanan et al. 2021's Equation 3 (which
includes the recomputed forward):

    F = 96 B s l h^2 (1 + s / (6 h) + V / (16 l h))
"""

import re
from dataclasses import replace

import pytest
import yaml

from parsim.cost.compute import AnalyticalCompute
from parsim.hardware import load_cluster
from parsim.hardware.cluster import InputPipeline, profile_path
from parsim.model.extract import InputSpec, extract_graph
from parsim.model.spec import Training, load_model
from parsim.model.zoo import resnet50
from parsim.plan import ParallelConfig
from parsim.errors import DoesNotFitError, InfeasibleError, InputError
from parsim.plan import CP_MODES
from parsim.model.stacks import load_harnesses
from parsim.profile.harness import by_stack
from parsim.profile.loso import load_fit_spec
from parsim.profile.picks import pick_groups, picks_text
from parsim.profile.published import (_freeze, _thaw, figure_cluster, figure_spec, load_all_figures, load_figures, price,
                                      shipped_profile)
from parsim.fmt import human_bytes
from parsim.search.planner import Constraints, plan
from parsim.search.resolve import resolve_config
from parsim.sim import simulate

from drawn_sets import assert_drawn_as_hashed, assert_held_out_as_pinned

FIGURES = load_figures("results/published/figures.yaml")
ALL = load_all_figures()
IDS = {f.id for f in ALL.figures}


BENCH = "results/published/bench_published.txt"


def _bench_rows() -> dict[str, tuple[float, str]]:
    """The committed benchmark's rows: id -> (in-sample prediction, out-of-sample error text)."""
    rows = {}
    for line in open(BENCH).read().splitlines()[2:]:
        parts = line.split()
        if line[:1].strip() and len(parts) > 7 and parts[0] in IDS and parts[4] != "-":   # the table, not the bands
            rows[parts[0]] = (float(parts[4]), parts[7])
    return rows


# one cheap row per family: each prices in about a second
CURRENT = ["dle-rn50-a100-amp-1gpu", "mindspore-rn50-910-8card", "narayanan-t1-39.1b", "korthikanti-22b-seqsel",
           "llmfoundry-mpt7b-a100-8gpu-s2048", "torchtitan-llama2-13b-a100-64gpu", "dgxc-llama31-8b-h100-8gpu-fp8"]


@pytest.mark.parametrize("ident", CURRENT)
def test_the_committed_benchmark_is_current(ident):
    """The shipped profiles and the cost model as they are still price a row as the committed
    benchmark says (its in-sample column: the all-source fit the profiles hold).  After a change
    to either, rerun python benchmarks/bench_published.py --write-profiles with --out and --residuals."""
    predicted, _ = _bench_rows()[ident]
    p = price(ALL.by_id(ident))
    assert p.predicted == pytest.approx(predicted, rel=2e-3), (ident, p.predicted, predicted)


def test_the_shipped_profiles_hold_the_all_source_fit():
    """Every field results/published/fit.yaml fits holds, in its profile file, the value the
    benchmark's all-families line prints (a ratio parameter, that value times its base field)."""
    from parsim.profile.profile_edit import get_field

    spec = load_fit_spec("results/published/fit.yaml")
    line = next(l for l in open(BENCH).read().splitlines() if l.strip().startswith("all families"))
    values = dict(zip([p.name for p in spec.parameters], map(float, line.split()[2:])))
    for p in spec.parameters:
        for profile, dotted in p.fields:
            text = open(profile_path(profile)).read()
            want = values[p.name] * (get_field(text, p.ratio_of) if p.ratio_of else 1.0)
            assert get_field(text, dotted) == pytest.approx(want, rel=2e-3), (p.name, profile, dotted)


def test_no_committed_output_calls_a_row_held_out():
    """Every public row either is scored out of sample (its source left out of the fit) or says why
    not; no output calls a development row held out (issue 37): "held-out" names only the sources
    results/published/fit.yaml keeps out of every fit, on their own rows and their own summary lines."""
    spec = load_fit_spec("results/published/fit.yaml")
    held_out_rows = {f.id for f in ALL.figures if spec.held_out_row(f)}
    text = open(BENCH).read()
    for line in text.splitlines():
        low = line.lower()
        if "held out" in low or "held-out" in low:
            first = line.split()[0]
            if first in IDS:
                assert first in held_out_rows, line
            elif low.lstrip().startswith("held-out sources ("):            # the MAPE summary: it names them
                assert set(line[line.index("(") + 1:line.index(":")].split(", ")) <= spec.held_out, line
            else:
                assert low.lstrip().startswith("held-out sources against the same bands"), line
    assert "out-of-sample mape" in text.lower() and "in-sample mape" in text.lower()
    # docs/accuracy.md's tables of sources: a row that names a source calls it held out only if
    # fit.yaml keeps it out of every fit; a development source may say it was drawn held out
    sources = {f.source for f in ALL.figures}
    for line in open("docs/accuracy.md").read().splitlines():
        low = line.lower()
        if not line.startswith("|") or not ("held out" in low or "held-out" in low):
            continue
        name = line.split("|")[1].strip().strip("`*").split()[0].strip("`")
        if name in sources and name not in spec.held_out:
            assert low.count("held out") + low.count("held-out") == low.count("drawn held out"), line
    rows = _bench_rows()
    for f in ALL.scorable():            # a profile's calibration rows are excluded, in-sample by construction
        if not f.excluded and f.id in rows:
            assert rows[f.id][1] != "-", f.id
        if f.excluded and f.id in rows:
            assert rows[f.id][1] == "-", f.id


# The held-out ZeRO-3 rows of Narayanan et al. 2021's Table 2 (results/published/narayanan_zero3_figures.yaml),
# drawn on 2026-11-29 and priced once before any change: sha256 of the rows as drawn (every field
# but a row's note) and each row's error then.  Every one misses its 10% (parsim prices pure ZeRO-3
# at 384-2,240 A100 at about 205 TFLOP/s a GPU, its gathers hidden under the compute; DeepSpeed's
# measured 44-144: results/2026-11-29-amd-epyc/zero3-heldout.txt), beyond what a row's miss_within
# may record (at most 100%), so each is pinned here: it cannot drift unseen, and a change of the model
# for it makes the source a development one (fit.yaml, held_out).  The errors are those since BACKWARD_POST
# was priced on llm-foundry's rows, the fit moving with them (results/2026-12-01c-amd-epyc/fsdp-backward-post.txt;
# before, after FSDP2's copies were priced on the device and dgx-b200 joined H100's fit: +37.5%,
# +114.8%, +289.5%, +49.1%, +100.8%, +274.5%; after FSDP2's copies, results/2026-12-01-intel-xeon/fsdp2-copies.txt;
# after NCCL's bandwidth took its prior from nccl-tests' rows and a ring's spine share was priced,
# results/2026-11-30g-intel-xeon/nccl-prior.txt: +40.0%, +122.3%, +313.5%, +52.1%, +108.6%, +300.7%;
# after Llama 3 405B's rows took the paper's
# 8 chunks a pipeline rank, results/2026-11-30f-amd-epyc/llama3-chunks.txt: +40.8%, +124.9%, +324.6%,
# +52.9%, +110.8%, +309.8%; after NCCL's thread blocks were charged to the compute beside them,
# results/2026-11-30e-amd-epyc/nccl-overlap.txt: +40.9%, +125.4%, +327.1%, +53.1%, +111.5%, +312.8%;
# when drawn: +43.0%, +133.1%, +361.9%, +55.5%, +118.4%, +342.7%).
ZERO3 = "results/published/narayanan_zero3_figures.yaml"
ZERO3_ROWS_SHA256 = "61140e4c238fa71359b70c346c107bbd4317798fd3c29de3f51f2539acd5a8ad"
ZERO3_ERRORS = {"narayanan-zero3-175b-384gpu": 0.378, "narayanan-zero3-175b-768gpu": 1.158,
               "narayanan-zero3-175b-1536gpu": 2.936, "narayanan-zero3-530b-640gpu": 0.494,
               "narayanan-zero3-530b-1120gpu": 1.018, "narayanan-zero3-530b-2240gpu": 2.781}


# The held-out source drawn on 2026-11-30 the same way (results/2026-11-30d-amd-epyc/heldout-fsdp-scale.txt):
# llm-foundry's FULL_SHARD rows on 512 H100.  A change of the model that moves one is seen here; one made
# FOR a source makes it a development one, one made for another reason is a change it has scored, its
# new errors written here and in docs/accuracy.md.  It has scored seven: NCCL's latency model
# (results/2026-11-30d-amd-epyc/nccl-latency-model.txt; drawn +16.3%, +12.8%, +6.5%, +36.7%; then +16.5%,
# +13.1%, +6.8%, +39.1%), NCCL's thread blocks charged to the compute beside them
# (results/2026-11-30e-amd-epyc/nccl-overlap.txt: +14.3%, +11.1%, +5.8%, +32.7%), Llama 3 405B's rows
# read with the paper's 8 chunks a pipeline rank, the fit moving with them
# (results/2026-11-30f-amd-epyc/llama3-chunks.txt: +14.0%, +10.8%, +5.5%, +32.1%) and NCCL's bandwidth
# prior taken from nccl-tests' rows with a ring's spine share priced (results/2026-11-30g-intel-xeon/
# nccl-prior.txt: +12.9%, +9.8%, +4.7%, +28.9%), FSDP2's copies priced on the device
# (results/2026-12-01-intel-xeon/fsdp2-copies.txt: +10.7%, +7.9%, +3.9%, +25.8%) and BACKWARD_POST priced
# on llm-foundry's 2023 rows (its own rows run BACKWARD_PRE, sweep.py, and keep the default; the refit
# lowered NCCL's overlap charge from 1 - 0.8359 to 1 - 0.8561: +11.1%, +8.3%, +4.3%, +27.0%), and TE's FP8
# casts priced, whose refit raised H100's memory efficiency 0.7886 -> 0.8007 (these rows are BF16;
# results/2026-12-01g-amd-epyc/fp8-casts.txt: +11.2%, +8.5%, +4.5%, +27.2%), and the fused RMSNorm, rope
# and SwiGLU the NVIDIA Megatron-Core rows state (parsim.model.fused_ops, made for NeMo's table, which
# became a development source; these MPT rows have none of those operators) with H100's GEMMs given a
# memory floor of their own, whose refit lowered H100's memory efficiency 0.8078 -> 0.6830 and FP8's
# 0.959 -> 0.822 (results/2026-12-02h-amd-epyc/residuals-before-after.txt): the errors below.  The 910B's held-out sets are pinned with the other
# 910B sets (tests/test_new_figures.py).
FSDP_SCALE = "results/published/fsdp_scale_figures.yaml"
# The held-out source drawn on 2026-12-01 to test fused attention priced by its head dimension
# (parsim.cost.kernels.attention_head_efficiency): llm-foundry's MPT 125m and 350m, heads of 64, on A100
# and H100.  Drawn before pricing and scored once, with the change: MAPE 5.5% against 7.3% without it
# (results/2026-12-01b-intel-xeon/head-dim-heldout.txt).  It has scored one change since, made for
# another reason: dgx-b200 extending dgx-h100, which refitted H100's FP8 efficiency (the H100 FP8 350m
# row at 512 tokens +31.4% -> +30.7%), and one made for the development rows of its harness: FSDP's
# BACKWARD_POST priced (training.fsdp_backward_prefetch), which its rows take by the rule of their
# header, so the hash is of the rows as drawn plus that field on each (as drawn: f74fff65...; the
# prices before and after: results/2026-12-01c-amd-epyc/fsdp-backward-post.txt): MAPE 5.5% -> 5.3%,
# the H100 FP8 350m row at 512 tokens +30.7% -> +29.9%.  Then one made for the development rows of
# FP8 (llm-foundry's MPT-3B FP8, DGX Cloud's): TE's cast kernels priced (parsim.model.fp8), its three
# FP8 rows in view in the committed output when it was chosen, not chosen for them: MAPE 5.3% -> 4.6%,
# the FP8 rows -11.4% -> -9.1%, -7.7% -> -6.4%, +29.9% -> +19.8%
# (results/2026-12-01g-amd-epyc/fp8-casts.txt).  Then the fused RMSNorm, rope and SwiGLU of the NVIDIA
# Megatron-Core rows (parsim.model.fused_ops; MPT has none of them), H100's GEMM memory floor, whose
# refit moved H100's memory and FP8 efficiencies, and H100's fused attention at heads under 128 taken
# from FlashAttention-3's benchmark (kernels.attention_head_fill, 0.705 at heads of 64; it had followed
# the GEMMs' k_half, 0.768, which their own floor took to 0.841): MAPE 4.6% -> 4.5%, the FP8 rows
# -8.9% -> -15.3%, -6.1% -> -13.2%, +20.4% -> +5.9% (results/2026-12-02h-amd-epyc/residuals-before-after.txt;
# -1.1%, -0.4%, +7.8% at 0.841); the errors below.
NARROW_HEADS = "results/published/llmfoundry_narrow_figures.yaml"
HELD_OUT_SOURCES = {
    ZERO3: ("narayanan2021-zero3", ZERO3_ROWS_SHA256, ZERO3_ERRORS),
    FSDP_SCALE: ("llm-foundry-large-scale", "6c8f04f17e5678d5d06356574a0290e78ea573365c9a3ee4876fdd595150edfb",
                 {"llmfoundry-large-mpt70b-h100-512gpu-s2048": 0.103, "llmfoundry-large-mpt30b-h100-512gpu-s2048": 0.077,
                  "llmfoundry-large-mpt13b-h100-512gpu-s2048": 0.037, "llmfoundry-large-mpt7b-h100-512gpu-s2048": 0.252}),
    NARROW_HEADS: ("llm-foundry-narrow-heads", "01e114ad862a1f937f587098377c4517c6db06d1e9726ae01c2c9c6747331296",
                   {"llmfoundry-mpt350m-a100-8gpu-s65536": -0.048, "llmfoundry-mpt350m-a100-8gpu-s32768": -0.042,
                    "llmfoundry-mpt350m-a100-8gpu-s16384": -0.054, "llmfoundry-mpt350m-a100-8gpu-s8192": -0.060,
                    "llmfoundry-mpt350m-a100-8gpu-s4096": -0.048, "llmfoundry-mpt350m-a100-8gpu-s2048": -0.014,
                    "llmfoundry-mpt350m-a100-8gpu-s1024": 0.010, "llmfoundry-mpt350m-a100-8gpu-s512": 0.010,
                    "llmfoundry-mpt125m-a100-8gpu-s65536": -0.074, "llmfoundry-mpt125m-a100-8gpu-s32768": -0.064,
                    "llmfoundry-mpt125m-a100-8gpu-s16384": -0.048, "llmfoundry-mpt125m-a100-8gpu-s8192": -0.043,
                    "llmfoundry-mpt125m-a100-8gpu-s4096": -0.018, "llmfoundry-mpt125m-a100-8gpu-s2048-mb40": -0.015,
                    "llmfoundry-mpt125m-a100-8gpu-s2048-mb32": -0.010, "llmfoundry-mpt125m-a100-8gpu-s1024": 0.001,
                    "llmfoundry-mpt125m-a100-8gpu-s512": 0.004, "llmfoundry-mpt350m-h100-8gpu-s32768-fp8": -0.153,
                    "llmfoundry-mpt350m-h100-8gpu-s16384-fp8": -0.132, "llmfoundry-mpt350m-h100-8gpu-s512-fp8": 0.059}),
}


@pytest.mark.parametrize("path", sorted(HELD_OUT_SOURCES))
def test_a_held_out_source_stays_as_drawn_and_out_of_every_fit(path):
    source, sha256, errors = HELD_OUT_SOURCES[path]
    assert_drawn_as_hashed(path, sha256)
    figures = load_figures(path).figures
    assert not any(f.excluded for f in figures)
    assert_held_out_as_pinned(figures, source, errors)


def test_a_calibration_row_is_never_scored_out_of_sample():
    """ModelLink's rows, on which atlas-900-a2 is calibrated (ascend_figures.yaml's calibration:
    section), are excluded from the out-of-sample score and say why."""
    calibration = [f for f in ALL.figures if ALL.used_for_calibration(f)]
    assert len(calibration) == 5
    scorable = {f.id: f for f in ALL.scorable()}
    for f in calibration:
        assert "in-sample by construction" in scorable[f.id].excluded, f.id


def test_every_family_names_the_stack_that_ran_it():
    """results/published/harnesses.yaml labels each family of the public rows, and no family that is not
    one: the benchmark's per-stack lines (benchmarks/bench_published.py) count every scored row once."""
    spec = load_fit_spec("results/published/fit.yaml")
    assert set(load_harnesses()) == {spec.family(f) for f in ALL.figures}


def test_a_stack_line_counts_its_rows_and_each_family_once():
    """by_stack: MAPE over the stack's rows; the median of its families' medians, so one source's many
    rows count as one family; + is a price too fast."""
    errors = {"a": [0.1, 0.3, 0.5], "b": [-0.2], "c": [0.05]}
    stacks = {"a": "deepspeed", "b": "deepspeed", "c": "megatron"}
    lines = by_stack(errors, stacks, held_out=frozenset({"b"}))
    assert lines[0] == ("megatron: 1 families (0 of them in no fit), 1 rows, out-of-sample MAPE 5.0%; median of the "
                        "families' median errors +5.0%; 1 of 1 families priced fast (c +5.0%)")
    assert lines[1] == ("deepspeed: 2 families (1 of them in no fit), 4 rows, out-of-sample MAPE 27.5%; median of the "
                        "families' median errors +5.0%; 1 of 2 families priced fast (a +30.0%, b -20.0%)")


def _row(ident, measured, metric="step_time_s", dtype="bf16", recompute="full", nodes=2):
    """A public row as parsim.profile.published reads one, for the pick tests."""
    model = {"model": "gpt", "args": {"layers": 2, "hidden": 64, "heads": 4, "seq_len": 128, "vocab": 256},
             "training": {"global_batch_size": 8, "dtype": dtype, "recompute": recompute}}
    return replace(FIGURES.figures[0], id=ident, model=_freeze(model), profile="dgx-a100", nodes=nodes,
                   devices_per_node=None, metric=metric, measured=measured, routing=())


def test_a_pick_is_scored_by_the_measured_speed_of_the_row_parsim_prices_fastest():
    """Three layouts of one model on one cluster, step times measured 10, 8 and 12 s and priced 9, 11 and 7 s:
    parsim picks the third, which ran at 8/12 of the fastest's speed (regret 1/3); a row at random falls
    short by (0.2 + 0 + 1/3) / 3.  A row that recomputes otherwise shares the group (the planner chooses
    that too); one in another dtype or on another cluster size does not, and a group of one is no choice."""
    rows = [(_row("a", 10.0), "fam", 10.0, 9.0), (_row("b", 8.0, recompute="selective"), "fam", 8.0, 11.0),
            (_row("c", 12.0), "fam", 12.0, 7.0), (_row("d", 5.0, dtype="fp16"), "fam", 5.0, 1.0),
            (_row("e", 5.0, nodes=4), "fam", 5.0, 1.0)]
    (group,) = pick_groups(rows)
    assert (group.rows, group.fastest, group.pick) == (("a", "b", "c"), "b", "c")
    assert group.regret == pytest.approx(1 / 3) and group.random_regret == pytest.approx((0.2 + 1 / 3) / 3)
    faster = pick_groups([(_row("x", 10.0, metric="tokens_per_s_per_gpu"), "fam", 10.0, 5.0),
                          (_row("y", 20.0, metric="tokens_per_s_per_gpu"), "fam", 20.0, 6.0)])
    assert faster[0].pick == faster[0].fastest == "y" and faster[0].regret == 0.0
    lines = picks_text([group], held_out=frozenset({"fam"}))
    assert lines[0].startswith("every family: 1 groups of 3 rows; parsim's pick the measured fastest in 0;")
    assert "short of the fastest by a median 33.3%" in lines[1] and lines[2].startswith("  fam: 1 groups")
    assert lines[0].endswith("a row at random falls short by a median 17.8% (mean 17.8%)")


def test_a_harness_table_with_an_unknown_stack_names_the_field(tmp_path):
    path = tmp_path / "harnesses.yaml"
    path.write_text("schema_version: 1\nfamilies:\n  llm-foundry: composer\n")
    with pytest.raises(InputError, match=r"families\.llm-foundry.*megatron, deepspeed, torch-fsdp"):
        load_harnesses(path)


def test_the_figures_cover_the_public_rows():
    ids = {f.id for f in FIGURES.figures}
    assert sum(i.startswith("narayanan-t1-") for i in ids) == 10              # all of Table 1
    assert {"dle-rn50-a100-tf32-1gpu", "dle-rn50-a100-amp-1gpu", "dle-rn50-v100-fp32-1gpu",
            "dle-rn50-v100-amp-1gpu"} <= ids
    # the goals of issue 29: DLE 1-GPU rows 10%, Narayanan Table 1 rows 5%, other rows 10%
    for f in FIGURES.figures:
        goal = 0.05 if f.id.startswith("narayanan-t1-") else 0.10
        assert f.tolerance == goal, f.id


def test_the_39b_row_fits_the_usable_memory():
    # the paper ran it, so it must fit what an A100 leaves a training process (the profile's
    # memory_reserved), not only its raw 80 GB: a check that the headroom is not overstated
    figure = FIGURES.by_id("narayanan-t1-39.1b")
    spec = figure_spec(figure)
    cluster = load_cluster("dgx-a100:64x8")
    compute = AnalyticalCompute.for_training(cluster.device, spec.training)
    cfg = resolve_config(spec, cluster, compute, dp=32, pp=2, tp=8, tp_layout="megatron", microbatches=12,
                         schedule="1f1b", recompute=True)
    est = simulate(spec.graph, spec.training, cluster, cfg, compute, keep_timeline=False)
    assert max(est.peak_memory_bytes) <= cluster.device.usable_memory_bytes


@pytest.fixture(scope="module")
def megatron_39b():
    spec = load_model("examples/megatron_39b.yaml")
    cluster = load_cluster("dgx-a100:64x8")
    return spec, cluster, AnalyticalCompute.for_training(cluster.device, spec.training)


@pytest.fixture(scope="module")
def paper_config(megatron_39b):
    spec, cluster, compute = megatron_39b
    cfg = resolve_config(spec, cluster, compute, dp=32, pp=2, tp=8, tp_layout="megatron", microbatches=12,
                         schedule="1f1b", recompute=True)
    return cfg, simulate(spec.graph, spec.training, cluster, cfg, compute, keep_timeline=False)


def test_planner_beats_or_matches_the_papers_configuration(megatron_39b, paper_config):
    spec, cluster, compute = megatron_39b
    result = plan(spec, cluster, compute, Constraints(top=3), progress=False)
    best = result.chosen
    assert best.estimate.step_time_s <= paper_config[1].step_time_s
    assert best.peak_memory_bytes <= result.capacity_bytes
    assert best.config.world_size == 512
    # Without ZeRO, as the paper ran (Megatron-LM 2021 had no distributed optimizer), the search
    # must still match the paper's layout, and does so with tensor parallelism.  (With ZeRO
    # searched, FSDP over all 512 GPUs wins since NCCL's rings between nodes are priced on all 8
    # NICs of a node: parsim.cost.comm._between_nodes.)
    as_paper = plan(spec, cluster, compute, Constraints(top=3, zero=0), progress=False).chosen
    assert as_paper.estimate.step_time_s <= paper_config[1].step_time_s
    assert as_paper.config.world_size == 512 and as_paper.config.zero == 0 and as_paper.config.tp > 1


def test_gpt3_175b_on_1024_a100_fits_with_three_factors():
    spec = load_model("examples/gpt3_175b.yaml")
    cluster = load_cluster("dgx-a100:128x8")
    result = plan(spec, cluster, AnalyticalCompute(cluster.device, "fp16"), Constraints(top=8), progress=False)
    c = result.chosen.config
    assert c.dp * c.tp * c.pp == 1024 and c.tp > 1
    assert c.tp <= 8                                    # tensor parallelism stays inside a DGX node
    # a three-factor plan (Narayanan et al. 2021's shape) fits and ranks within 5% of the pick; since
    # selective recomputation (2026-11-27) the pick may instead be dp=128 tp=8 with ZeRO-3, priced
    # 0.6% faster: a near tie, not a three-factor plan
    three = [x for x in result.ranked if x.config.tp > 1 and x.config.pp > 1]
    assert three and three[0].peak_memory_bytes <= result.capacity_bytes
    assert three[0].estimate.step_time_s <= 1.05 * result.chosen.estimate.step_time_s
    # with headroom counted (runtime context, NCCL buffers, fragmentation) the pick fits the usable
    # memory, and the explanation shows by how much
    assert result.capacity_bytes == cluster.device.usable_memory_bytes < cluster.device.memory_bytes
    assert result.margin_bytes == result.capacity_bytes - result.chosen.peak_memory_bytes >= 0
    memory = next(line for line in result.explanation if line.startswith("memory: "))
    assert memory.endswith(f"margin {human_bytes(result.margin_bytes)}") and " usable (74.51 GiB raw less " in memory
    print(f"{c.dp=} {c.tp=} {c.pp=} {c.schedule=}: {memory}")
    assert any("bottleneck" in line for line in result.explanation)
    # without tensor parallelism and without ZeRO a plan fits only by recomputing, on the raw 80 GB;
    # on the usable memory it is a near miss either way (64 stages: some 59.4 of 61.1 GiB after the
    # 2026-11-28 attention refit, 1.1 GiB over since the loss on the last stage moved the split, as
    # about 2 GiB over before that refit), so it is not asserted; sharding the optimizer state over
    # dp (ZeRO-1) fits one; the pick is faster than both
    fp16 = AnalyticalCompute(cluster.device, "fp16")
    no_tp = plan(spec, cluster, fp16, Constraints(top=1, tp=1, zero=0, max_memory_bytes=cluster.device.memory_bytes),
                 progress=False)
    assert no_tp.chosen.config.recompute and no_tp.chosen.peak_memory_bytes <= no_tp.capacity_bytes
    sharded = plan(spec, cluster, fp16, Constraints(top=1, tp=1), progress=False)
    assert sharded.chosen.config.zero >= 1 and sharded.chosen.peak_memory_bytes <= sharded.capacity_bytes
    assert result.chosen.estimate.step_time_s < min(no_tp.chosen.estimate.step_time_s,
                                                    sharded.chosen.estimate.step_time_s)


def test_gpt3_175b_without_tensor_parallelism_or_recomputation_does_not_fit():
    spec = load_model("examples/gpt3_175b.yaml")
    cluster = load_cluster("dgx-a100:128x8")
    with pytest.raises(DoesNotFitError, match="tensor parallelism"):
        plan(spec, cluster, AnalyticalCompute(cluster.device, "fp16"), Constraints(top=1, tp=1, recompute=False),
             progress=False)


# NVIDIA DeepLearningExamples' ResNet-50 v1.5 on one DGX A100 (benchmarks/bench_published.py): the
# 8-GPU AMP row is data parallel over the node, and the node's loader workers feed all eight
# replicas.  The shipped profile has no input_pipeline (no public per-core rate for that loader on
# an EPYC 7742 was found), so the rates here are synthetic, set around the compute-bound figure:
# the closed form is the point, not the rate.
@pytest.fixture(scope="module")
def dle_resnet50_amp():
    graph = extract_graph(resnet50(1000, "imagenet"), InputSpec((3, 224, 224)), name="resnet50", dtype="fp16")
    return graph, Training(global_batch_size=256, dtype="fp16", optimizer="momentum", memory_format="channels_last")


def _dle_throughput(graph, training, gpus, pipe):
    cluster = load_cluster(f"dgx-a100:1x{gpus}")
    cluster = replace(cluster, profile=replace(cluster.profile, input_pipeline=pipe))
    training = replace(training, global_batch_size=256 * gpus)
    compute = AnalyticalCompute.for_training(cluster.device, training)
    est = simulate(graph, training, cluster, ParallelConfig(gpus, 1, 1, "1f1b", 1, (0, len(graph))), compute,
                   keep_timeline=False)
    return 256 * gpus / est.step_time_s, est


def test_node_loader_bounds_8_gpu_throughput_as_min_of_compute_and_node_rate(dle_resnet50_amp):
    graph, training = dle_resnet50_amp
    compute8, free8 = _dle_throughput(graph, training, 8, None)
    compute1, _ = _dle_throughput(graph, training, 1, None)
    assert free8.input is None and not free8.input_bound and compute8 > 7 * compute1
    for factor in (0.8, 1.25):
        rate = factor * compute8                               # images/s for the whole node
        pipe = InputPipeline(True, host_samples_per_s=rate, sample_elements=3 * 224 * 224)
        tput8, est8 = _dle_throughput(graph, training, 8, pipe)
        assert tput8 == pytest.approx(min(compute8, rate), rel=1e-9)
        assert est8.input_bound == (rate < compute8)
        # one GPU has the node's loader to itself: the same rate leaves the 1-GPU row compute-bound
        tput1, est1 = _dle_throughput(graph, training, 1, pipe)
        assert tput1 == pytest.approx(min(compute1, rate), rel=1e-9) and not est1.input_bound
    # a rate measured for another input (CIFAR's 3 x 32 x 32) does not price ImageNet samples
    cifar = InputPipeline(True, host_samples_per_s=0.5 * compute8, sample_elements=3 * 32 * 32)
    assert _dle_throughput(graph, training, 8, cifar)[0] == pytest.approx(compute8, rel=1e-12)


# ------------------------------------------------- Megatron-Bridge dense DGX-H100 rows (development rows)

MBRIDGE = [f for f in FIGURES.figures if "Megatron-Bridge" in f.citation]


def _row_number(figure, label: str) -> int:
    """The integer after ``label`` in the row's citation text, e.g. "GBS 256"."""
    m = re.search(rf"\b{label} (\d+)", figure.row)
    assert m, (figure.id, label)
    return int(m.group(1))


@pytest.mark.parametrize("figure", MBRIDGE, ids=[f.id for f in MBRIDGE])
def test_a_megatron_bridge_row_is_its_tables_configuration(figure):
    """The row's parallel sizes, batch and precision are the table's (row:) and the recipe's."""
    par, model = dict(figure.parallel), _thaw(figure.model)
    training, gpus = model["training"], figure.nodes * 8
    assert re.search(rf"\b{gpus} GPUs\b", figure.row) and "DGX-H100" in figure.row
    assert par["dp"] * par["tp"] * par["pp"] * par["cp"] == gpus
    assert (par["tp"], par["pp"], par["cp"], par["chunks"]) == tuple(_row_number(figure, k) for k in ("TP", "PP", "CP", "VP"))
    mbs = _row_number(figure, "MBS")
    assert training["global_batch_size"] == _row_number(figure, "GBS") == par["dp"] * par["microbatches"] * mbs
    assert model["args"]["seq_len"] == _row_number(figure, "seq") == 8192
    # the recipe: FP8 current scaling beside bf16, no recomputation, the distributed optimizer,
    # sequence parallelism with TE's tp-communication overlap, interleaved 1F1B
    assert "FP8" in figure.row and training["fp8"] and training["dtype"] == "bf16" and training["recompute"] == "none"
    assert par["zero"] == 1 and par["tp_layout"] == "megatron-sp" and par["tp_comm_overlap"]
    assert par["schedule"] == "interleaved" and par.get("cp_mode", "ring") == "ring"
    assert figure.metric == "tokens_per_s_per_gpu" and figure.measured == float(re.search(r": (\d+) tokens/s/GPU",
                                                                                           figure.row).group(1))


@pytest.mark.parametrize("figure", MBRIDGE, ids=[f.id for f in MBRIDGE])
def test_parsims_balanced_split_is_megatrons_even_split(figure):
    """Megatron splits the decoder layers evenly over pp x VP virtual stages, the embedding with the
    first and the head with the last, or (405B: account_for_embedding_in_pipeline_split and
    account_for_loss_in_pipeline_split) counts each as one more layer.  parsim's balanced split
    of the row, or the split the row gives where the balance differs (its comment), must give the
    same boundaries, so the row prices Megatron's stages."""
    spec = figure_spec(figure)
    layers = len(spec.graph) - 2                                  # embed, the decoder layers, head
    par = dict(figure.parallel)
    stages = par["pp"] * par["chunks"]
    accounted = dict(_thaw(figure.source_config)).get("account_for_embedding_in_pipeline_split", False)
    if accounted:
        per = (layers + 2) // stages
        assert per * stages == layers + 2
        want = tuple(per * k for k in range(stages + 1))
    else:
        per = layers // stages
        assert per * stages == layers
        want = (0,) + tuple(1 + per * k for k in range(1, stages)) + (layers + 2,)
    cluster = figure_cluster(figure, shipped_profile(figure))
    compute = AnalyticalCompute.for_training(cluster.device, spec.training)
    cfg = resolve_config(spec, cluster, compute, **par)
    assert cfg.bounds == want


def _figures_file(tmp_path, parallel: dict) -> str:
    row = {"id": "x", "source": "s", "row": "r",
           "model": {"model": "gpt", "args": {"layers": 2, "hidden": 64, "heads": 2, "seq_len": 128, "vocab": 256},
                     "training": {"global_batch_size": 8, "dtype": "bf16", "optimizer": "adam"}},
           "cluster": {"profile": "dgx-h100", "nodes": 1, "devices_per_node": 2},
           "parallel": parallel, "measured": {"samples_per_s": 1.0}, "tolerance": 0.1}
    path = tmp_path / "figures.yaml"
    path.write_text(yaml.safe_dump({"schema_version": 1, "sources": {"s": "a source"}, "figures": [row]}))
    return str(path)


def test_tp_comm_overlap_and_cp_mode_reach_the_simulator(tmp_path):
    base = {"dp": 1, "tp": 2, "tp_layout": "megatron-sp"}
    plain, overlapped = (price(load_figures(_figures_file(tmp_path, {**base, "tp_comm_overlap": o})).figures[0])
                         for o in (False, True))
    assert overlapped.step_time_s < plain.step_time_s and "sp overlap" in overlapped.config
    ring = {"dp": 1, "cp": 2}
    by_mode = {m: price(load_figures(_figures_file(tmp_path, {**ring, "cp_mode": m})).figures[0]) for m in CP_MODES}
    assert by_mode["ring"].step_time_s != by_mode["allgather"].step_time_s
    assert "cp=2 allgather" in by_mode["allgather"].config and "cp=2 m=" in by_mode["ring"].config


def test_a_rows_split_reaches_the_simulator(tmp_path):
    """A row's given stage boundaries are the ones priced (a balanced split would not put three of
    four units on the first stage)."""
    row = {"dp": 1, "pp": 2, "microbatches": 2}
    balanced, skewed = (price(load_figures(_figures_file(tmp_path, {**row, **extra})).figures[0])
                        for extra in ({}, {"split": "0,3,4"}))
    assert skewed.step_time_s > balanced.step_time_s


def test_a_row_the_simulator_refuses_names_itself(tmp_path):
    """ZeRO over one data-parallel rank is refused when priced: the one line names the file, the row
    and its parallel: section, as a bad field is named when read."""
    path = _figures_file(tmp_path, {"dp": 1, "tp": 2, "zero": 1})
    with pytest.raises(InfeasibleError, match=re.escape(f"{path}: figures[0] (x): parallel: zero=1")):
        price(load_figures(path).figures[0])


@pytest.mark.parametrize("parallel, field", [({"dp": 1, "cp_mode": "p2p"}, "parallel.cp_mode"),
                                             ({"dp": 1, "tp_comm_overlap": "yes"}, "parallel.tp_comm_overlap"),
                                             ({"dp": 1, "pp": 2, "split": "0,x"}, "parallel.split")])
def test_a_bad_parallel_field_names_itself(tmp_path, parallel, field):
    path = _figures_file(tmp_path, parallel)
    with pytest.raises(InputError, match=re.escape(f"{path}: figures[0].{field}")):
        load_figures(path)
