"""Built-in strategy sets: Megatron-LM's tensor-parallel layout for the zoo's GPT (whose blocks
are laid out as Megatron's: fused QKV, then attention, then a 4h MLP).

Shoeybi et al. 2019 ("Megatron-LM", Sec. 3): the QKV and first MLP projections are split by
columns, the attention projection and second MLP projection by rows, so a block needs one
all-reduce forward after each row split and one backward before each column split; attention
runs on a/t heads per device.  The embedding and the LM head are split by vocabulary where the
vocabulary divides (Megatron pads it to a multiple of 128 t; an unpadded one stays replicated:
the optional "?" patterns of parsim.shard.graph).
Korthikanti et al. 2022 (Sec. 4.2.2), sequence parallelism: the LayerNorms and dropouts between
the splits work on s/t of the sequence, turning each all-reduce into a reduce-scatter plus an
all-gather.
"""

from __future__ import annotations

LAYOUTS = ("megatron", "megatron-sp")
SEARCHED = "auto"          # every operator's strategy searched (parsim.shard.auto)


def megatron(t: int, sequence_parallel: bool = False) -> dict[str, tuple]:
    col, row, heads = ((1, 1), (1, t)), ((1, t), (t, 1)), ((t, 1, 1), (t, 1, 1))
    s = {
        "?embed/wte:embedding": ((t, 1),),
        "layers.*/qkv": col, "layers.*/:bmm#0": heads, "layers.*/:bmm#1": heads, "layers.*/proj": row,
        "layers.*/fc1": col, "layers.*/fc2": row,
        "?head/:mm": col,
    }
    if sequence_parallel:
        seq = ((1, t, 1),)
        s.update({"?embed/:add": seq, "?embed/drop:*": seq, "layers.*/ln1": seq, "layers.*/ln2": seq,
                  "?layers.*/drop:*": seq,                     # dropouts exist only with dropout > 0
                  "?head/ln_f": seq})
    return s


def strategies(layout: str, t: int) -> dict[str, tuple]:
    if layout == "megatron":
        return megatron(t)
    if layout == "megatron-sp":
        return megatron(t, sequence_parallel=True)
    raise ValueError(f"unknown tensor-parallel layout {layout!r}; choose one of {', '.join(LAYOUTS)}")
