"""Development (set 2026-12-06f's Seed-OSS-style decoder, whose first report is read): what leaves its peak memory
low on every plan.  The model has dropout 0.1 on the attention probabilities (attention_dropout) and on each
residual branch (residual_dropout); each is switched off in turn in a copy of its model file, and one process's
step (micro-batch 100) is priced (parsim simulate, local-cpu) and run (parsim run, 3 steps) on this machine.

parsim extracts attention as the fused kernel a GPU runs (parsim.model.attention: on meta, SDPA goes to torch's
fused CPU operator, whose dropout keeps its RNG state and no mask), but on CPU torch 2.13 dispatches
scaled_dot_product_attention with dropout_p > 0 to the decomposed math path, which saves the probabilities, the
dropout mask and its output (and, with grouped KV heads, the expanded K and V).  Nothing here changes parsim.

    python results/2026-12-06h-intel-xeon/dropout_memory_seed_oss.py \\
        > results/2026-12-06h-intel-xeon/dropout-memory-seed-oss.txt
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

MODEL = Path("results/heldout/models/seed_oss_tiny.yaml")
MIB = 2 ** 20


def backends() -> None:
    """What torch chooses on this CPU for the model's attention shape, with and without dropout."""
    import torch
    from torch.nn.attention import SDPBackend

    q, k, v = (torch.randn(2, 6, 40, 32) for _ in range(3))
    for p in (0.1, 0.0):
        choice = SDPBackend(torch._fused_sdp_choice(q, k, v, None, p, True))
        print(f"scaled_dot_product_attention, dropout_p {p}: {choice.name}")


def main() -> None:
    backends()
    text = MODEL.read_text()
    print(f"{'attention_dropout':>17s} {'residual_dropout':>16s}  predicted MiB  measured MiB   error")
    with tempfile.TemporaryDirectory() as tmp:
        for attention, residual in (("0.1", "0.1"), ("0.0", "0.1"), ("0.1", "0.0"), ("0.0", "0.0")):
            model, plan, out = (Path(tmp) / f"{k}_{attention}_{residual}" for k in ("model.yaml", "plan.json", "run"))
            model.write_text(text.replace("attention_dropout: 0.1", f"attention_dropout: {attention}")
                             .replace("residual_dropout: 0.1", f"residual_dropout: {residual}"))
            subprocess.run(["parsim", "simulate", str(model), "--cluster", "local-cpu", "--dp", "1", "--pp", "1",
                            "--microbatches", "1", "-o", str(plan), "--json"], check=True, capture_output=True)
            subprocess.run(["parsim", "run", str(plan), "--out", str(out), "--steps", "3"], check=True,
                           capture_output=True)
            predicted = json.loads(plan.read_text())["estimate"]["peak_memory_bytes"]
            predicted = predicted[0] if isinstance(predicted, list) else predicted
            measured = json.loads((out / "measured.json").read_text())["peak_memory_bytes"][0]
            print(f"{attention:>17s} {residual:>16s}  {predicted / MIB:13.2f}  {measured / MIB:12.2f}"
                  f"  {predicted / measured - 1:+6.1%}")


if __name__ == "__main__":
    main()
