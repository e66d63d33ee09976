"""Two checks of the change set 2026-12-07e measures (parsim.model.hf.outer_scalings), each with the scalings and
without them (the function giving none, the model extracted again):
- the head of a Gemma 2-style model whose logits are capped: its saved bytes and its backward's memory traffic a
  sample, in units of a sample's fp32 logits (the cap's tanh keeps its output for the backward);
- a Cohere-style model (logit scale 0.0625) under tensor parallelism, tp = 4 Megatron layout on one dgx-h100 node:
  `parsim simulate`'s step and bytes moved a step (the scaled logits stay on the vocabulary's shards).

    python -W ignore results/2026-12-07e-amd-epyc/outer_scalings_checks.py \\
        > results/2026-12-07e-amd-epyc/outer-scalings-checks.txt
"""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
from unittest import mock

import parsim.model.extracted
import parsim.model.hf
from parsim.cli import main as cli
from parsim.model.spec import model_from_mapping

TINY = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "vocab_size": 256, "max_position_embeddings": 16, "rope_theta": 10000.0,
        "tie_word_embeddings": False}
GEMMA2 = {"model_type": "gemma2", "head_dim": 16, "query_pre_attn_scalar": 16, "sliding_window": 64,
          "final_logit_softcapping": 30.0, "attn_logit_softcapping": 50.0}
COHERE = """schema_version: 1
name: cohere-tp
hf: {model_type: cohere, hidden_size: 256, intermediate_size: 512, num_hidden_layers: 2, num_attention_heads: 8,
     num_key_value_heads: 4, vocab_size: 4096, max_position_embeddings: 128, logit_scale: 0.0625,
     tie_word_embeddings: true}
args: {seq_len: 128}
training: {global_batch_size: 16, dtype: bf16, optimizer: adam}
"""


@contextlib.contextmanager
def without():
    """The model as parsim cut it before the change: no scaling outside the layers, extracted again."""
    with mock.patch.object(parsim.model.hf, "outer_scalings", lambda cfg: (None, None, None)), \
            mock.patch.dict(parsim.model.extracted._EXTRACTED, clear=True):
        yield


def head():
    raw = {"schema_version": 1, "name": "tiny", "hf": {**TINY, **GEMMA2},
           "args": {"seq_len": 16, "attn_implementation": "eager"},
           "training": {"global_batch_size": 8, "dtype": "fp32", "optimizer": "adam"}}
    return model_from_mapping(raw, "tiny.yaml").graph.layers[-1]


def simulated(path: str) -> list[str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        cli(["simulate", path, "--cluster", "dgx-h100:1x8", "--tp", "4", "--tp-layout", "megatron"])
    return [line[:90] for line in out.getvalue().splitlines() if line.startswith(("step ", "bytes moved"))]


def main() -> None:
    logits = 16 * 256 * 4                                          # a sample's fp32 logits
    capped = head()
    with without():
        plain = head()
    print(f"Gemma 2-style head, cap 30: saved {plain.saved_bytes / logits:.2f} -> {capped.saved_bytes / logits:.2f}"
          f" logits a sample; backward's memory traffic {plain.bwd_mem_bytes / logits:.2f} -> "
          f"{capped.bwd_mem_bytes / logits:.2f}; forward's {plain.fwd_mem_bytes / logits:.2f} -> "
          f"{capped.fwd_mem_bytes / logits:.2f}")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "cohere_tp.yaml")
        with open(path, "w") as f:
            f.write(COHERE)
        with without():
            before = simulated(path)
        after = simulated(path)
    for b, a in zip(before, after):
        print(f"Cohere-style, tp=4 on dgx-h100, without the scale: {b}")
        print(f"Cohere-style, tp=4 on dgx-h100, with it:           {a}")


if __name__ == "__main__":
    main()
