"""Hybrid sharding (parsim simulate --dp-shard N: ZeRO's shards over groups of N data-parallel
ranks, replicated across the groups; torchtitan's data_parallel_shard_degree) against ZeRO over
every rank: Llama 2 7B and 70B on 16 DGX A100 nodes (128 GPUs), one 4,096-token sequence a GPU a
step (global batch 128), full recomputation, ZeRO stages 1 and 3, shard groups of one node (8) and
of two (16).  The simulator's predictions, not measurements.

    python results/simulated/hsdp.py > results/simulated/2026-12-01-hsdp.txt
"""
import json
import os
import subprocess
import sys
import tempfile

from parsim.hardware import load_cluster

CLUSTER = "dgx-a100:16x8"
MODELS = ("examples/llama2_7b.yaml", "examples/llama2_70b.yaml")


def with_batch(path: str, batch: int) -> str:
    """The model.yaml with ``global_batch_size: batch``, written beside it (its hf: path is relative)."""
    text = open(path).read()
    lines = [f"  global_batch_size: {batch}" if line.strip().startswith("global_batch_size:") else line
             for line in text.splitlines()]
    fd, out = tempfile.mkstemp(suffix=".yaml", dir=os.path.dirname(path))
    with os.fdopen(fd, "w") as f:
        f.write("\n".join(lines) + "\n")
    return out


def main() -> None:
    print(f"# python results/simulated/hsdp.py: parsim simulate MODEL --cluster {CLUSTER} --dp 128 --pp 1 "
          "--microbatches 1 --recompute full --zero Z [--dp-shard N], global batch 128")
    usable = load_cluster(CLUSTER).device.usable_memory_bytes
    print(f"{'model':>10} {'zero':>4} {'dp_shard':>8} {'step s':>8} {'exposed comm':>12} {'opt. state GiB':>14} "
          f"{'peak GiB':>9} {'NVLink GB':>10} {'network GB':>10}  fits in {usable / 2**30:.2f} GiB")
    for model in MODELS:
        path = with_batch(model, 128)
        try:
            for zero in (1, 3):
                for shard in (0, 8, 16):
                    flags = ["--zero", str(zero)] + (["--dp-shard", str(shard)] if shard else [])
                    out = subprocess.run([sys.executable, "-m", "parsim.cli", "simulate", path, "--cluster", CLUSTER,
                                          "--dp", "128", "--pp", "1", "--microbatches", "1", "--recompute", "full",
                                          *flags, "--json"], capture_output=True, text=True, check=True).stdout
                    e = json.loads(out)
                    mem, moved = e["memory_breakdown"][0], e["comm_bytes"]
                    print(f"{os.path.basename(model)[:-5]:>10} {zero:>4} {shard or 'all':>8} {e['step_time_s']:8.3f} "
                          f"{e['exposed_comm_fraction']:12.1%} {mem['optimizer_bytes'] / 2**30:14.2f} "
                          f"{max(e['peak_memory_bytes']) / 2**30:9.1f} {moved.get('group', 0) / 1e9:10.0f} "
                          f"{moved.get('network', 0) / 1e9:10.0f}  "
                          f"{'yes' if max(e['peak_memory_bytes']) <= usable else 'no'}")
            if model == MODELS[0]:      # the planner's refinement of the same layout (parsim plan --hybrid-shard)
                flags = ["--dp", "128", "--pp", "1", "--microbatches", "1", "--recompute", "full", "--zero", "1",
                         "--hybrid-shard", "--top", "1", "--json"]
                out = subprocess.run([sys.executable, "-m", "parsim.cli", "plan", path, "--cluster", CLUSTER, *flags],
                                     capture_output=True, text=True, check=True).stdout
                lines = [x for x in json.loads(out)["explanation"] if x.startswith("hybrid sharding")]
                print(f"# parsim plan MODEL --cluster {CLUSTER} {' '.join(flags[:-1])}: " + (lines[0] if lines else
                      "no hybrid sharding"))
        finally:
            os.remove(path)


if __name__ == "__main__":
    main()
