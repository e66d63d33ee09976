"""What-if (in-sample, not a score): the 910B rows priced with fused attention's k' set by hand for heads under 128
(k_fill(d, k') / k_fill(128, k')), run at 34f8ab0 before attention_head_fill existed:

    python results/2026-12-02b-amd-epyc/attk_whatif.py 200 600 5000
"""
import sys

import parsim.cost.kernels as K
from parsim.cost.kernels import k_fill, REFERENCE_HEAD_DIM
from parsim.profile.published import load_all_figures, price
KH = None
orig = K.attention_head_efficiency
def patched(d, ex):
    if KH is None or not d or d >= REFERENCE_HEAD_DIM or ex.cpu_threads or ex.k_half != 64:
        return orig(d, ex)
    return k_fill(d, KH) / k_fill(REFERENCE_HEAD_DIM, KH)
K.attention_head_efficiency = patched
figs = [f for f in load_all_figures().figures if not f.excluded and 'atlas' in f.profile and 'deepseek15' not in f.id]
res = {}
for kh in [None] + [float(x) for x in sys.argv[1:]]:
    KH = kh
    errs = {}
    for f in figs:
        try: errs[f.id] = price(f).error
        except Exception: pass
    e = list(errs.values())
    print(f"k {kh}: {len(e)} rows mean {100*sum(e)/len(e):+.2f}% MAPE {100*sum(map(abs,e))/len(e):.2f}%", flush=True)
    res[kh] = errs
for i in res[None]:
    v = [res[k][i] for k in res]
    if abs(v[0] - v[-1]) > 0.005:
        print(f"{i:45s}", " ".join(f"{100*x:+6.1f}" for x in v))
