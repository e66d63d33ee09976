"""BLOOM's topology trials (held out, results/published/bloom_prequel_figures.yaml) against their head
dimension: hidden / heads a multiple of 8 or not.  fp16 tensor-core GEMMs run best when each dimension is a
multiple of 16 bytes, 8 fp16 elements; cuBLAS 11 still uses Tensor Cores below that, less efficiently
(NVIDIA, "Matrix Multiplication Background User's Guide", Sec. 2.2 "Tensor Core Requirements").  parsim's
kernel model has no such term: its A100 GEMM fit (hardware_profiles/kernels/gemm_vidur.csv) holds no shape
with an unaligned dimension.  A head dimension of 150 or 108 makes both attention batched GEMMs unaligned
(QK^T reduces over it, AV produces it).

Reads the committed out-of-sample residuals (results/published/residuals.yaml): prices nothing, changes
nothing.  A diagnosis of a held-out source, not a fit: the source stays held out.

    python results/2026-12-05d-intel-xeon/bloom_alignment.py
"""

from __future__ import annotations

import math
import re
import statistics

from parsim.sim.band import load_residuals

ROW = re.compile(r"-h(\d+)-l(\w+)-a(\d+)-dp(\d+)tp(\d+)pp(\d+)-mbs(\d+)-gbs(\d+)-(\w+)$")


def main() -> None:
    rows = []
    for r in load_residuals():
        if r.family != "bigscience-tr11-prequel":
            continue
        h, layers, heads, dp, tp, pp, mbs, gbs, dtype = ROW.search(r.id).groups()
        head_dim = int(h) / int(heads)
        aligned = head_dim == int(head_dim) and int(head_dim) % 8 == 0
        rows.append((r.id, int(h), layers, int(heads), (dp, tp, pp), int(mbs), gbs, dtype, head_dim, aligned,
                     math.exp(r.log_ratio)))
    print(f"{len(rows)} scored rows of bigscience-tr11-prequel; measured / predicted step, out of sample")
    print("\nBy head dimension (hidden / heads) a multiple of 8, and micro-batch size:")
    groups: dict[tuple, list[float]] = {}
    for row in rows:
        groups.setdefault((row[9], row[5]), []).append(row[10])
    for (aligned, mbs), ratios in sorted(groups.items()):
        print(f"  {'aligned  ' if aligned else 'UNALIGNED'} micro-batch {mbs}: {len(ratios):3d} rows, median "
              f"{statistics.median(ratios):.3f}, range {min(ratios):.3f}-{max(ratios):.3f}")
    print("\nThe unaligned rows:")
    for row in rows:
        if not row[9]:
            print(f"  {row[0]:<60} head dim {row[8]:g}: {row[10]:.3f}")
    print("\nSame model, layout, micro-batch, batch and dtype, only the heads changed (each such group):")
    same: dict[tuple, list] = {}
    for row in rows:
        same.setdefault((row[1], row[2], row[4], row[5], row[6], row[7]), []).append(row)
    pairs = []
    for key, members in sorted(same.items()):
        if len({m[3] for m in members}) < 2:
            continue
        text = ", ".join(f"heads {m[3]} (dim {m[8]:g}) {m[10]:.3f}" for m in sorted(members, key=lambda m: m[3]))
        print(f"  h {key[0]} l {key[1]} dp/tp/pp {'/'.join(key[2])} mbs {key[3]}: {text}")
        good = [m[10] for m in members if m[9]]
        bad = [m[10] for m in members if not m[9]]
        if good and bad:
            pairs.append(statistics.median(bad) / statistics.median(good))
    if pairs:
        print(f"\nGroups with both kinds: {len(pairs)}; unaligned over aligned, each group's medians: "
              + ", ".join(f"{p:.3f}" for p in pairs) + f"; median {statistics.median(pairs):.3f}")


if __name__ == "__main__":
    main()
