"""Set 2026-12-07f's H4, H5 and H6 (results/2026-12-07f-amd-epyc/preregistered-2026-12-07f.md): the peak memory of
each rank of the set's plans (single, dp2, and each pp = 2 plan; the planner's pick is scored by H1-H3), priced with
both changes the set measures (735d246) and with one of them switched off, against the same measurement, which the
executor made with both.  The script checks the first against the report's profiled prediction (the peak of a plan
without ZeRO follows from its order of actions alone).

H4 (a torch pipeline stage's memory as torch holds it): over the six GPipe and ZB-H1 first stages, the mean |error|
lower with the change than without it (change_size_1207f.pipe_off), and lower on each model's two; the three 1F1B
first stages priced the same with it and without it.
H5 (NanoChat's cut): over the NanoChat-style model's eight ranks, the mean |error| lower with its cut than without it
(change_size_1207f.cut_off: the model extracted again without the embedding norm and the cap, the pipeline stage's
change on in both), and lower on each of the eight.
H6: with both, every single-process and dp2 rank within 3% and every rank (24) within 10%; the other two models
priced the same with NanoChat's cut and without it.

    python -W ignore results/2026-12-07g-amd-epyc/heldout_1207f_memory.py \\
        results/2026-12-07g-amd-epyc/heldout-2026-12-07f/*/validation.json \\
        > results/2026-12-07g-amd-epyc/heldout-1207f-memory.txt
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "2026-12-06g-intel-xeon"))
sys.path.insert(0, os.path.join(HERE, "..", "2026-12-07b-amd-epyc"))
sys.path.insert(0, os.path.join(HERE, "..", "2026-12-07f-amd-epyc"))

from change_size_1207f import cut_off, pipe_off  # noqa: E402
from heldout_1206f_memory import print_ranks  # noqa: E402
from heldout_1207_memory import mean_error  # noqa: E402
from heldout_1207e_memory import ranks  # noqa: E402
from runtime_sends_insample import totals  # noqa: E402

NANOCHAT = "heldout-nanochat-tiny"
SET_RANKS = lambda p: p["label"] != "planner"      # noqa: E731  (H1-H3 score the pick)


def without_pipe(spec, cluster, cfg) -> list[float]:
    with pipe_off():
        return totals(spec, cluster, cfg)


def without_cut(spec, cluster, cfg, _models={}) -> list[float]:
    """Each rank's peak of the model extracted again without NanoChat's cut (once per model)."""
    if spec.path not in _models:
        _models[spec.path] = cut_off(spec.path)
    return totals(_models[spec.path], cluster, cfg)


def lower(x: dict) -> bool:
    return abs(x["new"] / x["measured"] - 1) < abs(x["old"] / x["measured"] - 1)


def main(paths: list[str]) -> None:
    pipe = [x for path in paths for x in ranks(path, SET_RANKS, without_pipe)]
    print("with both changes against the pipeline stage's switched off (H4):")
    print_ranks(pipe, 28, 14)
    same = sum(abs(x["new"] - x["report"]) <= 1.0 for x in pipe)
    print(f"{len(pipe)} ranks; the analytical model with both changes gives the report's prediction on {same}")
    first = [x for x in pipe if x["rank"] == 0 and ("gpipe" in x["plan"] or "zbh1" in x["plan"])]
    each = {m: all(lower(x) for x in first if x["model"] == m) for m in dict.fromkeys(x["model"] for x in first)}
    f1b = [x for x in pipe if x["rank"] == 0 and "1f1b" in x["plan"]]
    f1b_same = sum(abs(x["new"] - x["old"]) <= 1.0 for x in f1b)
    holds = mean_error(first, "new") < mean_error(first, "old") and all(each.values()) and f1b_same == len(f1b) == 3
    print(f"the {len(first)} GPipe and ZB-H1 first stages: mean |error| with the change "
          f"{mean_error(first, 'new'):.2%}, without it {mean_error(first, 'old'):.2%}; lower on both of each "
          f"model's two on {sum(each.values())} of {len(each)} models; the 1F1B first stages the same on {f1b_same} of "
          f"{len(f1b)}: "
          f"H4 {'holds' if holds else 'fails'}")
    cut = [x for path in paths for x in ranks(path, SET_RANKS, without_cut)]
    print("\nwith both changes against NanoChat's cut switched off (H5, H6):")
    print_ranks(cut, 28, 14)
    nano = [x for x in cut if x["model"] == NANOCHAT]
    holds = len(nano) == 8 and mean_error(nano, "new") < mean_error(nano, "old") and all(lower(x) for x in nano)
    print(f"the NanoChat-style model's {len(nano)} ranks: mean |error| with its cut {mean_error(nano, 'new'):.2%}, "
          f"without it {mean_error(nano, 'old'):.2%}; lower on {sum(lower(x) for x in nano)} of {len(nano)}: "
          f"H5 {'holds' if holds else 'fails'}")
    one = [abs(x["new"] / x["measured"] - 1) for x in cut if x["plan"] in ("single", "dp2")]
    every = [abs(x["new"] / x["measured"] - 1) for x in cut]
    others = [x for x in cut if x["model"] != NANOCHAT]
    same = sum(x["new"] == x["old"] for x in others)
    holds = all(e <= 0.03 for e in one) and all(e <= 0.10 for e in every) and others and same == len(others)
    print(f"with both: {sum(e <= 0.03 for e in one)} of {len(one)} single and dp2 ranks within 3% (max |error| "
          f"{max(one):.1%}); {sum(e <= 0.10 for e in every)} of {len(every)} ranks within 10% (max |error| "
          f"{max(every):.1%}); the other two models' {len(others)} ranks the same with and without NanoChat's cut "
          f"on {same}: H6 {'holds' if holds else 'fails'}")


if __name__ == "__main__":
    main(sys.argv[1:])
