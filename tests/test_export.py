"""parsim export / --from: every target's export read back prices the same plan (same parallel
configuration, same predicted step), refusals are one line naming the field and the target, and a
published config (torchtitan's llama3_8b.toml) is priced as given.  No framework is imported
here: tests/test_export_frameworks.py hands the exports to the frameworks' own parsers."""

from __future__ import annotations

import json
import os

import pytest

from parsim.cli import main
from parsim.export.megatron import parse_args_text
from parsim.export.torchtitan import default_split
from parsim.model.spec import load_model

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GPT_SDPA = """schema_version: 1
name: gpt-tiny-sdpa
model: gpt
args: {preset: gpt-tiny, dropout: 0.0, attention: sdpa}
training: {global_batch_size: 16, dtype: bf16, optimizer: adam}
"""
LLAMA_DEBUG_TOML = """[model]
name = "llama3"
flavor = "debugmodel"
[training]
local_batch_size = 8
seq_len = 256
[parallelism]
data_parallel_replicate_degree = 2
data_parallel_shard_degree = 1
tensor_parallel_degree = 2
pipeline_parallel_degree = 2
pipeline_parallel_microbatch_size = 2
[activation_checkpoint]
mode = "full"
"""


def _run(argv, capsys) -> tuple[int, str, str]:
    rc = main(argv)
    out = capsys.readouterr()
    return rc, out.out, out.err


def _plan(path) -> dict:
    with open(path) as f:
        return json.load(f)


def _roundtrip(tmp_path, capsys, plan_json, target, cluster, model=None):
    """export the plan, read it back with --from, and return (the plan's, the read plan's) JSON."""
    out = tmp_path / f"export.{target}"
    rc, _, err = _run(["export", str(plan_json), "--to", target, "-o", str(out)], capsys)
    assert rc == 0, err
    again = tmp_path / f"again-{target}.json"
    argv = ["simulate", "--from", target, str(out), "--cluster", cluster, "-o", str(again)]
    rc, _, err = _run(argv + (["--model", model] if model else []), capsys)
    assert rc == 0, err
    return _plan(plan_json), _plan(again)


def _same_plan(a: dict, b: dict) -> None:
    for key in ("dp", "pp", "tp", "cp", "microbatches", "schedule", "chunks", "bounds", "tp_layout", "recompute",
                "zero", "tp_comm_overlap", "cp_mode"):
        assert a["parallel"][key] == b["parallel"][key], key
    assert a["parallel"].get("dp_shard") == b["parallel"].get("dp_shard")      # written where HSDP shards
    # written where false (the buckets after the backward)
    assert a["parallel"].get("overlap_grad_reduce", True) == b["parallel"].get("overlap_grad_reduce", True)
    assert a["model"]["layers"] == b["model"]["layers"]
    for key in ("global_batch_size", "dtype", "optimizer"):
        assert a["model"][key] == b["model"][key], key
    assert b["estimate"]["step_time_s"] == pytest.approx(a["estimate"]["step_time_s"], rel=1e-9)
    assert b["estimate"]["peak_memory_bytes"] == pytest.approx(a["estimate"]["peak_memory_bytes"], rel=1e-9)


@pytest.fixture
def gpt_plan(tmp_path, capsys):
    """gpt-tiny (fused attention, bf16, Adam) on 8 H100s: tp 2 megatron-sp, pp 2, dp 2, ZeRO-1,
    selective recomputation."""
    model = tmp_path / "gpt.yaml"
    model.write_text(GPT_SDPA)
    plan = tmp_path / "gpt_plan.json"
    rc, _, err = _run(["simulate", str(model), "--cluster", "dgx-h100:1x8", "--dp", "2", "--pp", "2", "--tp", "2",
                       "--tp-layout", "megatron-sp", "--microbatches", "4", "--zero", "1", "--recompute", "selective",
                       "--placement", "dp-inner", "-o", str(plan)], capsys)
    assert rc == 0, err
    return plan, model


def test_megatron_roundtrip(tmp_path, capsys, gpt_plan):
    plan, _ = gpt_plan
    a, b = _roundtrip(tmp_path, capsys, plan, "megatron", "dgx-h100:1x8")
    _same_plan(a, b)
    # read from Megatron's arguments, the plan runs on Megatron's stack: its band says how those families ran
    assert "stack check" not in a["estimate"]["step_time_band"]["source"]
    assert "public families that ran on megatron ran" in b["estimate"]["step_time_band"]["source"]
    text = (tmp_path / "export.megatron").read_text()
    for line in ("--tensor-model-parallel-size 2", "--sequence-parallel", "--pipeline-model-parallel-size 2",
                 "--use-distributed-optimizer", "--recompute-granularity selective", "--micro-batch-size 2",
                 "--global-batch-size 16", "--bf16", "--overlap-grad-reduce"):
        assert line in text.splitlines()


