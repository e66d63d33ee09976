"""Every published row with a Hugging Face model (hf:) priced as transformers writes its block and
with ``fused_ops: true`` (RMSNorm, rotary embeddings and SwiGLU as the fused kernels Megatron-Core,
NeMo and MindSpeed run: parsim.model.fused_ops), on the shipped profiles, nothing refitted: the
change's effect alone, before any fit takes it up.  Excluded rows are left out.

    python results/2026-12-02h-amd-epyc/fused_ops_effect.py [ID_PREFIX ...]
"""

import os
import statistics
import sys
from dataclasses import replace

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, ROOT)

from parsim.profile.published import UnpricedFigure, _freeze, _thaw, load_all_figures, price  # noqa: E402

prefixes = sys.argv[1:]
rows = []
for f in load_all_figures(os.path.join(ROOT, "results", "published")).figures:
    model = _thaw(f.model)
    if "hf" not in model or f.excluded or (prefixes and not f.id.startswith(tuple(prefixes))):
        continue
    fused = dict(model, args={**(model.get("args") or {}), "fused_ops": True})
    try:
        a, b = price(f), price(replace(f, model=_freeze(fused)))
    except UnpricedFigure:
        continue
    rows.append((f, a.error, b.error))
    print(f"{f.id:48s} {f.source:22s} {f.profile:20s} as written {a.error:+7.1%}   fused {b.error:+7.1%}   "
          f"step x{b.step_time_s / a.step_time_s:.3f}", flush=True)
for name, pick in (("all", lambda f: True), ("GPU (NVIDIA)", lambda f: "dgx" in f.profile),
                   ("Ascend", lambda f: "atlas" in f.profile or "ascend" in f.profile)):
    sel = [(x, y) for f, x, y in rows if pick(f)]
    if sel:
        print(f"{name}: {len(sel)} rows, MAPE as written {statistics.mean(abs(x) for x, _ in sel):.1%}, fused "
              f"{statistics.mean(abs(y) for _, y in sel):.1%}; mean error {statistics.mean(x for x, _ in sel):+.1%} -> "
              f"{statistics.mean(y for _, y in sel):+.1%}")
