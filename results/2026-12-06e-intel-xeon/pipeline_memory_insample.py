"""The pipeline ranks' peak memory of every committed validation report (plans with pp = 2), in sample:
measured as the executor measured it until 2026-12-06 and with torch's receive buffers counted
(m boundary tensors a rank, which the measurement left out: parsim.exec.measure.static_bytes), against
the model as shipped (two boundary tensors a rank) and the rule planned for the model
(preregistered-2026-12-06d.md), term by term:

- recv: m receive buffers a rank, one direction each on pp = 2 (torch/distributed/pipelining/stage.py);
- out: each micro-batch in flight keeps the stage's output (PipelineStage.fwd_cache) until its backward,
  beyond what the stage's last unit saves of it (the next unit's input_shared_bytes on the first stage;
  the logits on the last, which nothing saves: the loss saves log_softmax's result);
- in: the last stage's first unit saves its input, which is the receive buffer (input_saved_bytes),
  so it is not counted again per micro-batch.

Every row read here is a development row for that rule.  Usage: python pipeline_memory_insample.py
[validation.json ...] (default: every results/**/validation.json)."""

import glob
import json
import statistics
import sys
from collections import defaultdict

from parsim.model.spec import load_model

MIB = 2 ** 20


def inflight(schedule: str, m: int, rank: int) -> int:
    return m if schedule == "gpipe" else min(m, 2 - rank)       # pp = 2: 1F1B's warm-up depth


def rows(paths):
    graphs = {}
    for path in paths:
        report = json.load(open(path))
        plans = {p["label"]: p for p in report.get("plans", [])}
        for r in report.get("memory_breakdown", []):
            p = plans.get(r["plan"])
            if p is None or p["pp"] != 2 or p.get("tp", 1) != 1 or r["meas_total_bytes"] is None \
                    or p["schedule"] not in ("gpipe", "1f1b") or p.get("dp", 1) != 1:
                continue
            model = report["model"]
            if model not in graphs:
                try:
                    graphs[model] = load_model(model)
                except Exception as e:          # a model file since moved: say so, skip it
                    print(f"# {path}: {model}: {type(e).__name__}", file=sys.stderr)
                    graphs[model] = None
            spec = graphs[model]
            if spec is None:
                continue
            layers = spec.graph.layers
            first = p["split"].split("|")[1].split("..")[0].strip()         # "4..15" or "layer2..head"
            cut = int(first) if first.isdigit() else spec.graph.index(first)
            m, rank = p["microbatches"], r["rank"]
            b = spec.training.global_batch_size // m
            boundary = layers[cut - 1].output_bytes * b
            k = inflight(p["schedule"], m, rank)
            if rank == 0:
                out = (layers[cut - 1].output_bytes - layers[cut].input_shared_bytes) * b
                inp = 0.0
            else:
                out = layers[-1].output_bytes * b                 # the logits (or classes) the loss reads
                inp = min(layers[cut].input_saved_bytes * b, boundary)
            old = r["pred_total_bytes"]
            base = old - 2 * boundary                             # the model without its two boundary tensors
            measured = r["meas_total_bytes"]
            fixed = measured + m * boundary
            yield dict(report=path, plan=r["plan"], rank=rank, m=m, boundary=boundary, measured=measured,
                       fixed=fixed, old=old, recv=base + m * boundary,
                       recv_out=base + m * boundary + k * out,
                       planned=base + m * boundary + k * (out - inp))


def main(paths):
    found = list(rows(paths))
    # one row per (report, plan, rank); the same report can be committed twice (moved evidence)
    seen, unique = set(), []
    for x in found:
        key = (x["plan"], x["rank"], round(x["measured"]), round(x["old"]))
        if key not in seen:
            seen.add(key)
            unique.append(x)
    print(f"{len(unique)} pipeline ranks (pp = 2, dp = 1) from {len({x['report'] for x in unique})} reports")
    print("rule                       vs measured  rank  median err  mean |err|  max |err|  within 10%")
    for rule, against in (("old", "measured"), ("old", "fixed"), ("recv", "fixed"), ("recv_out", "fixed"),
                          ("planned", "fixed")):
        for rank in (0, 1):
            errs = [x[rule] / x[against] - 1 for x in unique if x["rank"] == rank]
            print(f"{rule:<26} {against:<12} {rank:>4}  {statistics.median(errs):+9.1%}"
                  f"  {statistics.mean(map(abs, errs)):9.1%}  {max(map(abs, errs)):8.1%}"
                  f"  {sum(abs(e) <= 0.10 for e in errs):>4}/{len(errs)}")
    print()
    print("report / plan / rank: error of the old rule against the old measurement, of the old and the planned "
          "rule against the measurement with the receive buffers")
    by = defaultdict(list)
    for x in unique:
        by[x["report"]].append(x)
    for path, xs in by.items():
        for x in xs:
            print(f"{path.split('results/')[-1].removesuffix('/validation.json')[:70]:<70} {x['plan']:<13} {x['rank']}"
                  f"  {x['old'] / x['measured'] - 1:+6.1%}  {x['old'] / x['fixed'] - 1:+6.1%}"
                  f"  {x['planned'] / x['fixed'] - 1:+6.1%}")


if __name__ == "__main__":
    main(sys.argv[1:] or sorted(glob.glob("results/**/validation.json", recursive=True)))