def test_megatron_interleaved_and_uneven(tmp_path, capsys, gpt_plan):
    _, model = gpt_plan
    for flags, expect in ((["--pp", "2", "--schedule", "interleaved", "--chunks", "2", "--microbatches", "4"],
                           "--num-layers-per-virtual-pipeline-stage 1"),
                          (["--pp", "2", "--split", "0,2,6", "--microbatches", "4"],
                           "--decoder-first-pipeline-num-layers 1")):
        plan = tmp_path / "p.json"
        rc, _, err = _run(["simulate", str(model), "--cluster", "dgx-h100:1x4", "--dp", "2", "-o", str(plan)] + flags,
                          capsys)
        assert rc == 0, err
        a, b = _roundtrip(tmp_path, capsys, plan, "megatron", "dgx-h100:1x4")
        _same_plan(a, b)
        assert expect in (tmp_path / "export.megatron").read_text().splitlines()


def test_megatron_roundtrip_mixture_of_experts(tmp_path, capsys):
    """A Mixtral-style model (examples/moe_tiny_local.yaml) with expert parallelism 2."""
    plan = tmp_path / "moe.json"
    rc, _, err = _run(["simulate", os.path.join(ROOT, "examples", "moe_tiny_local.yaml"), "--cluster", "local-cpu:1x2",
                       "--dp", "2", "--ep", "2", "--microbatches", "2", "-o", str(plan)], capsys)
    assert rc == 0, err
    a, b = _roundtrip(tmp_path, capsys, plan, "megatron", "local-cpu:1x2")
    _same_plan(a, b)
    assert b["parallel"]["ep"] == 2
    for line in ("--num-experts 8", "--moe-router-topk 2", "--expert-model-parallel-size 2"):
        assert line in (tmp_path / "export.megatron").read_text().splitlines()


def test_megatron_roundtrip_zero_3_beside_expert_parallelism(tmp_path, capsys):
    """ZeRO-3 with ep 2 goes out as Megatron-FSDP's optim_grads_params and comes back as the plan
    it was, priced the same."""
    plan = tmp_path / "moe.json"
    rc, _, err = _run(["simulate", os.path.join(ROOT, "examples", "moe_tiny_local.yaml"), "--cluster", "local-cpu:2x2",
                       "--dp", "4", "--ep", "2", "--zero", "3", "--microbatches", "2", "-o", str(plan)], capsys)
    assert rc == 0, err
    a, b = _roundtrip(tmp_path, capsys, plan, "megatron", "local-cpu:2x2")
    _same_plan(a, b)
    assert (b["parallel"]["ep"], b["parallel"]["zero"]) == (2, 3)
    lines = (tmp_path / "export.megatron").read_text().splitlines()
    assert "--use-megatron-fsdp" in lines and "--data-parallel-sharding-strategy optim_grads_params" in lines


def test_torchtitan_roundtrip(tmp_path, capsys):
    toml = tmp_path / "tt.toml"
    toml.write_text(LLAMA_DEBUG_TOML)
    plan = tmp_path / "tt_plan.json"
    rc, _, err = _run(["simulate", "--from", "torchtitan", str(toml), "--cluster", "dgx-h100:1x8", "-o", str(plan)],
                      capsys)
    assert rc == 0, err
    p = _plan(plan)["parallel"]
    assert (p["dp"], p["pp"], p["tp"], p["microbatches"], p["tp_layout"], p["recompute"], p["zero"]) == \
        (2, 2, 2, 4, "megatron-sp", "full", 0)
    assert p["bounds"] == [0, 4, 8]                  # torchtitan's split: embed + 3 layers | 3 layers + head
    a, b = _roundtrip(tmp_path, capsys, plan, "torchtitan", "dgx-h100:1x8")
    _same_plan(a, b)
    assert "public families that ran on torch-fsdp ran" in b["estimate"]["step_time_band"]["source"]


