"""The Megatron-Bridge DeepSeek-V3 row (mbridge2509-deepseek-v3-h100-1024gpu) priced at the shipped
profiles three ways: without the multi-token-prediction module (args mtp_layers 0), with it and
parsim's balanced split, and with it and Megatron's layout "Et|(tt|)*30mL" as the split.

    python results/2026-12-02d-amd-epyc/mtp_row.py > results/2026-12-02d-amd-epyc/mtp-row.txt
"""
import dataclasses

from parsim.profile.published import load_all_figures, price

MEGATRON_LAYOUT = ",".join(map(str, list(range(0, 63, 2)) + [63]))     # embed + layer 0, then 2 layers a stage, then the head


def variant(figure, split, mtp):
    parallel = {**dict(figure.parallel), "split": split}
    model = dict(figure.model)
    model["args"] = tuple(sorted({**dict(model["args"]), "mtp_layers": mtp}.items()))
    return dataclasses.replace(figure, parallel=tuple(parallel.items()), model=tuple(sorted(model.items())))


row = load_all_figures().by_id("mbridge2509-deepseek-v3-h100-1024gpu")
for name, split, mtp in [("no mtp, balanced split", "balanced", 0), ("mtp, balanced split", "balanced", 1),
                         ("mtp, Megatron's layout", MEGATRON_LAYOUT, 1)]:
    p = price(variant(row, split, mtp))
    print(f"{name:24s} {p.predicted:7.1f} tokens/s/GPU (measured 1297: {p.predicted / 1297 - 1:+.1%}), "
          f"step {p.step_time_s:.3f} s, {p.config}")
