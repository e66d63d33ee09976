"""Full recomputation of the first N layers of each stage (parsim simulate --recompute-layers N;
Megatron-Core's --recompute-method block --recompute-num-layers N), from none to full, for one
GPT-3 175B layout on 512 H100s (its balanced split: 10 to 13 transformer layers a stage).

    python results/simulated/recompute_layers.py > results/simulated/2026-12-01-recompute-layers.txt
"""
import json
import subprocess
import sys

from parsim.hardware import load_cluster

CLUSTER = "dgx-h100:64x8"
BASE = ["examples/gpt3_175b.yaml", "--cluster", CLUSTER, "--tp", "8", "--tp-layout", "megatron", "--pp", "8",
        "--dp", "8", "--zero", "1", "--microbatches", "64"]
RUNS = [("none", ["--recompute", "none"])] + [(f"{n} layers/stage", ["--recompute-layers", str(n)])
                                             for n in (1, 2, 4, 6, 7, 8, 10, 12)] + [("full", ["--recompute", "full"])]


def main() -> None:
    usable = load_cluster(CLUSTER).device.usable_memory_bytes
    print("# python results/simulated/recompute_layers.py: parsim simulate " + " ".join(BASE) + " and the flags of "
          "each row")
    print(f"{'recompute':>16} {'step s':>8} {'rank 0 activations GiB':>23} {'plan peak GiB':>14}  "
          f"fits in {usable / 2**30:.2f} GiB")
    for label, flags in RUNS:
        out = subprocess.run([sys.executable, "-m", "parsim.cli", "simulate", *BASE, *flags, "--json"],
                             capture_output=True, text=True, check=True).stdout
        e = json.loads(out)
        peak = max(e["peak_memory_bytes"])
        print(f"{label:>16} {e['step_time_s']:8.3f} {e['memory_breakdown'][0]['activations_bytes'] / 2**30:23.2f} "
              f"{peak / 2**30:14.2f}  {'yes' if peak <= usable else 'no'}")


if __name__ == "__main__":
    main()
