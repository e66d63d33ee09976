"""The bad-input table: each gets one line naming the file and field, exit 2, no traceback."""

import json
import subprocess
import sys

import pytest

from parsim.cli import main

GOOD_MODEL = """schema_version: 1
model: resnet50
args: {num_classes: 10, image_size: 32}
training: {global_batch_size: 32}
"""

GOOD_PROFILE = """schema_version: 1
name: tiny
device: {name: d, memory: 1GiB, memory_bandwidth_gb_per_s: 10, peak_tflops: {fp32: 1}}
node: {devices: 2, group_link: {bandwidth_gb_per_s: 1}}
collective: {library: gloo}
"""

# (case, file name, content, command, words the one line must contain)
CASES = [
    ("unknown key", "m.yaml", GOOD_MODEL + "colour: red\n", "model", ["m.yaml", "colour", "unknown key"]),
    ("unknown nested key", "m.yaml", GOOD_MODEL.replace("global_batch_size: 32", "global_batch_size: 32, lr: 1"),
     "model", ["training.lr", "unknown key"]),
    ("wrong type", "m.yaml", GOOD_MODEL.replace("32}\n", "thirty-two}\n"), "model",
     ["training.global_batch_size", "integer"]),
    ("zero size", "m.yaml", GOOD_MODEL.replace("global_batch_size: 32", "global_batch_size: 0"), "model",
     ["training.global_batch_size", "positive"]),
    ("negative size", "m.yaml", GOOD_MODEL.replace("num_classes: 10", "num_classes: -3"), "model",
     ["args.num_classes", "positive"]),
    ("batch does not divide", "m.yaml", GOOD_MODEL + "parallel: {dp: 3, microbatches: 2}\n", "model",
     ["training.global_batch_size", "multiple of 6"]),
    ("missing file", None, None, "model", ["nope.yaml", "not found"]),
    ("module does not import", "m.yaml",
     "module: 'no_such_pkg.models:net'\ninput: {shape: [3]}\ntraining: {global_batch_size: 8}\n", "model",
     ["m.yaml", "module", "no_such_pkg"]),
    ("unknown builtin", "m.yaml", GOOD_MODEL.replace("resnet50", "resnet9000"), "model", ["model", "resnet9000"]),
    ("bad stage assignment", "m.yaml", GOOD_MODEL + "pipeline_stage: {head: 0, layer1: 1}\n", "model",
     ["pipeline_stage", "layer2.0", "no stage"]),
    ("strategy does not divide", "m.yaml", GOOD_MODEL + "shard: {fc: [[1, 1], [1, 3]]}\n", "model",
     ["m.yaml", "shard", "fc/2:addmm", "dimension 1 has size 10", "use one of"]),
    ("strategy names nothing", "m.yaml", GOOD_MODEL + "shard: {fc9: [[1, 1], [1, 2]]}\n", "model",
     ["m.yaml", "shard", "'fc9' names no operator"]),
    ("strategy not a list of lists", "m.yaml", GOOD_MODEL + "shard: {fc: [1, 2]}\n", "model",
     ["m.yaml", "shard.fc", "split counts"]),
    ("tp layout model without shard", "m.yaml", GOOD_MODEL + "parallel: {tp: 2, tp_layout: model}\n", "model",
     ["m.yaml", "parallel.tp_layout", "shard"]),
    ("bad yaml", "m.yaml", "training: [\n", "model", ["m.yaml", "YAML"]),
    ("profile without memory", "p.yaml", GOOD_PROFILE.replace("memory: 1GiB, ", ""), "cluster",
     ["p.yaml", "device.memory", "missing"]),
    ("profile negative bandwidth", "p.yaml", GOOD_PROFILE.replace("bandwidth_gb_per_s: 1}", "bandwidth_gb_per_s: -1}"),
     "cluster", ["node.group_link.bandwidth_gb_per_s", "positive"]),
    ("profile bad size", "p.yaml", GOOD_PROFILE.replace("1GiB", "lots"), "cluster", ["device.memory", "24GiB"]),
    ("unknown profile", None, "nosuch:2x8", "cluster", ["nosuch", "ascend910"]),
    ("rank table duplicate rank", "rt.json",
     json.dumps({"server_count": "1", "server_list": [{"server_id": "a", "device": [
         {"device_id": "0", "device_ip": "x", "rank_id": "0"}, {"device_id": "1", "device_ip": "y", "rank_id": "0"}]}]}),
     "cluster", ["rt.json", "rank_id", "twice"]),
]


@pytest.mark.parametrize("case,fname,content,command,words", CASES, ids=[c[0] for c in CASES])
def test_bad_input_gives_one_line_and_exit_2(tmp_path, capsys, case, fname, content, command, words):
    if fname is None:
        target = content if content else str(tmp_path / "nope.yaml")
    else:
        target = str(tmp_path / fname)
        (tmp_path / fname).write_text(content)
    code = main([command, target])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("parsim: error: ")
    for w in words:
        assert w in err, (w, err)


def test_no_traceback_reaches_the_shell(tmp_path):
    bad = tmp_path / "m.yaml"
    bad.write_text(GOOD_MODEL + "colour: red\n")
    proc = subprocess.run([sys.executable, "-m", "parsim.cli", "model", str(bad)], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1


def test_an_algorithm_the_library_lacks_is_one_line(capsys):
    code = main(["simulate", "examples/resnet50_cifar10_seeds_split.yaml", "--cluster", "dgx-a100:1x8",
                 "--algorithm", "halving-doubling"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert "--algorithm halving-doubling" in err and "nccl" in err and "ring, tree" in err
