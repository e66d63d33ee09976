"""Each export accepted by the target framework's own code, on CPU (tests/framework_checks.py runs it
in a process of its own): DeepSpeed's DeepSpeedConfig, megatron.core's TransformerConfig and
micro-batch calculator under Megatron-LM's flag names, torchtitan's ConfigManager and JobConfig,
MindSpore's set_auto_parallel_context, pipeline stages, shard strategies and PipelineCell.  The
test extra installs every framework; one that is missing fails with the extra that installs it."""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import subprocess
import sys

import pytest

from parsim.cli import main
from parsim.export.torchtitan import FLAVORS, _ffn, default_split

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHECKS = os.path.join(ROOT, "tests", "framework_checks.py")
GPT = os.path.join(ROOT, "examples", "gpt_tiny_local.yaml")
MLP = os.path.join(ROOT, "examples", "mlp_semi_auto.yaml")


def needs(*modules: str, extra: str):
    """The framework a test checks the export against.  The test extra installs every one of them
    (pyproject.toml), so a missing one fails the test, naming what to install, rather than skip:
    a skip would turn a broken install into a green run (tests/test_suite_can_fail.py)."""
    def wrap(test):
        @functools.wraps(test)
        def run(*args, **kwargs):
            missing = [m for m in modules if importlib.util.find_spec(m) is None]
            if missing:
                pytest.fail(f"{', '.join(missing)} not installed here: pip install -e '.[test]' (or '.[{extra}]')")
            return test(*args, **kwargs)
        return run
    return wrap