def test_a_torchtitan_pipeline_is_priced_on_torchs_pipeline_stage(tmp_path):
    """torchtitan pipelines with torch.distributed.pipelining's PipelineStage, so a config read from it is priced
    with that runtime's buffers (parsim.model.stacks.PIPELINE_RUNTIMES); a model.yaml states Megatron's by default."""
    from types import SimpleNamespace

    from parsim.cost.compute import AnalyticalCompute
    from parsim.export.commands import imported_config

    toml = tmp_path / "tt.toml"
    toml.write_text(LLAMA_DEBUG_TOML)
    args = SimpleNamespace(model=str(toml), from_framework="torchtitan", cluster="dgx-h100:1x8", from_model=None,
                           set=[])
    got = imported_config(args, lambda a, cluster, spec: AnalyticalCompute.for_training(cluster.device, spec.training))
    assert (got.spec.training.pipeline_runtime, got.config.pp) == ("torch", 2)
    assert load_model(os.path.join(ROOT, "examples", "gpt_tiny_local.yaml")).training.pipeline_runtime == "megatron"


def test_deepspeed_roundtrip(tmp_path, capsys):
    model = os.path.join(ROOT, "examples", "gpt_tiny_local.yaml")
    plan = tmp_path / "ds_plan.json"
    rc, _, err = _run(["simulate", model, "--cluster", "local-cpu:2x2", "--dp", "2", "--pp", "2", "--split", "0,3,6",
                       "--microbatches", "2", "--zero", "1", "--placement", "dp-inner", "--no-overlap-grad-reduce",
                       "-o", str(plan)], capsys)
    assert rc == 0, err
    a, b = _roundtrip(tmp_path, capsys, plan, "deepspeed", "local-cpu:2x2", model)
    _same_plan(a, b)
    ds = json.loads((tmp_path / "export.deepspeed").read_text())
    assert (ds["train_batch_size"], ds["train_micro_batch_size_per_gpu"], ds["gradient_accumulation_steps"],
            ds["zero_optimization"]["stage"], ds["pipeline"]["stages"]) == (8, 2, 2, 1, 2)


@pytest.mark.parametrize("flags", [["--dp", "2", "--pp", "2", "--split", "0,4,10", "--microbatches", "4",
                                    "--placement", "dp-inner", "--zero", "1", "--tp", "1"],
                                   ["--dp", "2", "--tp", "2", "--microbatches", "2"]])
def test_mindspore_roundtrip(tmp_path, capsys, flags):
    """pipeline stages and ZeRO; the seeds' operator strategies (examples/mlp_semi_auto.yaml's shard:)"""
    model = os.path.join(ROOT, "examples", "mlp_semi_auto.yaml")
    plan = tmp_path / "ms_plan.json"
    rc, _, err = _run(["simulate", model, "--cluster", "local-cpu:2x2", "-o", str(plan)] + flags, capsys)
    assert rc == 0, err
    a, b = _roundtrip(tmp_path, capsys, plan, "mindspore", "local-cpu:2x2", model)
    _same_plan(a, b)


@pytest.mark.parametrize("target, flags, field", [
    ("deepspeed", ["--pp", "2", "--schedule", "gpipe", "--microbatches", "2"], "parallel.schedule: gpipe: DeepSpeed"),
    ("torchtitan", ["--zero", "1"], "parallel.zero: 1: torchtitan"),
    ("megatron", ["--pp", "2", "--schedule", "zbh1", "--microbatches", "2"], "parallel.schedule: zbh1: Megatron-LM"),
    ("mindspore", ["--pp", "2", "--schedule", "zbh1", "--microbatches", "2"], "parallel.schedule: zbh1: MindSpore"),
    # HSDP: Megatron's torch FSDP2 path takes no shard group; DeepSpeed 0.19 shards over every dp rank
    ("megatron", ["--zero", "3", "--dp-shard", "4"], "parallel.dp_shard: 4: Megatron-LM"),
    ("deepspeed", ["--zero", "1", "--dp-shard", "4"], "parallel.dp_shard: 4: DeepSpeed"),
])
def test_refusals_name_the_field_and_the_target(tmp_path, capsys, target, flags, field):
    toml = tmp_path / "tt.toml"
    toml.write_text(LLAMA_DEBUG_TOML.replace("data_parallel_replicate_degree = 2", "data_parallel_replicate_degree = 8")
                    .replace("tensor_parallel_degree = 2", "tensor_parallel_degree = 1")
                    .replace("pipeline_parallel_degree = 2", "pipeline_parallel_degree = 1"))
    plan = tmp_path / "plan.json"
    rc, _, err = _run(["simulate", "--from", "torchtitan", str(toml), "--cluster", "dgx-h100:1x8", "--dp", "8",
                       "-o", str(plan)], capsys)
    assert rc == 0, err
    d = _plan(plan)
    redo = tmp_path / "redo.json"
    rc, _, err = _run(["simulate", d["model"]["path"], "--cluster", "dgx-h100:1x8", "-o", str(redo)]
                      + (["--dp", "4"] if "--pp" in flags else ["--dp", "8"]) + flags, capsys)
    assert rc == 0, err
    rc, out, err = _run(["export", str(redo), "--to", target, "-o", str(tmp_path / "x")], capsys)
    assert rc == 2 and err.count("\n") == 1 and field in err, err


