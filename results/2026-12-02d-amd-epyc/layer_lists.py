"""What-if: MindSpeed-LLM's rows whose scripts pass --num-layer-list, priced at the shipped profiles
with parsim's even split (as results/published/mindspeed_llm_figures.yaml prices them, by its
header's two-layer rule, stated before figure rows could take a split) and with the script's own
layer list as the row's split (the embedding with the first stage, the head with the last).  In
sample for the 910B's fitted numbers (the shipped profiles were fitted on these rows), and not a
change of the rows: a what-if for the next refit.

    python results/2026-12-02d-amd-epyc/layer_lists.py > results/2026-12-02d-amd-epyc/layer-lists.txt
"""
import dataclasses

from parsim.profile.published import load_all_figures, price

ROWS = [  # (row, --num-layer-list, decoder layers): from each row's note and source_config
    ("msllm-internlm2-20b-4k-a2-8npu", [22, 26], 48),
    ("msllm-llama3_1-70b-a2-32npu", [17, 20, 22, 21], 80),
    ("msllm-qwen1_5-32b-a2-32npu", [14, 17, 18, 15], 64),
    ("msllm-qwen1_5-110b-a2-64npu", [7, 8, 9, 10, 11, 11, 12, 12], 80),
    ("msllm-qwen2_5-32b-a2-32npu", [11, 13, 19, 21], 64),     # excluded now, by the two-layer rule
]


def boundaries(counts: list[int], layers: int) -> str:
    """Stage boundaries over embed, layers.0 .. layers.{L-1}, head."""
    assert sum(counts) == layers
    out, at = [0], 1
    for c in counts[:-1]:
        at += c
        out.append(at)
    return ",".join(map(str, out + [layers + 2]))


figures = load_all_figures()
for ident, counts, layers in ROWS:
    f = figures.by_id(ident)
    measured = f.measured
    for name, split in (("even split", "balanced"), ("its --num-layer-list", boundaries(counts, layers))):
        p = price(dataclasses.replace(f, parallel=tuple({**dict(f.parallel), "split": split}.items())))
        print(f"{ident:32s} {name:22s} {split:26s} predicted {p.predicted:7.1f} tokens/s/p, "
              f"measured {measured:g}: {p.predicted / measured - 1:+.1%}")
