"""A prior for the 910B's fused attention at heads of 64 against 128 (atlas-900-a2's
kernels.attention_head_fill), from the one public cost model of FlashAttention on Ascend A2/A3:
cann/pto-isa's kernels/manual/common/flash_atten/scripts/fa_cost_model.py (Huawei, 2026; read at
commit 05f6105998296948eab5a6b31014a037e5a5a10e of the GitHub mirror zouzias/pto-isa-mirror),
"calibrated from simulator traces".  Its kernel runs four stages a tile of the key sequence,

    qk (Cube) -> p (Vector: the softmax) -> pv (Cube) -> gu (Vector: the output's rescale)

with cycles per tile at head 128, 128 query rows and 256 keys (its FitConstants): qk 2487.479,
p 2488.855, pv 1617.252, gu 833.652; qk, pv and gu scale with the head, p does not (its
estimate_cycles: qk_pv_work and gu_work carry cfg.head, p_work does not).  Written here from
those numbers, not copied: the Cube and the Vector as two queues, qk run qk_preload tiles ahead
(its default 4), pv after its tile's p, gu after its pv, timed over many tiles (steady state; its
fixed launch, sync and GM corrections left out, which do not depend on the head).  Prints each
head's cycles a tile, f(64) = (FLOPs ratio) / (time ratio) and u = 2 - 1/f(64), the fill at 128
that parsim.cost.kernels.attention_head_efficiency takes (f(64) = 1 / (2 - u)).

    python results/2026-12-02b-amd-epyc/fa_head_prior.py
"""

QK, P, PV, GU = 2487.479, 2488.855, 1617.252, 833.652      # cycles a tile at head 128 (FitConstants)
PRELOAD, TILES = 4, 4096


def cycles_per_tile(head: int) -> float:
    s = head / 128
    qk, p, pv, gu = QK * s, P, PV * s, GU * s
    qk_done, p_done = [0.0] * TILES, [0.0] * TILES
    cube = vector = 0.0
    for t in range(PRELOAD):
        cube += qk
        qk_done[t] = cube
        vector = max(vector, qk_done[t]) + p
        p_done[t] = vector
    for t in range(TILES):
        n = t + PRELOAD
        if n < TILES:
            cube += qk
            qk_done[n] = cube
            vector = max(vector, qk_done[n]) + p
            p_done[n] = vector
        cube = max(cube, p_done[t]) + pv
        vector = max(vector, cube) + gu
    return max(cube, vector) / TILES


if __name__ == "__main__":
    t64, t128 = cycles_per_tile(64), cycles_per_tile(128)
    f64 = 0.5 / (t64 / t128)
    print(f"cycles a tile: head 64 {t64:.1f}, head 128 {t128:.1f} (Cube a tile {QK + PV:.1f} and {(QK + PV) / 2:.1f}; "
          f"Vector {P + GU:.1f} and {P + GU / 2:.1f})")
    print(f"f(64) = 0.5 / {t64 / t128:.4f} = {f64:.4f}; u = 2 - 1/f(64) = {2 - 1 / f64:.4f} "
          f"(k' = 128 (1 - u) / u = {128 * (1 - (2 - 1 / f64)) / (2 - 1 / f64):.1f})")