def test_megatron_reads_a_launch_script():
    script = """#!/bin/bash
TP=8
GPT_ARGS=(
    --num-layers 24 --hidden-size 2304   # the 1.7B row
    --tensor-model-parallel-size ${TP} \\
    --use-distributed-optimizer
    --seq-length=2048
)
torchrun pretrain_gpt.py "${GPT_ARGS[@]}" --bf16
"""
    flags = parse_args_text(script, "run.sh")
    assert flags == {"num-layers": "24", "hidden-size": "2304", "tensor-model-parallel-size": "8",
                     "use-distributed-optimizer": True, "seq-length": "2048", "bf16": True}


def test_torchtitan_default_split_matches_its_rule():
    """generate_llm_fqn_per_model_part(4, 32): 34 effective layers, 9 9 8 8, less one each end."""
    assert default_split(4, 32) == [8, 9, 8, 7]
    assert default_split(1, 32) == [32]


def test_bad_config_is_one_line(tmp_path, capsys):
    bad = tmp_path / "args.txt"
    bad.write_text("--num-layers $L --hidden-size 64 --num-attention-heads 4 --seq-length 32 --vocab-size 512 "
                   "--micro-batch-size 1 --global-batch-size 8\n")
    rc, _, err = _run(["simulate", "--from", "megatron", str(bad), "--cluster", "local-cpu:1x2"], capsys)
    assert rc == 2 and err.count("\n") == 1 and "--num-layers" in err and "shell variable" in err
    rc, _, err = _run(["simulate", "--from", "deepspeed", os.path.join(ROOT, "examples", "deepspeed",
                                                                        "ds_config_zero1.json"),
                       "--cluster", "local-cpu:1x2"], capsys)
    assert rc == 2 and "--model" in err


def test_published_torchtitan_config_is_priced_as_given(capsys):
    """torchtitan's llama3_8b.toml at 9dec370 (the December 2024 benchmark's commit), run with local
    batch 2 on 8 H100s (benchmarks/llama3_h100_202412_torchtitan.md, Table 1): FSDP over 8 ranks
    (ZeRO-3), selective recomputation, bf16 parameters, Adam, sequence 8192."""
    toml = os.path.join(ROOT, "examples", "torchtitan", "llama3_8b.toml")
    rc, out, err = _run(["simulate", "--from", "torchtitan", toml, "--set", "training.batch_size=2",
                         "--cluster", "dgx-h100:1x8", "--json"], capsys)
    assert rc == 0, err
    est = json.loads(out)
    cfg = est["config"]
    assert (cfg["dp"], cfg["pp"], cfg["tp"], cfg["zero"], cfg["recompute"], cfg["microbatches"]) == \
        (8, 1, 1, 3, "selective", 1)
    tokens_per_gpu = 16 * 8192 / est["step_time_s"] / 8
    assert 1000 < tokens_per_gpu < 20000


MINDFORMERS = """# the keys of mindformers' configs/llama2/pretrain_llama2_7b.yaml that set the plan, tiny dims
runner_config: {epochs: 2, batch_size: 1, sink_mode: true, gradient_accumulation_steps: 1}
optimizer: {type: FP32StateAdamWeightDecay, beta1: 0.9}
parallel: {parallel_mode: 1, enable_parallel_optimizer: true}
parallel_config: {data_parallel: 2, model_parallel: 2, pipeline_stage: 2, use_seq_parallel: false, micro_batch_num: 4}
micro_batch_interleave_num: 1
recompute_config: {recompute: true, select_recompute: false}
model:
  model_config: {type: LlamaConfig, seq_length: 64, hidden_size: 64, num_layers: 4, num_heads: 4, vocab_size: 512,
                 multiple_of: 32, rms_norm_eps: 1.0e-5, compute_dtype: float16, offset: 0}
  arch: {type: LlamaForCausalLM}
"""


