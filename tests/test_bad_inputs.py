"""The bad-input table: every command, every kind of file (model.yaml, plan.json, layer profiles,
hardware profiles, rank tables, cluster specs) and command-line values.  Each gets one line
naming the file or flag and the field, exit 2, no traceback, at once (well under 10 s: every
search is bounded by what the batch and the cut units can use), and starts no process."""

import json
import subprocess
import sys
import time

import pytest

import parsim.exec.launch
import parsim.profile.layers
import parsim.validation
from parsim.cli import main
from parsim.plan import ParallelConfig, Plan

GOOD_MODEL = """schema_version: 1
model: resnet50
args: {num_classes: 10, image_size: 32}
training: {global_batch_size: 32}
"""

# On paper only (no torch module to build): the fast model for the cases about other inputs.
PAPER_MODEL = """schema_version: 1
layers:
  - {name: a, fwd_flops: 2.0e+8, params: 1000, output_bytes: 4096, saved_bytes: 16384}
  - {name: b, fwd_flops: 2.0e+7, params: 100, output_bytes: 40, saved_bytes: 4096}
training: {global_batch_size: 8}
"""

GOOD_PROFILE = """schema_version: 1
name: tiny
device: {name: d, memory: 1GiB, memory_bandwidth_gb_per_s: 10, peak_tflops: {fp32: 1}}
node: {devices: 2, group_link: {bandwidth_gb_per_s: 1}}
collective: {library: gloo}
"""


def _collective(entries: str) -> dict:
    """GOOD_PROFILE's p.yaml with ``entries`` added to its collective section."""
    return {"p.yaml": GOOD_PROFILE.replace("library: gloo}", f"library: gloo, {entries}}}")}


LAYER_PROFILE = {"schema_version": 1, "kind": "layer-profile", "microbatch_sizes": [1, 2, 4],
                 "layers": [{"name": "a", "fwd_s": [0.01, 0.02, 0.04], "bwd_s": [0.02, 0.04, 0.08]},
                            {"name": "b", "fwd_s": [0.001, 0.002, 0.004], "bwd_s": [0.002, 0.004, 0.008]}]}

RANK_TABLE = {"server_count": "1", "server_list": [{"server_id": "a", "device": [
    {"device_id": "0", "device_ip": "x", "rank_id": "0"}, {"device_id": "1", "device_ip": "y", "rank_id": "1"}]}]}

RESNET_UNITS = ["head"] + [f"layer{i}.{j}" for i, n in ((1, 3), (2, 4), (3, 6), (4, 3)) for j in range(n)] + ["fc"]
BINARY = bytes(range(255, -1, -1))              # 0xff is no UTF-8 byte
D = "{d}"                                       # the test's folder, in argv and file contents


def plan_json(model="m.yaml", layers=("a", "b"), batch=8, edit=None) -> str:
    """A plan.json as `parsim plan -o` writes it (pp=2, dp=1), for the model at {d}/model; ``edit``
    changes the JSON object before it is written."""
    cfg = ParallelConfig(dp=1, pp=2, microbatches=2, bounds=(0, 1, len(layers)))
    d = Plan(f"{D}/{model}", "m", tuple(layers), batch, "fp32", "momentum", "local-cpu", 2, cfg, {}).to_json()
    if edit:
        edit(d)
    return json.dumps(d, indent=2)


RESNET_PLAN = plan_json(layers=RESNET_UNITS, batch=32)


def _set(section, key, value):
    def edit(d):
        d[section][key] = value
    return edit


def _profile(**changes) -> str:
    return json.dumps({**LAYER_PROFILE, **changes})


FIGS = """schema_version: 1
sources: {dle: "a citation"}
figures:
  - id: a100-amp
    source: dle
    row: "1 GPU"
    model: {model: resnet50, training: {global_batch_size: 8, dtype: fp16}}
    cluster: {profile: dgx-a100, nodes: 1, devices_per_node: 1}
    parallel: {dp: 1}
    measured: {samples_per_s: 2470}
    tolerance: 0.1
calibration:
  dgx-a100: {fit: [device.kernels.conv_efficiency], rows: [a100-amp]}
"""


def case(name, argv, files, words):
    """argv: a command line with {d} for the test's folder; files: name -> text or bytes."""
    return pytest.param(argv.split(), files, words, id=name)


M = {"m.yaml": PAPER_MODEL}
R = {"m.yaml": GOOD_MODEL}
SIM = f"simulate {D}/m.yaml --cluster tests/data/ideal.yaml"

