"""Llama 3 8B at tp 8 on one Atlas 900 A2 server, as MindSpeed-LLM's Mcore script runs it (with MC2,
--use-mc2: tp_comm_overlap) and as ModelLink 1.1's Legacy script ran it (without), priced both ways at
the shipped profiles, beside the three measurements (tokens/s/p):

    python results/2026-12-03b-amd-epyc/mc2_llama3_8b.py
"""

import os
import sys
from dataclasses import replace

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, ROOT)

from parsim.profile.published import load_all_figures, price  # noqa: E402

figures = load_all_figures(os.path.join(ROOT, "results", "published"))
for ident in ("modellink11-llama3-8b-a2-8npu", "msllm-llama3-8b-a2-8npu", "msllm-llama3_1-8b-a2-8npu"):
    f = figures.by_id(ident)
    par = dict(f.parallel)
    priced = {o: price(replace(f, parallel=tuple({**par, "tp_comm_overlap": o}.items()))) for o in (False, True)}
    print(f"{ident:34s} measured {f.measured:6.0f} with{'' if par.get('tp_comm_overlap') else 'out'} MC2; priced "
          f"{priced[False].predicted:6.0f} without, {priced[True].predicted:6.0f} with (step "
          f"{priced[False].step_time_s:.2f} s -> {priced[True].step_time_s:.2f} s, "
          f"{1 - priced[True].step_time_s / priced[False].step_time_s:.1%} of it hidden)")
