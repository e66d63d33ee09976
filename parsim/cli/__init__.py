"""The ``parsim`` command: parse, call, print.  Every command takes ``--json``.  The parser and
``main`` are here; the commands that predict are parsim.cli.plan, those that measure
parsim.cli.measure.

User errors (ParsimError) print one line on stderr and exit with their code (2 for bad input,
3 when nothing fits); no traceback reaches the user.
"""

from __future__ import annotations

import argparse
import os
import sys

from parsim.cli.common import DEFAULT_CLUSTER
from parsim.cli.measure import (cmd_calibrate, cmd_profile, cmd_profile_comm, cmd_profile_data, cmd_profile_device, cmd_run,
                                cmd_validate)
from parsim.cli.plan import cmd_cluster, cmd_model, cmd_plan, cmd_simulate
from parsim.errors import InputError, ParsimError
from parsim.inputs import (layer_counts_arg, nonnegative_float_arg, positive_float_arg, positive_int_arg,
                           rising_sizes_arg)

BUILTIN_SETS = ("default", "quick", "schedules", "zero")


def validation_set_arg(text: str) -> str:
    """--set: a built-in set's name, or a set file that exists."""
    if text in BUILTIN_SETS or (text.endswith((".yaml", ".yml")) and os.path.isfile(text)):
        return text
    raise argparse.ArgumentTypeError(f"expected one of {', '.join(BUILTIN_SETS)} or a set file (.yaml) that "
                                     f"exists, got {text!r}")

def _tp_flags(p) -> None:
    from parsim.model.spec import TP_LAYOUTS, ZERO_STAGES
    from parsim.plan import CP_MODES

    p.add_argument("--tp", type=positive_int_arg, help="tensor-parallel group size")
    p.add_argument("--cp", type=positive_int_arg,
                   help="context-parallel group size: each rank holds s/cp tokens of a sequence, attention by a "
                        "K,V ring (models with attention; plan: searched unless given)")
    p.add_argument("--ep", type=positive_int_arg,
                   help="expert-parallel group size (mixtures of experts): each rank holds E/ep routed experts of "
                        "every MoE layer, tokens exchanged by all-to-alls; ep x etp divides tp x cp x dp (MoE "
                        "Parallel Folding) and ep the experts (plan: searched unless given)")
    p.add_argument("--etp", type=positive_int_arg,
                   help="expert tensor-parallel size with tp > 1 (Megatron-Core's --expert-tensor-parallel-size): "
                        "1, the routed experts whole on each rank beside attention's tp (default, as NVIDIA's MoE "
                        "recipes run), or tp, split as attention is (plan: searches both unless given)")
    p.add_argument("--ep-overlap", action="store_true",
                   help="ep > 1: hide each MoE layer's all-to-alls under the compute of the adjacent backward (forward) "
                        "of another micro-batch, as DeepSeek-V3's DualPipe pairs them (default: exposed)")
    p.add_argument("--tp-layout", choices=TP_LAYOUTS,
                   help="operator strategies for tp > 1: megatron, megatron-sp, or the model's shard: section")
    from parsim.model.recompute import MODES

    p.add_argument("--recompute", nargs="?", const="full", choices=MODES, default=None,
                   help="activation recomputation: none, selective (the core attention only, Korthikanti et al. "
                        "2022; Megatron's default), or full (alone: full); plan: searches all three unless given")
    p.add_argument("--no-recompute", dest="recompute", action="store_const", const="none",
                   help="no activation recomputation (--recompute none)")
    p.add_argument("--fp8", action="store_true",
                   help="Linear GEMMs in FP8 beside bf16, as Transformer Engine runs them (training.fp8: true; "
                        "a bf16 model on a device with an fp8 peak)")
    p.add_argument("--tp-comm-overlap", action=argparse.BooleanOptionalAction, default=None,
                   help="tp > 1 with megatron-sp: overlap the tensor-parallel collectives with the adjacent GEMMs "
                        "(Megatron-Core's --tp-comm-overlap; plan: tries both where it applies unless given)")
    p.add_argument("--cp-mode", choices=CP_MODES,
                   help="cp > 1: ring (K,V passed around a ring, overlapped) or allgather (K,V all-gathered, "
                        "exposed: Llama 3); plan: tries both unless given")
    p.add_argument("--zero", type=int, choices=ZERO_STAGES,
                   help="ZeRO stage over the dp ranks: 0 none, 1 optimizer state, 2 and gradients, 3 and "
                        "parameters (plan: searched unless given)")