CASES = [
    # ---------------------------------------------------------------- model.yaml (parsim model)
    case("model: unknown key", f"model {D}/m.yaml", {"m.yaml": GOOD_MODEL + "colour: red\n"},
         ["m.yaml", "colour", "unknown key"]),
    case("model: unknown nested key", f"model {D}/m.yaml",
         {"m.yaml": GOOD_MODEL.replace("global_batch_size: 32", "global_batch_size: 32, lr: 1")},
         ["training.lr", "unknown key"]),
    case("model: unknown pipeline runtime", f"model {D}/m.yaml",
         {"m.yaml": GOOD_MODEL.replace("global_batch_size: 32", "global_batch_size: 32, pipeline_runtime: deepspeed")},
         ["m.yaml", "training.pipeline_runtime", "megatron", "torch"]),
    case("model: wrong type", f"model {D}/m.yaml", {"m.yaml": GOOD_MODEL.replace("32}\n", "thirty-two}\n")},
         ["training.global_batch_size", "integer"]),
    case("model: zero size", f"model {D}/m.yaml",
         {"m.yaml": GOOD_MODEL.replace("global_batch_size: 32", "global_batch_size: 0")},
         ["training.global_batch_size", "positive"]),
    case("model: negative size", f"model {D}/m.yaml", {"m.yaml": GOOD_MODEL.replace("num_classes: 10", "num_classes: -3")},
         ["args.num_classes", "positive"]),
    case("model: absurd batch", f"model {D}/m.yaml",
         {"m.yaml": PAPER_MODEL.replace("global_batch_size: 8", "global_batch_size: 1000000000000")},
         ["m.yaml", "training.global_batch_size", "1,000,000,000,000 is more than 1,048,576"]),
    case("model: not a finite number", f"model {D}/m.yaml", {"m.yaml": PAPER_MODEL.replace("2.0e+8", ".nan")},
         ["m.yaml", "layers[0].fwd_flops", "finite"]),
    case("model: batch does not divide", f"model {D}/m.yaml",
         {"m.yaml": GOOD_MODEL + "parallel: {dp: 3, microbatches: 2}\n"}, ["training.global_batch_size", "multiple of 6"]),
    case("model: missing file", f"model {D}/nope.yaml", {}, ["nope.yaml", "not found"]),
    case("model: a folder", f"model {D}", {}, ["is a folder", "model.yaml"]),
    case("model: binary file", f"model {D}/m.yaml", {"m.yaml": BINARY},
         ["m.yaml", "not a text file", "byte 0xff at offset 0: invalid start byte", "model.yaml"]),
    case("model: UTF-16 file", f"model {D}/m.yaml", {"m.yaml": PAPER_MODEL.encode("utf-16-le")},
         ["m.yaml", "not a text file", "byte 0x00 at offset 1: NUL byte"]),
    case("model: empty file", f"model {D}/m.yaml", {"m.yaml": "\n"}, ["m.yaml", "empty"]),
    case("model: bad yaml", f"model {D}/m.yaml", {"m.yaml": "a: 1\n b: 2\n"}, ["m.yaml", "YAML", "line 2"]),
    case("model: truncated yaml", f"model {D}/m.yaml", {"m.yaml": "training: [\n"}, ["m.yaml", "YAML", "truncated"]),
    case("model: schema version", f"model {D}/m.yaml", {"m.yaml": PAPER_MODEL.replace("schema_version: 1", "schema_version: 2")},
         ["m.yaml", "schema_version", "reads version 1, got 2"]),
    case("model: module does not import", f"model {D}/m.yaml",
         {"m.yaml": "module: 'no_such_pkg.models:net'\ninput: {shape: [3]}\ntraining: {global_batch_size: 8}\n"},
         ["m.yaml", "module", "no_such_pkg"]),
    case("model: unknown builtin", f"model {D}/m.yaml", {"m.yaml": GOOD_MODEL.replace("resnet50", "resnet9000")},
         ["model", "resnet9000"]),
    case("model: bad stage assignment", f"model {D}/m.yaml", {"m.yaml": GOOD_MODEL + "pipeline_stage: {head: 0, layer1: 1}\n"},
         ["pipeline_stage", "layer2.0", "no stage"]),
    case("model: strategy does not divide", f"model {D}/m.yaml", {"m.yaml": GOOD_MODEL + "shard: {fc: [[1, 1], [1, 3]]}\n"},
         ["m.yaml", "shard", "fc/2:addmm", "dimension 1 has size 10", "use one of"]),
    case("model: strategy names nothing", f"model {D}/m.yaml", {"m.yaml": GOOD_MODEL + "shard: {fc9: [[1, 1], [1, 2]]}\n"},
         ["m.yaml", "shard", "'fc9' names no operator"]),
    case("model: strategy not a list of lists", f"model {D}/m.yaml", {"m.yaml": GOOD_MODEL + "shard: {fc: [1, 2]}\n"},
         ["m.yaml", "shard.fc", "split counts"]),
    case("model: tp layout model without shard", f"model {D}/m.yaml",
         {"m.yaml": GOOD_MODEL + "parallel: {tp: 2, tp_layout: model}\n"}, ["m.yaml", "parallel.tp_layout", "shard"]),
    # ---------------------------------------------- hardware profiles, rank tables, specs (cluster)
    case("profile: without memory", f"cluster {D}/p.yaml", {"p.yaml": GOOD_PROFILE.replace("memory: 1GiB, ", "")},
         ["p.yaml", "device.memory", "missing"]),
    case("profile: negative bandwidth", f"cluster {D}/p.yaml",
         {"p.yaml": GOOD_PROFILE.replace("bandwidth_gb_per_s: 1}", "bandwidth_gb_per_s: -1}")},
         ["node.group_link.bandwidth_gb_per_s", "positive"]),
    case("profile: negative busy-sender delay", f"cluster {D}/p.yaml",
         _collective("busy_sender_delay_us: -5"),
         ["p.yaml", "collective.busy_sender_delay_us", "[0, 1e6] microseconds", "-5"]),
    case("profile: busy-sender delay in seconds", f"cluster {D}/p.yaml",
         _collective("busy_sender_delay_us: 4.0e+9"),
         ["p.yaml", "collective.busy_sender_delay_us", "[0, 1e6] microseconds"]),
    case("profile: NCCL's latency model on another library", f"cluster {D}/p.yaml",
         _collective("latency_model: nccl"),
         ["p.yaml", "collective.latency_model", "library is gloo", "set library: nccl"]),
    case("profile: an unknown latency model", f"cluster {D}/p.yaml",
         _collective("latency_model: hccl"),
         ["p.yaml", "collective.latency_model", "must be one of", "nccl"]),
    case("profile: fp32 under collective.dtypes", f"cluster {D}/p.yaml",
         _collective("dtypes: {fp32: {bandwidth_efficiency: 0.5, latency_us: 10, overlap: 0.1}}"),
         ["p.yaml", "collective.dtypes.fp32", "list only other dtypes"]),
    case("profile: an unknown dtype under collective.dtypes", f"cluster {D}/p.yaml",
         _collective("dtypes: {bf61: {bandwidth_efficiency: 0.5, latency_us: 10, overlap: 0.1}}"),
         ["p.yaml", "collective.dtypes.bf61", "not a training dtype", "fp16 or bf16"]),
    case("profile: a dtype's fit without its overlap", f"cluster {D}/p.yaml",
         _collective("dtypes: {bf16: {bandwidth_efficiency: 0.5, latency_us: 10}}"),
         ["p.yaml", "collective.dtypes.bf16.overlap", "missing"]),
    case("profile: a dtype's overlap above 1", f"cluster {D}/p.yaml",
         _collective("dtypes: {bf16: {bandwidth_efficiency: 0.5, latency_us: 10, overlap: 8}}"),
         ["p.yaml", "collective.dtypes.bf16.overlap", "[0, 1]", "8"]),
    case("profile: a dtype's efficiency of 0", f"cluster {D}/p.yaml",
         _collective("dtypes: {bf16: {bandwidth_efficiency: 0, latency_us: 10, overlap: 0.1}}"),
         ["p.yaml", "collective.dtypes.bf16.bandwidth_efficiency", "(0, 1]"]),
    case("profile: a dtype's negative latency", f"cluster {D}/p.yaml",
         _collective("dtypes: {bf16: {bandwidth_efficiency: 0.5, latency_us: -3, overlap: 0.1}}"),
         ["p.yaml", "collective.dtypes.bf16.latency_us", ">= 0", "-3"]),
    case("profile: a dtype's unknown key", f"cluster {D}/p.yaml",
         _collective("dtypes: {bf16: {bandwidth_efficiency: 0.5, latency_us: 10, overlap: 0.1, speed: 3}}"),
         ["p.yaml", "collective.dtypes.bf16.speed", "unknown key"]),
    case("profile: an op fit's efficiency of 0", f"cluster {D}/p.yaml",
         _collective("all_gather: {bandwidth_efficiency: 0, latency_us: 10}"),
         ["p.yaml", "collective.all_gather.bandwidth_efficiency", "(0, 1]"]),
    case("profile: an op fit's negative latency", f"cluster {D}/p.yaml",
         _collective("reduce_scatter: {bandwidth_efficiency: 0.2, latency_us: -1}"),
         ["p.yaml", "collective.reduce_scatter.latency_us", ">= 0", "-1"]),
    case("profile: an op fit's unknown key", f"cluster {D}/p.yaml",
         _collective("all_gather: {bandwidth_efficiency: 0.2, speed: 3}"),
         ["p.yaml", "collective.all_gather.speed", "unknown key"]),
    case("profile: an op fit without its efficiency", f"cluster {D}/p.yaml",
         _collective("all_gather: {latency_us: 10}"),
         ["p.yaml", "collective.all_gather.bandwidth_efficiency", "missing"]),
    case("profile: a negative FSDP overhead", f"cluster {D}/p.yaml",
         _collective("fsdp_gather_overhead_us: -2"),
         ["p.yaml", "collective.fsdp_gather_overhead_us", "[0, 1e6] microseconds", "-2"]),
    case("profile: an FSDP overhead in seconds", f"cluster {D}/p.yaml",
         _collective("fsdp_reduce_scatter_overhead_us: 3.0e+7"),
         ["p.yaml", "collective.fsdp_reduce_scatter_overhead_us", "[0, 1e6] microseconds"]),
    case("profile: a negative FSDP copy rate", f"cluster {D}/p.yaml",
         _collective("fsdp_reduce_scatter_copy_gb_per_s: -1.5"),
         ["p.yaml", "collective.fsdp_reduce_scatter_copy_gb_per_s", ">= 0 GB/s", "-1.5"]),
    case("profile: dtypes not a mapping", f"cluster {D}/p.yaml",
         _collective("dtypes: [bf16]"),
         ["p.yaml", "collective.dtypes", "expected a mapping"]),
    case("profile: bad size", f"cluster {D}/p.yaml", {"p.yaml": GOOD_PROFILE.replace("1GiB", "lots")},
         ["device.memory", "24GiB"]),
    case("profile: infinite size", f"cluster {D}/p.yaml", {"p.yaml": GOOD_PROFILE.replace("1GiB", "1e400GiB")},
         ["p.yaml", "device.memory", "finite"]),
    case("profile: absurd devices per node", f"cluster {D}/p.yaml",
         {"p.yaml": GOOD_PROFILE.replace("devices: 2", "devices: 1000000000000")},
         ["p.yaml", "node.devices", "at most 1,048,576 devices"]),
    case("profile: absurd node count", f"cluster {D}/p.yaml", {"p.yaml": GOOD_PROFILE + "nodes: 99999999999\n"},
         ["p.yaml", "nodes", "more than 524,288", "2 devices each"]),
    case("profile: binary file", f"cluster {D}/p.yaml", {"p.yaml": BINARY}, ["p.yaml", "not a text file", "hardware profile"]),
    case("profile: schema version", f"cluster {D}/p.yaml",
         {"p.yaml": GOOD_PROFILE.replace("schema_version: 1", "schema_version: 3")}, ["p.yaml", "schema_version", "got 3"]),
    case("cluster: unknown profile", "cluster nosuch:2x8", {}, ["nosuch", "ascend910"]),
    case("cluster: absurd spec", "cluster ascend910:99999999999x8", {},
         ["--cluster ascend910:99999999999x8", "799,999,999,992 devices", "at most 1,048,576"]),
    case("cluster: zero nodes", "cluster ascend910:0x8", {}, ["--cluster", "ascend910:0x8", "positive"]),
    case("rank table: duplicate rank", f"cluster {D}/rt.json",
         {"rt.json": json.dumps(RANK_TABLE).replace('"rank_id": "1"', '"rank_id": "0"')}, ["rt.json", "rank_id", "twice"]),
    case("rank table: binary file", f"cluster {D}/rt.json", {"rt.json": BINARY}, ["rt.json", "not a text file", "rank-table"]),
    case("rank table: truncated", f"cluster {D}/rt.json", {"rt.json": json.dumps(RANK_TABLE)[:60]},
         ["rt.json", "JSON", "truncated"]),
    case("rank table: count disagrees", f"cluster {D}/rt.json",
         {"rt.json": json.dumps({**RANK_TABLE, "server_count": "99999999999"})}, ["rt.json", "server_count", "99999999999"]),
    # ------------------------------------------------------------- plan.json (simulate, run)
    case("plan: binary file", f"simulate {D}/p.json", {"p.json": BINARY}, ["p.json", "not a text file", "plan.json"]),
    case("plan: truncated", f"simulate {D}/p.json", {**M, "p.json": plan_json()[:300]}, ["p.json", "JSON", "truncated"]),
    case("plan: schema version", f"simulate {D}/p.json", {**M, "p.json": plan_json(edit=lambda d: d.update(schema_version=2))},
         ["p.json", "schema_version", "got 2", "plan again"]),
    case("plan: pp beyond the model's cut units", f"simulate {D}/p.json", {**M, "p.json": plan_json(edit=_set("parallel", "pp", 3))},
         ["p.json", "parallel.bounds", "not 3 stages over 2 layers"]),
    case("plan: split out of range", f"simulate {D}/p.json",
         {**M, "p.json": plan_json(edit=_set("parallel", "bounds", [0, 5, 2]))}, ["p.json", "parallel.bounds", "[0, 5, 2]"]),
    case("plan: zero dp", f"simulate {D}/p.json", {**M, "p.json": plan_json(edit=_set("parallel", "dp", 0))},
         ["p.json", "parallel.dp", "positive"]),
    case("plan: unknown schedule", f"simulate {D}/p.json", {**M, "p.json": plan_json(edit=_set("parallel", "schedule", "zigzag"))},
         ["p.json", "parallel.schedule", "zigzag", "1f1b"]),
    case("plan: another model's layers", f"simulate {D}/p.json", {**M, "p.json": plan_json(layers=("a", "c"))},
         ["p.json", "model.layers", "(c)"]),
    case("plan: another batch", f"simulate {D}/p.json", {**M, "p.json": plan_json(batch=16)},
         ["p.json", "model.global_batch_size", "made for 16", "has training.global_batch_size: 8"]),
    case("plan: model file gone", f"simulate {D}/p.json", {"p.json": plan_json()}, ["p.json", "model.path", "not found"]),
    # ---------------------------------------------------------- layer profiles (simulate --profile)
    case("layer profile: binary file", f"{SIM} --profile {D}/lp.json", {**M, "lp.json": BINARY},
         ["lp.json", "not a text file", "layer profile"]),
    case("layer profile: truncated", f"{SIM} --profile {D}/lp.json", {**M, "lp.json": _profile()[:100]},
         ["lp.json", "JSON", "truncated"]),
    case("layer profile: schema version", f"{SIM} --profile {D}/lp.json", {**M, "lp.json": _profile(schema_version=9)},
         ["lp.json", "schema_version", "got 9", "profile the model again"]),
    case("model: cp without attention", f"model {D}/m.yaml", {"m.yaml": GOOD_MODEL + "parallel: {cp: 2}\n"},
         ["m.yaml", "parallel.cp: 2", "no attention over a sequence", "use cp 1"]),
    case("layer profile: sizes out of order", f"{SIM} --profile {D}/lp.json", {**M, "lp.json": _profile(microbatch_sizes=[4, 2, 1])},
         ["lp.json", "microbatch_sizes", "rising"]),
    case("layer profile: another model", f"{SIM} --profile {D}/lp.json --dp 1",
         {**M, "lp.json": _profile(layers=LAYER_PROFILE["layers"][:1])}, ["lp.json", "layers", "no times for layer 'b'"]),
    # ----------------------------------------------------------------- command-line values
    case("simulate: zero dp", f"{SIM} --dp 0", M, ["--dp", "positive integer, got 0", "parsim simulate --help"]),
    case("simulate: pp beyond the cut units", f"{SIM} --dp 1 --pp 5", M, ["--pp 5", "2 cut units"]),
    case("simulate: split out of range", f"{SIM} --dp 1 --pp 2 --split 0,5,2", M,
         ["split [0, 5, 2]", "2 layers", "give 3 rising boundaries from 0 to 2", "--split 0,1,2", "--split balanced"]),
    case("simulate: Megatron's layout on a model without attention", f"{SIM} --dp 1 --tp 2 --tp-layout megatron", M,
         ["tp=2 with the megatron layout", "has no attention", "--tp-layout auto"]),
    case("simulate: cp on a model without attention", f"{SIM} --cp 2", M, ["--cp 2", "no attention", "use cp 1"]),
    case("simulate: output folder missing", f"{SIM} --trace {D}/no/t.json", M, ["--trace", "no/t.json", "does not exist"]),
    case("plan: cluster larger than the model can use", f"plan {D}/m.yaml --cluster ascend910:1000x8", M,
         ["--cluster ascend910:1000x8", "8,000 devices", "at most 64", "global batch 8", "2 cut units", "tp at most 4"]),
    case("plan: cluster larger than BatchNorm's micro-batches allow", f"plan {D}/m.yaml --cluster ascend910:145x8", R,
         ["--cluster ascend910:145x8", "1,160 devices", "at most 1,152", "dp at most 16", "micro-batches of at least 2"]),
    case("plan: issue 16's absurd cluster", "plan examples/resnet50_cifar10.yaml --cluster ascend910:99999999999x8", {},
         ["--cluster ascend910:99999999999x8", "at most 1,048,576"]),
    case("plan: negative memory", f"plan {D}/m.yaml --max-memory=-3GiB", M, ["--max-memory", "-3GiB"]),
    case("plan: infinite memory", f"plan {D}/m.yaml --max-memory 1e400GiB", M, ["--max-memory", "finite"]),
    case("plan: zero top", f"plan {D}/m.yaml --top 0", M, ["--top", "positive"]),
    case("plan: negative microbatches", f"plan {D}/m.yaml --microbatches=-4", M, ["--microbatches", "got -4"]),
    case("plan: binary tp profile", f"plan {D}/m.yaml --tp-profile {D}/lp.json", {**M, "lp.json": BINARY},
         ["lp.json", "not a text file"]),
    # ------------------------------------------------ commands that measure or start processes
    case("profile: sizes not rising", f"profile {D}/m.yaml --microbatch-sizes 4,2", M, ["--microbatch-sizes", "'4,2'"]),
    case("profile: output folder missing", f"profile {D}/m.yaml -o {D}/no/p.json", M, ["-o", "no/p.json", "does not exist"]),
    case("profile: binary model", f"profile {D}/m.yaml", {"m.yaml": BINARY}, ["m.yaml", "not a text file"]),
    case("profile: negative noise threshold", f"profile {D}/m.yaml --noise-threshold=-1", M, ["--noise-threshold", "-1"]),
    case("profile-comm: output folder missing", f"profile-comm -o {D}/no/c.yaml", {}, ["-o", "no/c.yaml", "does not exist"]),
    case("profile-comm: zero processes", "profile-comm --nproc 0", {}, ["--nproc", "positive"]),
    case("profile-comm: dtypes without fp32 first", "profile-comm --dtypes bf16", {}, ["--dtypes bf16", "fp32 first"]),
    case("profile-device: output folder missing", f"profile-device -o {D}/no/d.yaml --quick", {},
         ["-o", "no/d.yaml", "does not exist"]),
    case("profile-device: no npu backend", f"profile-device -o {D}/d.yaml --device npu", {}, ["--device npu", "torch_npu"]),
    case("profile-device: peak not a number", f"profile-device -o {D}/d.yaml --peak fp16=abc", {},
         ["--peak fp16=abc", "dtype=TFLOPS"]),
    case("profile-data: binary profile", f"profile-data -o {D}/p.yaml", {"p.yaml": BINARY}, ["p.yaml", "not a text file"]),
    case("profile-data: no profile to update", f"profile-data -o {D}/p.yaml", {}, ["-o", "p.yaml", "no cluster profile"]),
    case("calibrate: binary layer profile", f"calibrate {D}/lp.json --model {D}/m.yaml --cluster tests/data/ideal.yaml",
         {**M, "lp.json": BINARY}, ["lp.json", "not a text file"]),
    case("calibrate: truncated model", f"calibrate {D}/lp.json --model {D}/m.yaml --cluster tests/data/ideal.yaml",
         {"m.yaml": "training: {global_batch_size: ", "lp.json": _profile()}, ["m.yaml", "YAML", "truncated"]),
    case("calibrate: output folder missing", f"calibrate {D}/lp.json --model {D}/m.yaml -o {D}/no/c.yaml",
         {**M, "lp.json": _profile()}, ["-o", "no/c.yaml", "does not exist"]),
    case("calibrate --published: fitted field unknown", f"calibrate --published {D}/f.yaml --cluster dgx-a100",
         {"f.yaml": FIGS.replace("device.kernels.conv_efficiency", "device.kernels.tiles")},
         ["f.yaml", "calibration.dgx-a100.fit", "device.kernels.tiles", "choose among"]),
    case("calibrate --published: row of another profile", f"calibrate --published {D}/f.yaml --cluster dgx-a100",
         {"f.yaml": FIGS.replace("profile: dgx-a100", "profile: dgx1-v100")},
         ["f.yaml", "calibration.dgx-a100.rows", "dgx1-v100"]),
    case("calibrate --published: source not listed", f"calibrate --published {D}/f.yaml --cluster dgx-a100",
         {"f.yaml": FIGS.replace("source: dle", "source: nvidia")}, ["f.yaml", "figures[0].source", "nvidia"]),
    case("calibrate --published: no metric", f"calibrate --published {D}/f.yaml --cluster dgx-a100",
         {"f.yaml": FIGS.replace("samples_per_s: 2470", "images_per_s: 2470")},
         ["f.yaml", "figures[0].measured", "samples_per_s"]),
    case("calibrate --published: bad model arg", f"calibrate --published {D}/f.yaml --cluster dgx-a100",
         {"f.yaml": FIGS.replace("model: resnet50,", "model: resnet50, args: {image_size: -3},")},
         ["f.yaml", "figures[0].model.args.image_size", "positive"]),
    case("calibrate --published: no calibration for the profile", f"calibrate --published {D}/f.yaml --cluster dgx-h100",
         {"f.yaml": FIGS}, ["f.yaml", "calibration.dgx-h100", "missing"]),
    case("calibrate --published: with a layer profile", f"calibrate {D}/lp.json --published {D}/f.yaml",
         {"f.yaml": FIGS, "lp.json": _profile()}, ["--model", "drop them"]),
    case("validate: binary model", f"validate {D}/m.yaml --out {D}/v", {"m.yaml": BINARY}, ["m.yaml", "not a text file"]),
    case("validate: binary cluster", f"validate {D}/m.yaml --cluster {D}/p.yaml --out {D}/v", {**M, "p.yaml": BINARY},
         ["p.yaml", "not a text file", "hardware profile"]),
    case("validate: truncated profile", f"validate {D}/m.yaml --profile {D}/lp.json --out {D}/v",
         {**R, "lp.json": _profile()[:100]}, ["lp.json", "truncated"]),
    case("validate: sizes not positive", f"validate {D}/m.yaml --microbatch-sizes 0,2 --out {D}/v", M,
         ["--microbatch-sizes", "'0,2'"]),
    case("validate: negative timeout", f"validate {D}/m.yaml --timeout=-5 --out {D}/v", M, ["--timeout", "-5"]),
    case("validate: set file missing", f"validate {D}/m.yaml --set {D}/nosuch.yaml --out {D}/v", M,
         ["--set", "nosuch.yaml", "a set file (.yaml) that exists"]),
    case("validate: model not in the set", f"validate {D}/m.yaml --set results/heldout/2026-11-27.yaml "
         f"--profile {D}/lp.json --out {D}/v", {**M, "lp.json": _profile()}, ["2026-11-27.yaml", "models: no entry for"]),
    case("run: binary plan", f"run {D}/p.json", {"p.json": BINARY}, ["p.json", "not a text file", "plan.json"]),
    case("run: truncated plan", f"run {D}/p.json", {**R, "p.json": RESNET_PLAN[:500]}, ["p.json", "truncated"]),
    case("run: model file gone", f"run {D}/p.json", {"p.json": RESNET_PLAN}, ["p.json", "model.path", "not found"]),
    case("run: a model on paper", f"run {D}/p.json", {**M, "p.json": plan_json()},
         ["m.yaml", "model", "built-in resnet50 and gpt"]),
    case("run: a plan's cp the model cannot split", f"run {D}/p.json", {**M, "p.json": plan_json(
        edit=_set("parallel", "cp", 2))}, ["p.json", "parallel.cp: 2", "no attention", "use cp 1"]),
    case("run: zero steps", f"run {D}/p.json --steps 0", {**R, "p.json": RESNET_PLAN}, ["--steps", "positive"]),
    case("run: timeout not a number", f"run {D}/p.json --timeout nan", {**R, "p.json": RESNET_PLAN}, ["--timeout", "finite"]),
    case("run: data folder without CIFAR", f"run {D}/p.json --data {D}", {**R, "p.json": RESNET_PLAN},
         ["--data", "data_batch_*.bin"]),
    case("run: synthetic data smaller than a step", f"run {D}/p.json --synthetic-size 4", {**R, "p.json": RESNET_PLAN},
         ["--synthetic-size", "4 samples", "global batch (32)"]),
    # ---------------------------------------------------------------- parsim export, --from (parsim.export)
    case("export: missing plan", f"export {D}/nope.json --to megatron", {}, ["nope.json", "not found"]),
    case("export: no name in the target", f"export {D}/p.json --to megatron", {**M, "p.json": plan_json()},
         ["p.json", "model.path", "Megatron-LM", "GPT- and Llama-shaped"]),
    case("export: schedule the target lacks", f"export {D}/p.json --to deepspeed",
         {**M, "p.json": plan_json(edit=lambda d: d["parallel"].update(schedule="gpipe"))},
         ["p.json", "parallel.schedule", "gpipe", "DeepSpeed", "1F1B"]),
    case("from: bad TOML", f"simulate --from torchtitan {D}/t.toml --cluster local-cpu:1x2", {"t.toml": "[model\n"},
         ["t.toml", "TOML"]),
    case("from: DeepSpeed without a model", f"simulate --from deepspeed {D}/ds.json --cluster local-cpu:1x2",
         {"ds.json": '{"train_batch_size": 8, "train_micro_batch_size_per_gpu": 4}'}, ["ds.json", "--model"]),
    case("from: Megatron shell variable", f"plan --from megatron {D}/a.sh --cluster local-cpu:1x2",
         {"a.sh": "--num-layers $L --hidden-size 64 --num-attention-heads 4 --seq-length 32 --vocab-size 512 "
                  "--micro-batch-size 1\n"}, ["a.sh", "--num-layers", "shell variable"]),
    case("from: --set without --from", f"{SIM} --set a=1", M, ["--set", "--from"]),
    case("run: wrong process count", f"run {D}/p.json --nproc 3", {**R, "p.json": RESNET_PLAN},
         ["p.json", "parallel", "--nproc 2"]),
]


