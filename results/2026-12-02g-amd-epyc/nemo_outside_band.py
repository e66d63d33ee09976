"""NeMo's two rows outside their bands (GPT-3 5B on 64 H100, Llama 2 7B on 8), looked at without
changing anything (the source is held out): each priced step, its bubble and its exposed
communication, and the model TFLOP/s a GPU the price implies from the rate NeMo reports
(reported x predicted / measured throughput).

    python results/2026-12-02g-amd-epyc/nemo_outside_band.py
"""

import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, ROOT)

import parsim.sim as sim  # noqa: E402
from parsim.profile.published import load_figures, price  # noqa: E402

REPORTED_TFLOPS = {"nemo2407-gpt3-5b-h100-64gpu": 736, "nemo2407-llama2-7b-h100-8gpu": 776}
estimates = []
simulate = sim.simulate


def kept(*args, **kwargs):
    estimates.append(simulate(*args, **kwargs))
    return estimates[-1]


sim.simulate = kept
figures = load_figures(os.path.join(ROOT, "results", "published", "nemo_perf_figures.yaml"))
for fid, reported in REPORTED_TFLOPS.items():
    p = price(figures.by_id(fid))
    est = estimates[-1]
    print(f"{fid}: error {p.error:+.1%}; step {est.step_time_s:.3f} s, bubble {est.bubble_fraction:.1%}, "
          f"exposed communication {est.exposed_comm_fraction:.1%}; implied {reported * (1 + p.error):.0f} "
          f"model TFLOP/s a GPU against the {reported} NeMo reports")
