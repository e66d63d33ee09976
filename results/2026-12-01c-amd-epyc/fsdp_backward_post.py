"""FSDP's BACKWARD_POST priced (training.fsdp_backward_prefetch): every row of llm-foundry's
README tables, as the row says (post on the 2023 tables' rows, sweep.sh's Composer default; the
large-scale table's sweep.py passes BACKWARD_PRE) and with the default pre, on the profiles as
shipped when it is run (deterministic pricing; the host does not enter it).

    python results/2026-12-01c-amd-epyc/fsdp_backward_post.py
"""

from dataclasses import replace

from parsim.profile.loso import load_fit_spec
from parsim.profile.published import _freeze, _thaw, load_all_figures, price


def with_prefetch(figure, mode):
    model = _thaw(figure.model)
    model.setdefault("training", {})["fsdp_backward_prefetch"] = mode
    return replace(figure, model=_freeze(model))


def main():
    held_out = load_fit_spec("results/published/fit.yaml").held_out
    rows = [f for f in load_all_figures().figures if f.source.startswith("llm-foundry") and not f.excluded]
    print(f"{'row':45s} {'source':26s} {'setting':8s} {'pre':>8s} {'post':>8s}   (throughput error, predicted / measured - 1)")
    errors = {}
    for f in rows:
        setting = dict(_thaw(f.model).get("training", {})).get("fsdp_backward_prefetch", "pre")
        pre, post = price(with_prefetch(f, "pre")).error, price(with_prefetch(f, "post")).error
        errors.setdefault((f.source, f.source in held_out), []).append((pre, post if setting == "post" else pre))
        print(f"{f.id:45s} {f.source:26s} {setting:8s} {pre:+8.1%} {post:+8.1%}")
    print()
    for (source, held), pairs in sorted(errors.items()):
        mape = lambda k: sum(abs(p[k]) for p in pairs) / len(pairs)   # noqa: E731
        print(f"{source:26s} {'held out' if held else 'development':12s} {len(pairs):3d} rows  MAPE all pre "
              f"{mape(0):5.1%}   as the rows say {mape(1):5.1%}")


if __name__ == "__main__":
    main()