@pytest.fixture
def nothing_starts(monkeypatch):
    """Bad input must fail before any process is started or any profiling begins."""
    def refuse(*args, **kwargs):
        raise AssertionError("a process was started for bad input")
    for module, name in ((parsim.exec.launch, "launch"), (parsim.validation, "launch"),
                         (parsim.profile.layers, "launch_profilers")):
        monkeypatch.setattr(module, name, refuse)


def _write(folder, files):
    for name, content in files.items():
        if isinstance(content, bytes):
            (folder / name).write_bytes(content)
        else:
            (folder / name).write_text(content.replace(D, str(folder)))


@pytest.mark.parametrize("argv,files,words", CASES)
def test_bad_input_gives_one_line_and_exit_2(tmp_path, capsys, nothing_starts, argv, files, words):
    _write(tmp_path, files)
    start = time.perf_counter()
    code = main([a.replace(D, str(tmp_path)) for a in argv])
    elapsed = time.perf_counter() - start
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("parsim: error: "), err
    for w in words:
        assert w in err, (w, err)
    assert elapsed < 10, f"took {elapsed:.1f} s"


def test_the_table_covers_every_command_and_enough_cases():
    from parsim.cli import build_parser

    commands = set(build_parser()._subparsers._group_actions[0].choices)
    covered = {p.values[0][0] for p in CASES}
    assert commands <= covered, commands - covered
    assert len(CASES) >= 40 and len({p.id for p in CASES}) == len(CASES)


def test_no_traceback_reaches_the_shell(tmp_path):
    bad = tmp_path / "m.yaml"
    bad.write_bytes(BINARY)                    # issue 16: a UnicodeDecodeError traceback
    proc = subprocess.run([sys.executable, "-m", "parsim.cli", "model", str(bad)], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1


def test_an_algorithm_the_library_lacks_is_one_line(capsys):
    code = main(["simulate", "examples/resnet50_cifar10_seeds_split.yaml", "--cluster", "dgx-a100:1x8",
                 "--algorithm", "halving-doubling"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert "--algorithm halving-doubling" in err and "nccl" in err and "ring, tree" in err
