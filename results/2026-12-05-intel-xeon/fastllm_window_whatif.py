"""What the held-out fast-llm-docs rows price at without their sliding window (Mistral-7B's config with
sliding_window null: full causal attention), beside what they price at with it: how much of their
error the window accounts for.  A what-if on a copy of the rows; nothing here changes a price.

    python results/2026-12-05-intel-xeon/fastllm_window_whatif.py
"""
import os
import tempfile

from parsim.profile.published import load_figures, price

PATH = "results/published/fastllm_figures.yaml"
text = open(PATH).read()
assert "sliding_window: 4096" in text                  # every windowed row's inline config
with tempfile.TemporaryDirectory() as tmp:
    full = os.path.join(tmp, "fastllm_full_causal.yaml")
    open(full, "w").write(text.replace("sliding_window: 4096", "sliding_window: null"))
    causal = {f.id: price(f) for f in load_figures(full).figures if not f.excluded}
print(f"{'row':45s} {'measured':>9s} {'window':>16s} {'full causal':>16s}  (tokens/s/GPU, error)")
for f in load_figures(PATH).figures:
    if f.excluded:
        continue
    w, c = price(f), causal[f.id]
    print(f"{f.id:45s} {f.measured:9.0f} {w.predicted:8.0f} {w.error:+7.1%} {c.predicted:8.0f} {c.error:+7.1%}")