def _export(tmp_path, capsys, model, cluster, flags, target) -> str:
    plan, out = tmp_path / "plan.json", tmp_path / f"out.{target}"
    assert main(["simulate", model, "--cluster", cluster, "-o", str(plan)] + flags) == 0
    assert main(["export", str(plan), "--to", target, "-o", str(out)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    return str(out)


def _check(framework: str, *args: str, env=None) -> dict:
    run = subprocess.run([sys.executable, CHECKS, framework, *args], capture_output=True, text=True, timeout=300,
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT, **(env or {})})
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


@needs("deepspeed", extra="deepspeed")
def test_deepspeed_accepts_the_export(tmp_path, capsys):
    path = _export(tmp_path, capsys, GPT, "local-cpu:2x2", ["--dp", "2", "--pp", "2", "--split", "0,3,6",
                                                            "--microbatches", "2", "--zero", "1", "--placement",
                                                            "dp-inner", "--recompute", "full",
                                                            "--no-overlap-grad-reduce"], "deepspeed")
    got = _check("deepspeed", path, "2", "3")
    assert (got["train_batch_size"], got["micro"], got["accumulation"], got["zero"], got["pipeline_stages"],
            got["world_size"]) == (8, 2, 2, 1, 2, 2)
    assert got["refused"] and "train_batch_size" in got["refused"]      # its batch rule is really checked


@needs("megatron.core", extra="megatron")
@pytest.mark.parametrize("flags, expect", [
    (["--dp", "2", "--pp", "2", "--tp", "2", "--tp-layout", "megatron-sp", "--microbatches", "4", "--zero", "1",
      "--recompute", "selective", "--placement", "dp-inner"],
     {"tp": 2, "pp": 2, "vpp": None, "sequence_parallel": True, "recompute_granularity": "selective", "microbatches": 4,
      "overlap_grad_reduce": True}),
    # the buckets after the backward: Megatron-Core's own default, no flag
    (["--dp", "4", "--tp", "2", "--tp-layout", "megatron-sp", "--microbatches", "2", "--zero", "1",
      "--no-overlap-grad-reduce"],
     {"tp": 2, "pp": 1, "distributed_optimizer": True, "overlap_grad_reduce": False}),
    # the first layer of each virtual stage recomputed (Megatron's block method; its TransformerConfig
    # checks the count against the layers a pipeline rank holds); HSDP at ZeRO-1, the partial
    # distributed optimizer: 2 instances of 2 ranks each
    (["--dp", "4", "--pp", "2", "--schedule", "interleaved", "--chunks", "2", "--microbatches", "2",
      "--recompute-layers", "1", "--zero", "1", "--dp-shard", "2", "fp8"],
     {"tp": 1, "pp": 2, "vpp": 2, "sequence_parallel": False, "recompute_granularity": "full",
      "recompute_method": "block", "recompute_num_layers": 1, "microbatches": 2, "fp8": "hybrid",
      "distributed_optimizer": True, "instances": 2, "instance_ranks": 2}),
])
def test_megatron_accepts_the_export(tmp_path, capsys, flags, expect):
    model = tmp_path / "gpt.yaml"
    fp8 = ", fp8: true" if "fp8" in flags else ""
    model.write_text("schema_version: 1\nname: gpt-tiny-sdpa\nmodel: gpt\nargs: {preset: gpt-tiny, attention: sdpa}\n"
                     f"training: {{global_batch_size: 16, dtype: bf16, optimizer: adam{fp8}}}\n")
    path = _export(tmp_path, capsys, str(model), "dgx-h100:1x8", [f for f in flags if f != "fp8"], "megatron")
    got = _check("megatron", path, env={"MEGATRON_CHECK_WORLD": "8"})
    assert {k: got[k] for k in expect} == expect


@needs("megatron.core", extra="megatron")
def test_megatron_accepts_a_mixture_of_experts(tmp_path, capsys):
    """examples/moe_tiny_local.yaml (Mixtral-style, 8 experts top-2) with ep 2."""
    path = _export(tmp_path, capsys, os.path.join(ROOT, "examples", "moe_tiny_local.yaml"), "local-cpu:1x2",
                   ["--dp", "2", "--ep", "2", "--microbatches", "2"], "megatron")
    got = _check("megatron", path, env={"MEGATRON_CHECK_WORLD": "2"})
    assert (got["ep"], got["experts"], got["topk"], got["microbatches"]) == (2, 8, 2, 2)


@needs("megatron.core", extra="megatron")
def test_megatron_accepts_experts_folded_beside_tp(tmp_path, capsys):
    """tp 2 with sequence parallelism beside ep 2 and expert tp 1 (MoE Parallel Folding): the
    expert tp is written out, Megatron's own default being tp."""
    path = _export(tmp_path, capsys, os.path.join(ROOT, "examples", "moe_tiny_local.yaml"), "local-cpu:2x2",
                   ["--dp", "2", "--tp", "2", "--ep", "2", "--etp", "1", "--microbatches", "2"], "megatron")
    assert "--expert-tensor-parallel-size 1" in open(path).read()
    got = _check("megatron", path, env={"MEGATRON_CHECK_WORLD": "4"})
    assert (got["tp"], got["ep"], got["etp"], got["sequence_parallel"]) == (2, 2, 1, True)


@needs("megatron.core", extra="megatron")
def test_megatron_accepts_zero_3_beside_expert_parallelism(tmp_path, capsys):
    """ZeRO-3 with ep 2 goes out as Megatron-FSDP sharding parameters, gradients and optimizer
    state (its experts over the expert data-parallel group), which megatron.core's
    DistributedDataParallelConfig takes, and reads back as ZeRO-3."""
    path = _export(tmp_path, capsys, os.path.join(ROOT, "examples", "moe_tiny_local.yaml"), "local-cpu:2x2",
                   ["--dp", "4", "--ep", "2", "--zero", "3", "--microbatches", "2"], "megatron")
    got = _check("megatron", path, env={"MEGATRON_CHECK_WORLD": "4"})
    assert (got["ep"], got["megatron_fsdp"], got["sharding_strategy"]) == (2, True, "optim_grads_params")


@needs("megatron.core", extra="megatron")
def test_megatron_refuses_what_it_should(tmp_path):
    """megatron.core's own validation is live: heads that tp does not divide are refused."""
    bad = tmp_path / "bad.args"
    bad.write_text("--num-layers 4 --hidden-size 64 --num-attention-heads 5 --tensor-model-parallel-size 2 "
                   "--seq-length 32 --micro-batch-size 1 --global-batch-size 8\n")
    run = subprocess.run([sys.executable, CHECKS, "megatron", str(bad)], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "MEGATRON_CHECK_WORLD": "2"})
    assert run.returncode != 0 and "num_attention_heads" in run.stderr


@needs("torchtitan", "triton", extra="torchtitan")
def test_torchtitan_accepts_the_export(tmp_path, capsys):
    toml = tmp_path / "tt.toml"
    toml.write_text('[model]\nname = "llama3"\nflavor = "debugmodel"\n[training]\nlocal_batch_size = 8\nseq_len = 256\n'
                    "[parallelism]\ndata_parallel_replicate_degree = 2\ndata_parallel_shard_degree = 1\n"
                    "tensor_parallel_degree = 2\npipeline_parallel_degree = 2\npipeline_parallel_microbatch_size = 2\n"
                    '[activation_checkpoint]\nmode = "full"\n')
    plan, out = tmp_path / "plan.json", tmp_path / "out.toml"
    assert main(["simulate", "--from", "torchtitan", str(toml), "--cluster", "dgx-h100:1x8", "--split", "0,3,8",
                 "-o", str(plan)]) == 0
    assert main(["export", str(plan), "--to", "torchtitan", "-o", str(out)]) == 0
    got = _check("torchtitan", str(out))
    assert (got["replicate"], got["shard"], got["tp"], got["pp"], got["schedule"], got["microbatch_size"],
            got["local_batch_size"], got["ac"]) == (2, 1, 2, 2, "1F1B", 2, 8, "full")
    assert got["parts"] == [["tok_embeddings", "layers.0", "layers.1"],
                            ["layers.2", "layers.3", "layers.4", "layers.5", "norm", "output"]]