def test_mindformers_yaml_is_read(tmp_path, capsys):
    cfg = tmp_path / "run.yaml"
    cfg.write_text(MINDFORMERS)
    rc, out, err = _run(["simulate", "--from", "mindformers", str(cfg), "--cluster", "ascend910:1x8", "--json"], capsys)
    assert rc == 0, err
    c = json.loads(out)["config"]
    assert (c["dp"], c["tp"], c["pp"], c["microbatches"], c["zero"], c["recompute"], c["tp_layout"], c["bounds"]) == \
        (2, 2, 2, 4, 1, "full", "megatron", [0, 3, 6])
    rc, _, err = _run(["simulate", "--from", "mindformers", str(cfg), "--cluster", "ascend910:1x4"], capsys)
    assert rc == 2 and "8 devices" in err


# ----------------------------------------------------------------------------- HSDP (dp_shard)

def _hsdp_plan(tmp_path, capsys, target) -> tuple:
    """A plan with ZeRO shard groups of 2 of dp 4 that ``target`` can run: (plan.json, cluster, --model)."""
    plan = tmp_path / "hsdp_plan.json"
    if target == "torchtitan":                 # FSDP2 over shard groups of 2, 2 replicas, tp 2
        toml = tmp_path / "tt.toml"
        toml.write_text(LLAMA_DEBUG_TOML.replace("data_parallel_shard_degree = 1", "data_parallel_shard_degree = 2")
                        .replace("pipeline_parallel_degree = 2", "pipeline_parallel_degree = 1"))
        argv, cluster, model = ["--from", "torchtitan", str(toml)], "dgx-h100:1x8", None
    elif target == "megatron":                 # the partial distributed optimizer (ZeRO-1)
        model = tmp_path / "gpt.yaml"
        model.write_text(GPT_SDPA)
        argv, cluster, model = [str(model), "--dp", "4", "--tp", "2", "--zero", "1", "--dp-shard", "2",
                                "--microbatches", "2"], "dgx-h100:1x8", None
    else:                                      # MindSpore's optimizer_weight_shard_size
        model = os.path.join(ROOT, "examples", "mlp_semi_auto.yaml")
        argv, cluster = [model, "--dp", "4", "--tp", "1", "--zero", "1", "--dp-shard", "2", "--microbatches",
                         "2"], "local-cpu:2x2"
    rc, _, err = _run(["simulate", *argv, "--cluster", cluster, "-o", str(plan)], capsys)
    assert rc == 0, err
    return plan, cluster, model


@pytest.mark.parametrize("target", ["torchtitan", "megatron", "mindspore"])
def test_hsdp_roundtrip(tmp_path, capsys, target):
    """dp 4 in shard groups of 2 exported and read back: the same dp, zero, dp_shard and step."""
    plan, cluster, model = _hsdp_plan(tmp_path, capsys, target)
    a, b = _roundtrip(tmp_path, capsys, plan, target, cluster, model)
    assert (a["parallel"]["dp"], a["parallel"]["dp_shard"]) == (4, 2)
    _same_plan(a, b)
    text = (tmp_path / f"export.{target}").read_text()
    expect = {"torchtitan": ["data_parallel_replicate_degree = 2\n", "data_parallel_shard_degree = 2\n"],
              "megatron": ["--use-distributed-optimizer\n", "--num-distributed-optimizer-instances 2\n"],
              "mindspore": ["'optimizer_weight_shard_size': 2"]}[target]
    assert all(part in text for part in expect), text


def _config(tmp_path, capsys, framework, text, cluster, *flags) -> tuple[int, dict | str]:
    """``text`` read with --from: (0, the plan's parallel settings) or (2, the one-line error)."""
    path = tmp_path / ("cfg.toml" if framework == "torchtitan" else "cfg.args" if framework == "megatron"
                       else "cfg.yaml")
    path.write_text(text)
    out = tmp_path / "read.json"
    rc, _, err = _run(["simulate", "--from", framework, str(path), "--cluster", cluster, "-o", str(out), *flags],
                      capsys)
    if rc:
        assert rc == 2 and err.count("\n") == 1, err
        return rc, err
    return rc, _plan(out)["parallel"]


TT_REPLICATED = LLAMA_DEBUG_TOML.replace("data_parallel_shard_degree = 1", "data_parallel_shard_degree = -1") \
    .replace("pipeline_parallel_degree = 2", "pipeline_parallel_degree = 1")


