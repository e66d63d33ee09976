"""The step times Narayanan et al. 2021's ZeRO-3 rows imply (Table 2, results/published/
narayanan_zero3_figures.yaml): Eq. 3's FLOPs a step (96 B s l h^2 (1 + s/6h + V/16lh)) over the
GPUs, divided by the reported TFLOP/s per GPU.  Arithmetic on the published table, no simulation.

    python results/2026-12-01f-amd-epyc/zero3-step-times.py > results/2026-12-01f-amd-epyc/zero3-step-times.txt
"""


def eq3_flops(batch, seq, layers, hidden, vocab):
    return 96 * batch * seq * layers * hidden ** 2 * (1 + seq / (6 * hidden) + vocab / (16 * layers * hidden))


ROWS = [("174.6B", 96, 12288, 1536, 384, 4, 144), ("174.6B", 96, 12288, 1536, 768, 2, 88),
        ("174.6B", 96, 12288, 1536, 1536, 1, 44), ("529.6B", 105, 20480, 2560, 640, 4, 138),
        ("529.6B", 105, 20480, 2240, 1120, 2, 98), ("529.6B", 105, 20480, 2240, 2240, 1, 48)]

print("# python results/2026-12-01f-amd-epyc/zero3-step-times.py")
print(f"{'model':>7} {'GPUs':>5} {'micro-batch':>11} {'TFLOP/s/GPU':>11} {'step s':>7}")
for model, layers, hidden, batch, gpus, mb, tflops in ROWS:
    step = eq3_flops(batch, 2048, layers, hidden, 51200) / gpus / (tflops * 1e12)
    print(f"{model:>7} {gpus:>5} {mb:>11} {tflops:>11} {step:7.1f}")