@needs("torchtitan", "triton", extra="torchtitan")
def test_torchtitan_accepts_hsdp(tmp_path, capsys):
    """A plan of dp 4 in ZeRO-3 shard groups of 2 (x tp 2), as torchtitan's ConfigManager and
    ParallelDims on 8 devices read it: HSDP, 2 replicas of FSDP2 over 2 ranks.  In this process, as
    the flavor check below: parsing a config sets no global state."""
    import importlib.util as iu

    spec = iu.spec_from_file_location("framework_checks", CHECKS)
    checks = iu.module_from_spec(spec)
    spec.loader.exec_module(checks)
    toml = tmp_path / "tt.toml"
    toml.write_text('[model]\nname = "llama3"\nflavor = "debugmodel"\n[training]\nlocal_batch_size = 8\nseq_len = 256\n'
                    "[parallelism]\ndata_parallel_replicate_degree = 2\ndata_parallel_shard_degree = 2\n"
                    "tensor_parallel_degree = 2\n")
    plan, out = tmp_path / "plan.json", tmp_path / "out.toml"
    assert main(["simulate", "--from", "torchtitan", str(toml), "--cluster", "dgx-h100:1x8", "-o", str(plan)]) == 0
    assert main(["export", str(plan), "--to", "torchtitan", "-o", str(out)]) == 0
    capsys.readouterr()
    got = checks.torchtitan(str(out), "8")
    assert (got["replicate"], got["shard"], got["tp"], got["dims"]) == \
        (2, 2, 2, {"dp_replicate": 2, "dp_shard": 2, "fsdp_enabled": True})


@needs("torchtitan", "triton", extra="torchtitan")
def test_torchtitan_flavors_and_split_are_torchtitans():
    """parsim's table of llama3 flavors and its split rule against torchtitan's own code."""
    from torchtitan.distributed.pipeline_parallel import generate_llm_fqn_per_model_part
    from torchtitan.models.llama3 import llama3_args
    from torchtitan.models.llama3.model.model import FeedForward

    for name, (dim, layers, heads, kv, mult, multiple, vocab) in FLAVORS.items():
        a = llama3_args[name]
        assert (a.dim, a.n_layers, a.n_heads, a.n_kv_heads or a.n_heads, a.ffn_dim_multiplier, a.multiple_of,
                a.vocab_size) == (dim, layers, heads, kv, mult, multiple, vocab)
        import torch
        with torch.device("meta"):
            ff = FeedForward(dim, 4 * dim, multiple, mult)
        assert ff.w1.out_features == _ffn(dim, mult, multiple)
    for stages, layers in ((2, 6), (4, 32), (8, 80), (3, 7)):
        parts = generate_llm_fqn_per_model_part(stages, layers)
        assert [sum(n.startswith("layers.") for n in p) for p in parts] == default_split(stages, layers)


@needs("mindspore", extra="mindspore")
@pytest.mark.parametrize("cluster, flags", [
    # pipeline stages, and ZeRO-1 in shard groups of 2 of dp 4 (HSDP: optimizer_weight_shard_size)
    ("local-cpu:4x2", ["--dp", "4", "--pp", "2", "--tp", "1", "--split", "0,4,10", "--microbatches", "4",
                       "--placement", "dp-inner", "--zero", "1", "--dp-shard", "2", "--recompute", "full"]),
    ("local-cpu:2x2", ["--dp", "2", "--microbatches", "2"]),
])
def test_mindspore_accepts_the_export(tmp_path, capsys, cluster, flags):
    path = _export(tmp_path, capsys, MLP, cluster, flags, "mindspore")
    got = _check("mindspore", path)
    if "--pp" in flags:
        assert (got["device_num"], got["cell"], got["pipeline_stages"], got["parallel_optimizer"],
                got["optimizer_weight_shard_size"]) == (8, "PipelineCell", 2, True, 2)
        assert got["stages"] == {str(i): int(i >= 4) for i in range(10)}
    else:   # examples/mlp_semi_auto.yaml's column-then-row strategies, dp folded into X's rows, W given [n, k]
        assert (got["device_num"], got["parallel_mode"]) == (4, "semi_auto_parallel")
        assert got["shards"] == {"1": [[2, 1], [2, 1]], "3": [[2, 2], [1, 2]]}