@pytest.mark.parametrize("cluster, expect", [
    ("dgx-h100:1x8", (4, 3, 2)),          # shard -1: the 4 dp ranks tp 2 leaves, over 2 replicas
    ("dgx-h100:2x8", (8, 3, 4)),
    ("dgx-h100:1x4", (2, 0, None)),       # a shard group of one rank: torchtitan runs DDP
])
def test_torchtitan_hsdp_takes_its_dp_from_the_cluster(tmp_path, capsys, cluster, expect):
    rc, p = _config(tmp_path, capsys, "torchtitan", TT_REPLICATED, cluster)
    assert rc == 0, p
    assert (p["dp"], p["zero"], p.get("dp_shard")) == expect


def test_torchtitan_hsdp_replicas_must_divide_the_dp(tmp_path, capsys):
    rc, err = _config(tmp_path, capsys, "torchtitan", TT_REPLICATED.replace("replicate_degree = 2",
                                                                            "replicate_degree = 3"), "dgx-h100:1x8")
    assert rc == 2 and "parallelism.data_parallel_replicate_degree: 3" in err and "divisor of 4" in err


MEGATRON_HSDP = ("--num-layers 4 --hidden-size 64 --num-attention-heads 4 --seq-length 32 --vocab-size 512 "
                 "--make-vocab-size-divisible-by 1 --micro-batch-size 1 --global-batch-size 8 --bf16 "
                 "--num-distributed-optimizer-instances 2 ")


@pytest.mark.parametrize("flags, expect", [
    ("--use-distributed-optimizer", (4, 1, 2)),                  # the partial distributed optimizer
    ("--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params", (4, 3, 2)),   # Megatron-FSDP's HSDP
    ("--use-torch-fsdp2", (4, 3, None)),                         # torch FSDP2 ignores the instances
    ("", (4, 0, None)),                                          # so does DDP
])
def test_megatron_reads_distributed_optimizer_instances(tmp_path, capsys, flags, expect):
    rc, p = _config(tmp_path, capsys, "megatron", MEGATRON_HSDP + flags, "local-cpu:2x2")
    assert rc == 0, p
    assert (p["dp"], p["zero"], p.get("dp_shard")) == expect
    rc, err = _config(tmp_path, capsys, "megatron", MEGATRON_HSDP.replace("instances 2", "instances 3") + flags,
                      "local-cpu:2x2")
    if expect[2]:               # 3 instances do not divide dp 4: one line naming the flag
        assert rc == 2 and "--num-distributed-optimizer-instances: 3" in err and "divisor of 4" in err
    else:
        assert rc == 0, err


def test_mindformers_reads_optimizer_weight_shard_size(tmp_path, capsys):
    yaml_text = MINDFORMERS.replace("data_parallel: 2", "data_parallel: 4").replace("pipeline_stage: 2",
                                                                                     "pipeline_stage: 1")
    for size, expect in ((2, 2), (4, None), (-1, None)):
        hsdp = yaml_text.replace("enable_parallel_optimizer: true}", "enable_parallel_optimizer: true, "
                                 f"parallel_optimizer_config: {{optimizer_weight_shard_size: {size}}}}}")
        rc, p = _config(tmp_path, capsys, "mindformers", hsdp, "ascend910:1x8")
        assert rc == 0, p
        assert (p["dp"], p["zero"], p.get("dp_shard")) == (4, 1, expect)


def test_deepspeed_refuses_mics(tmp_path, capsys):
    ds = {"train_batch_size": 8, "train_micro_batch_size_per_gpu": 2,
          "zero_optimization": {"stage": 3, "mics_shard_size": 2}}
    path = tmp_path / "ds.json"
    path.write_text(json.dumps(ds))
    rc, _, err = _run(["simulate", "--from", "deepspeed", str(path), "--model",
                       os.path.join(ROOT, "examples", "gpt_tiny_local.yaml"), "--cluster", "local-cpu:2x2"], capsys)
    assert rc == 2 and err.count("\n") == 1 and "zero_optimization.mics_shard_size: 2: DeepSpeed 0.19" in err, err


def test_every_reader_names_the_stack_its_framework_runs():
    """A config read --from a framework is priced as the model.yaml says, and its band's stack check is that
    framework's stack (parsim.model.stacks.STACKS) unless the model.yaml states another."""
    from parsim.export import READERS
    from parsim.export.commands import FRAMEWORK_STACK
    from parsim.model.stacks import STACKS

    assert set(FRAMEWORK_STACK) == set(READERS) and set(FRAMEWORK_STACK.values()) <= set(STACKS)
