"""What measuring each layer's backward rise on meta (parsim.model.recording._LiveStorages) costs at extraction:
DeepSeek-V3's graph (examples/deepseek_v3.yaml, 63 cut units) loaded in a fresh process from a checkout without the
change (727839b) and one with it, alternated A B A B A B, on this 2-core AMD host with nothing else running.  Prints
the wall time of import and extraction, and the rise of layers.3 (None where the checkout has no such field).

    git worktree add /tmp/wt0 727839b
    for i in 1 2 3; do for d in /tmp/wt0 /work/main; do
      python -W ignore results/2026-12-07d-amd-epyc/extract_time_ab.py $d examples/deepseek_v3.yaml | tail -n 2
    done; done > results/2026-12-07d-amd-epyc/extract-time-ab.txt
"""

import os
import sys
import time

os.chdir(sys.argv[1])
sys.path.insert(0, sys.argv[1])
t = time.perf_counter()
from parsim.model.spec import load_model  # noqa: E402

g = load_model(sys.argv[2]).graph
elapsed = time.perf_counter() - t
import parsim  # noqa: E402

print(parsim.__file__, getattr(g.layers[3], "bwd_rise_bytes", None))
print(f"{sys.argv[1]} {sys.argv[2]}: {elapsed:.2f} s, {len(g)} layers")