def build_parser() -> argparse.ArgumentParser:
    from parsim.export.commands import add_from_options as _from_flags, cmd_export
    from parsim.profile.rounds import RoundsPolicy

    parser = _Parser(prog="parsim", description="Simulate and plan parallel training.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("model", help="print a model's layer table")
    p.add_argument("model", help="model.yaml")
    p.add_argument("--ops", action="store_true", help="list the operators (ids for shard: strategies) instead")
    p.add_argument("--json", action="store_true", help="print JSON on stdout")
    p.set_defaults(func=cmd_model)

    p = sub.add_parser("cluster", help="print a cluster: devices, groups and links")
    p.add_argument("cluster", help="PROFILE:NODESxDEVICES (ascend910:2x8), a profile YAML or a rank-table JSON")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_cluster)

    p = sub.add_parser("simulate", help="predict one training step of a parallel configuration")
    p.add_argument("model", help="model.yaml, a plan.json from `parsim plan -o`, or with --from a framework's config")
    p.add_argument("--cluster", help=f"cluster (default {DEFAULT_CLUSTER}, or the plan's)")
    p.add_argument("--dp", type=positive_int_arg, help="data-parallel replicas (default: devices / pp)")
    p.add_argument("--pp", type=positive_int_arg, help="pipeline ranks")
    p.add_argument("--microbatches", type=positive_int_arg, help="micro-batches per replica")
    p.add_argument("--schedule", choices=SCHEDULE_CHOICES)
    p.add_argument("--chunks", type=positive_int_arg, help="model chunks per rank (interleaved, zbh1)")
    p.add_argument("--split", help="balanced | uniform (Megatron's default: layers evenly over the stages) | manual "
                                   "(model.yaml pipeline_stage) | boundaries e.g. 0,8,18")
    p.add_argument("--placement", choices=("pp-inner", "dp-inner"), default="pp-inner",
                   help="pp-inner: pipeline neighbours on adjacent devices; dp-inner: replicas adjacent")
    _tp_flags(p)
    p.add_argument("--recompute-layers", type=layer_counts_arg, default=(),
                   help="full recomputation of the first N layers of each stage only (Megatron's --recompute-method "
                        "block --recompute-num-layers N), or one count per stage (4,0: MindFormers' recompute list); "
                        "implies --recompute full")
    p.add_argument("--recompute-every", type=positive_int_arg, default=0,
                   help="full recomputation of every N-th layer of each pipeline rank only (torchtitan's "
                        "selective_ac_option N); implies --recompute full")
    p.add_argument("--dp-shard", type=positive_int_arg, default=0,
                   help="hybrid sharding (HSDP): ZeRO's shards span groups of N data-parallel ranks, which "
                        "replicate one another (torchtitan's data_parallel_shard_degree N beside "
                        "data_parallel_replicate_degree dp/N); needs --zero (default: every dp rank)")
    p.add_argument("--overlap-grad-reduce", action=argparse.BooleanOptionalAction, default=None,
                   help="dp > 1, zero 0-1: reduce the gradient buckets as the backward makes them ready (default, as "
                        "torch DDP and Megatron-Core's --overlap-grad-reduce run them), or with --no-overlap-grad-reduce "
                        "all after the rank's backward (Megatron-Core without the flag); default: the plan's or "
                        "imported config's, else overlapped")
    p.add_argument("--no-sync", action="store_true", default=None,
                   help="zero 2-3: FSDP reduce-scatters the gradients once a step, in the last micro-batch's "
                        "backward, the earlier ones accumulating them unsharded (FSDP2's "
                        "set_requires_gradient_sync(False), FSDP1's no_sync(), as Accelerate runs gradient "
                        "accumulation); default: the plan's, else every micro-batch")
    _from_flags(p)
    from parsim.cost.comm import ALGORITHMS
    p.add_argument("--algorithm", choices=ALGORITHMS, default="auto",
                   help="all-reduce algorithm; the cluster's library must implement it (default: the fastest it has)")
    p.add_argument("--profile", help="layer-profile YAML: use the profiled cost model")
    p.add_argument("--trace", help="write a Chrome trace JSON (Perfetto)")
    p.add_argument("--gantt", help="write a Gantt chart (.png or .svg)")
    p.add_argument("--memory-plot", help="write memory over time (.png or .svg)")
    p.add_argument("--csv", help="write per-action times as CSV")
    p.add_argument("--grid", action="store_true", help="print the step x rank grid")
    p.add_argument("-o", "--output", help="write this configuration as a plan.json (for `parsim run`)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_simulate)

    p = sub.add_parser("plan", help="search dp x pp, micro-batches, schedule and split; rank by throughput")
    p.add_argument("model", help="model.yaml, or with --from a framework's config")
    p.add_argument("--cluster", default=DEFAULT_CLUSTER, help=f"cluster (default {DEFAULT_CLUSTER})")
    p.add_argument("--dp", type=positive_int_arg)
    p.add_argument("--pp", type=positive_int_arg)
    p.add_argument("--microbatches", type=positive_int_arg)
    p.add_argument("--schedule", choices=SCHEDULE_CHOICES)
    _tp_flags(p)
    p.add_argument("--max-memory", help="memory per device, e.g. 24GiB, taken as given (default: the device's usable "
                                        "memory: its capacity less the profile's memory_reserved)")
    p.add_argument("--partial-recompute", action="store_true",
                   help="ranked plans that recompute every layer recompute only the fewest layers of each stage that "
                        "fit (Megatron's --recompute-method block); off by default: torchtitan and DeepSpeed cannot "
                        "run it")
    p.add_argument("--hybrid-shard", action="store_true",
                   help="ranked ZeRO plans whose shards span nodes try shard groups of 1, 2, 4, ... nodes (HSDP, "
                        "--dp-shard) and keep the fastest that fits; off by default: Megatron's FSDP2 path and "
                        "DeepSpeed cannot run it")
    p.add_argument("--overlap-grad-reduce", action=argparse.BooleanOptionalAction, default=True,
                   help="the DDP and ZeRO-1 plans reduce their gradient buckets under the backward (default, as torch "
                        "DDP and Megatron-Core's --overlap-grad-reduce run them), or with --no-overlap-grad-reduce "
                        "after it (Megatron-Core without the flag); ZeRO 2-3 plans overlap as FSDP does")
    p.add_argument("--dp-shard", type=positive_int_arg,
                   help="hybrid sharding (HSDP) with shard groups of N data-parallel ranks: the search offers the ZeRO "
                        "plans it applies to and prices its ranked plans again with it (default: model.yaml's "
                        "parallel.dp_shard, else ZeRO over every dp rank)")
    _from_flags(p)
    p.add_argument("--top", type=positive_int_arg, default=10, help="rows in the ranked table")
    p.add_argument("--profile", help="layer-profile YAML: use the profiled cost model")
    p.add_argument("--tp-profile", action="append",
                   help="a profile of tensor-parallel shards (parsim profile --tp): prices that tp's candidates; "
                        "repeatable")
    p.add_argument("-o", "--output", help="write the chosen plan as plan.json")
    p.add_argument("--report", metavar="DIR",
                   help="write DIR/report.html, one self-contained page: the pick, the explanation, the table, "
                        "the pick's Gantt chart, memory and bubble, and its expected error (--validation)")
    p.add_argument("--validation", metavar="FILE",
                   help="a validation.json from parsim validate: the report shows its errors")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("profile", help="time each layer's forward and backward per micro-batch size")
    p.add_argument("model", help="model.yaml")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--microbatch-sizes", type=rising_sizes_arg, default="1,2,4,8,16,32")
    policy = RoundsPolicy()
    p.add_argument("--repeats", type=positive_int_arg, default=policy.repeats,
                   help=f"timed repeats per size and round, after one warm-up (their median is the round's; "
                        f"default {policy.repeats})")
    p.add_argument("--min-rounds", type=positive_int_arg, default=policy.min_rounds,
                   help=f"rounds at least: each measures every size once, interleaved (default {policy.min_rounds})")
    p.add_argument("--max-rounds", type=positive_int_arg, default=policy.max_rounds,
                   help=f"rounds at most (default {policy.max_rounds})")
    p.add_argument("--target", type=nonnegative_float_arg, default=policy.target,
                   help="stop once every size's forward and backward chain is known within this, relative, at 90%% "
                        f"(default {policy.target})")
    p.add_argument("--budget", type=positive_float_arg, default=policy.budget_s,
                   help=f"stop after this many seconds of rounds even if not that precise (default {policy.budget_s:g})")
    p.add_argument("--strict", action="store_true",
                   help="refuse (exit 2) a profile the canary or the host's counters found disturbed")
    p.add_argument("--threads", type=positive_int_arg, default=1, help="compute threads, as in a run (default 1)")
    p.add_argument("--nproc", type=positive_int_arg, default=2,
                   help="profilers running at once, as the ranks of a run share the machine (default 2)")
    p.add_argument("--tp", type=positive_int_arg, default=1,
                   help="profile the tensor-parallel shards (groups of tp of the --nproc processes)")
    p.add_argument("--tp-layout", choices=("megatron", "megatron-sp"), default="megatron",
                   help="a layout the executor runs")
    p.add_argument("--ep", type=positive_int_arg, default=1,
                   help="profile MoE layers with their experts split over groups of ep of the --nproc processes, "
                        "the token all-to-alls included (prices plans of that ep)")
    p.add_argument("--noise-threshold", type=nonnegative_float_arg, default=policy.noise_threshold,
                   help="flag an entry whose 90%% interval reaches further than this from its value "
                        f"(default {policy.noise_threshold})")
    p.add_argument("-o", "--output", help="profile file (default MODEL_NAME.profile.json)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_profile)

    p = sub.add_parser("profile-comm", help="measure links, collectives and the device; write a cluster profile")
    p.add_argument("--nproc", type=positive_int_arg, default=2, help="processes on this machine (default 2)")
    p.add_argument("-o", "--output", default="measured-cluster.yaml")
    p.add_argument("--name", default="local-cpu", help="the profile's name")
    p.add_argument("--repeats", type=positive_int_arg, default=9)
    p.add_argument("--dtypes", default="fp32,bf16",
                   help="dtypes to fit the all-reduce and measure the overlap in, fp32 first (default fp32,bf16)")
    p.add_argument("--threads", type=positive_int_arg, default=1,
                   help="compute threads per rank, as in a run (default 1); the interaction of collectives and "
                        "compute is recorded at this count")
    p.add_argument("--strict", action="store_true",
                   help="refuse (exit 2) a profile the canary or the host's counters found disturbed")
    p.add_argument("--json", action="store_true", help="print the measured profile as JSON")
    p.set_defaults(func=cmd_profile_comm)

    p = sub.add_parser("profile-device", help="time GEMMs, convolutions, memory and launches on this device; "
                                              "write kernel tables and a hardware profile")
    p.add_argument("-o", "--output", required=True, help="the hardware profile YAML to write")
    p.add_argument("--device", choices=("cpu", "cuda", "npu"), default="cpu")
    p.add_argument("--name", default="measured-device", help="the profile's name")
    p.add_argument("--tables", help="folder for gemm.csv, conv.csv, device.csv (default: OUTPUT without .yaml, "
                                    "plus .kernels)")
    p.add_argument("--links", help="a profile from parsim profile-comm: its node, network and collective sections "
                                   "(default: one device)")
    p.add_argument("--peak", help="datasheet peaks in TFLOPS, e.g. fp16=989,fp32=67 (default: the best GEMM measured)")
    p.add_argument("--quick", action="store_true", help="a small grid (seconds), for a first look or a test")
    p.add_argument("--repeats", type=positive_int_arg, default=5, help="timed repeats per operation (default 5)")
    p.add_argument("--threads", type=positive_int_arg, default=1,
                   help="CPU: intra-op threads, as a rank of a run has (default 1)")
    p.add_argument("--budget-minutes", type=positive_float_arg, default=30.0,
                   help="leave out the largest GEMMs until the estimate fits (default 30)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_profile_device)

    p = sub.add_parser("profile-data", help="time the executor's input loader; write input_pipeline into a cluster profile")
    p.add_argument("-o", "--output", required=True, help="the cluster profile YAML to update")
    p.add_argument("--data", help="a cifar-10-batches-bin folder (default: synthetic CIFAR-shaped images)")
    p.add_argument("--samples", type=positive_int_arg, default=2048, help="samples per repeat (default 2048)")
    p.add_argument("--batch", type=positive_int_arg, default=32)
    p.add_argument("--repeats", type=positive_int_arg, default=5)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_profile_data)

    p = sub.add_parser("calibrate", help="fit the analytical model's efficiencies to a layer profile, or a "
                                         "hardware profile's fields to published end-to-end figures (--published)")
    p.add_argument("profile", nargs="?", help="layer profile from `parsim profile`")
    p.add_argument("--model", help="the model.yaml the profile measured")
    p.add_argument("--cluster", default="local-cpu", help="the profile whose device to calibrate")
    p.add_argument("-o", "--output", help="write the calibrated cluster profile YAML")
    p.add_argument("--published", metavar="FIGURES", help="a published-figures YAML (results/published/figures.yaml): "
                                                          "fit the fields its calibration section names for --cluster")
    p.add_argument("--fit", help="with --published: comma-separated profile fields to fit, instead of the file's")
    p.add_argument("--rows", help="with --published: comma-separated figure ids to fit on, instead of the file's")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_calibrate)

    p = sub.add_parser("validate", help="predict plans, run them, and compare")
    p.add_argument("model", nargs="?", default="examples/resnet50_cifar10_local.yaml")
    p.add_argument("--cluster", default="local-cpu")
    p.add_argument("--profile", help="one layer profile for every plan and pass, and the cluster's collectives as "
                                     "its profile has them (default: before each pass, profile the model alone and "
                                     "with every core busy, price each plan with the matching one, and measure the "
                                     "collectives with profile-comm)")
    p.add_argument("--profile-once", action="store_true",
                   help="profile before the first pass only, and price every pass with that")
    p.add_argument("--keep-collectives", action="store_true",
                   help="price collectives from the cluster profile as it is, without measuring them first")
    p.add_argument("--microbatch-sizes", type=rising_sizes_arg, default=None,
                   help="sizes to profile when --profile is not given, besides the plans' own (the planner's "
                        "pick is kept to the profiled sizes; default 2,4,8,16,32, none for a set file)")
    p.add_argument("--set", type=validation_set_arg, default="default",
                   help="plans to run: default (the full set), quick (three), schedules (pp=2 m=4 under 1F1B, "
                        "interleaved and ZB-H1), zero (dp=2 m=2 under ZeRO 0-3), or a set file such as "
                        "results/heldout/2026-11-27.yaml (its plans for the model)")
    p.add_argument("--steps", type=positive_int_arg, default=12, help="steps per run, 3 of them warm-up (default 12)")
    p.add_argument("--passes", type=positive_int_arg, default=1,
                   help="run the whole set this many times in turn; medians over passes, spread reported")
    p.add_argument("--timeout", type=positive_float_arg, default=300.0, help="seconds a run may take (default 300)")
    p.add_argument("--out", default="runs/validate", help="every output: runs, plots, plans (git-ignored)")
    p.add_argument("--results", default="results",
                   help="the evidence, to commit: validation.json, the CSVs and the profiles that priced them, "
                        "under RESULTS/<date>-<cpu>/<set>/<model>/ (parsim.report.accuracy reads them)")
    p.add_argument("--no-results", action="store_true", help="write no evidence copy (a trial run)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_validate)

    from parsim.export import TARGETS
    p = sub.add_parser("export", help="write a plan as MindSpore's, Megatron-LM's, torchtitan's or DeepSpeed's settings")
    p.add_argument("plan", help="a plan.json from `parsim plan -o`")
    p.add_argument("--to", required=True, choices=TARGETS, help="the framework to launch it with")
    p.add_argument("-o", "--output", help="the file to write (default: PLAN.TARGET.{py,args,toml,json}; - prints it)")
    p.set_defaults(func=cmd_export)

    from parsim.run import add_run_options
    p = sub.add_parser("run", help="run a plan with torch.distributed on this machine and measure it")
    add_run_options(p)
    p.add_argument("--nproc", type=positive_int_arg, help="processes to start (default: the plan's dp x pp x tp x cp)")
    p.set_defaults(func=cmd_run)
    return parser


SCHEDULE_CHOICES = ("gpipe", "1f1b", "interleaved", "zbh1")


class _Parser(argparse.ArgumentParser):
    """argparse, with a bad flag or value as one line (a user error, exit 2) instead of the usage."""

    def error(self, message: str):
        raise InputError(f"{message} (see {self.prog} --help)")


def main(argv: list[str] | None = None) -> int:
    import warnings
    from parsim.hardware.machine import ProfileMachineWarning

    shown = warnings.showwarning

    def one_line(message, category, *rest, **kw):      # a warning the user acts on: one line, no source
        if issubclass(category, ProfileMachineWarning):
            print(f"parsim: warning: {message}", file=sys.stderr)
        else:
            shown(message, category, *rest, **kw)
    try:
        args = build_parser().parse_args(argv)
        with warnings.catch_warnings():
            warnings.simplefilter("default", ProfileMachineWarning)    # once per message
            warnings.showwarning = one_line
            return args.func(args)
    except ParsimError as e:
        print(f"parsim: error: {e}", file=sys.stderr)
        return e.exit_code
    except BrokenPipeError:  # e.g. `parsim model m.yaml | head`
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print("parsim: interrupted", file=sys.stderr)
        return 130
