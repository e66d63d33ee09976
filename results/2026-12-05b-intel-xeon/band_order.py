"""The classes a band widens through, scored leave-one-family-out on the committed residual table
with every out-of-sample residual in the bands: led by the device (device and model before mix and
model, the device alone before every row: the order until the fifty-fifth sitting), the mix before
the device, and the mix before the device without the device-alone class (shipped in the
fifty-fifth sitting, then withdrawn: results/2026-12-05b-intel-xeon/band-rules.txt).
Prints each kind of plan's band under each, the coverage, and the rows the first and last score
apart.  Prices nothing.

    python results/2026-12-05b-intel-xeon/band_order.py
"""
import dataclasses
import math
import statistics

import parsim.sim.band as band

table = band.load_residuals()
every = tuple(dataclasses.replace(r, held_out=False) for r in table)     # step_band keeps held_out rows out


KEYS = {"device, mix, model": lambda k: (k.device, k.mix, k.model), "mix, model": lambda k: (k.mix, k.model),
        "device, model": lambda k: (k.device, k.model), "model": lambda k: k.model, "device": lambda k: k.device,
        "every row": lambda k: ()}


def order(*labels):
    """parsim.sim.band._classes's shape for the classes ``labels``, narrowest first."""
    def classes(kind):
        for label in labels:
            yield label, lambda k, key=KEYS[label]: key(k) == key(kind)
    return classes


device_first = order("device, mix, model", "device, model", "mix, model", "model", "device", "every row")
mix_first = order("device, mix, model", "mix, model", "device, model", "model", "device", "every row")
no_device_alone = order("device, mix, model", "mix, model", "device, model", "model", "every row")


def scored(classes):
    band._classes = classes
    kinds = {k: band.step_band(1.0, k, every) for k in sorted({r.kind for r in table}, key=str)}
    rows = {}
    for r in table:
        b = band.step_band(1.0, r.kind, every, leave_out=r.family)
        if b is not None:
            rows[r.id] = (r, b, b.contains(math.exp(r.log_ratio)))
    return kinds, rows


if __name__ == "__main__":
    orders = {"device first": scored(device_first), "mix first": scored(mix_first),
              "no device alone": scored(no_device_alone)}
    print(f"{'kind of plan':42s} " + "  ".join(f"{name:>24s}" for name in orders))
    for k in orders["device first"][0]:
        cells = []
        for kinds, _ in orders.values():
            b = kinds[k]
            cells.append(f"{b.low:.2f}-{b.high:.2f} {b.source.split('(')[1].split(' as')[0][:12]:>12s}" if b else "none")
        print(f"{str(k):42s} " + "  ".join(f"{c:>24s}" for c in cells))
    for name, (_, rows) in orders.items():
        for held in (False, True):
            hits = [hit for r, _, hit in rows.values() if r.held_out == held]
            print(f"{name}: {'held-out' if held else 'development'} rows inside {sum(hits)} of {len(hits)} "
                  f"({sum(hits) / len(hits):.1%})")
        print(f"{name}: median width (high / low - 1) "
              f"{statistics.median(b.high / b.low - 1 for _, b, _ in rows.values()):.1%}")
    a, b = orders["device first"][1], orders["no device alone"][1]
    print("rows the first and last score apart (device first -> no device alone):")
    for ident in a:
        if a[ident][2] != b[ident][2]:
            r = a[ident][0]
            print(f"  {ident:48s} {'held-out' if r.held_out else 'development'} {str(r.kind):32s} "
                  f"measured/predicted {math.exp(r.log_ratio):.3f}: [{a[ident][1].low:.2f}, {a[ident][1].high:.2f}] "
                  f"-> [{b[ident][1].low:.2f}, {b[ident][1].high:.2f}]")
