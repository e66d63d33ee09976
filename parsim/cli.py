"""The ``parsim`` command: parse, call, print.  Every command takes ``--json``.

User errors (ParsimError) print one line on stderr and exit with their code (2 for bad input,
3 when nothing fits); no traceback reaches the user.
"""

from __future__ import annotations

import argparse
import json
import sys

from parsim.errors import ParsimError


def _print_json(obj) -> None:
    json.dump(obj, sys.stdout, indent=2, sort_keys=True, default=float)
    sys.stdout.write("\n")


def cmd_model(args) -> int:
    from parsim.model.spec import load_model
    from parsim.report.fmt import human_bytes, human_si

    spec = load_model(args.model)
    g = spec.graph
    if args.json:
        _print_json({"name": spec.name, "training": spec.training.__dict__, "graph": g.to_dict(),
                     "totals": g.totals(), "manual_stages": spec.manual_stages})
        return 0
    df = g.table()
    if spec.manual_stages:
        df.insert(1, "stage", spec.manual_stages)
    show = df.assign(
        params=df.param_count.map(lambda v: f"{v:,}"),
        fwd_flops=df.fwd_flops.map(lambda v: human_si(v, "FLOP")),
        bwd_flops=df.bwd_flops.map(lambda v: human_si(v, "FLOP")),
        output=df.output_bytes.map(human_bytes), saved=df.saved_bytes.map(human_bytes),
        mem_bound=(df.fwd_mem_bytes + df.bwd_mem_bytes).map(human_bytes))
    cols = ["name"] + (["stage"] if spec.manual_stages else []) + ["params", "fwd_flops", "bwd_flops", "output",
                                                                   "saved", "mem_bound"]
    print(f"{spec.name}: {len(g)} cut units, dtype {g.dtype}, per sample "
          "(FLOPs = 2 x MACs; output = boundary activation; saved = kept for backward; "
          "mem_bound = bytes moved by memory-bound ops, fwd + bwd)")
    print(show[cols].to_string(index=False))
    t = g.totals()
    print(f"total: {t['param_count']:,} parameters ({human_bytes(t['param_bytes'])}), "
          f"forward {human_si(t['fwd_flops_per_sample'], 'FLOP')} ({human_si(t['fwd_flops_per_sample'] / 2, 'MAC')}), "
          f"backward {human_si(t['bwd_flops_per_sample'], 'FLOP')}, "
          f"saved activations {human_bytes(t['saved_bytes_per_sample'])} per sample; "
          f"global batch {spec.training.global_batch_size}, optimizer {spec.training.optimizer}")
    return 0


def cmd_cluster(args) -> int:
    from parsim.hardware import load_cluster
    from parsim.report.fmt import human_bytes, human_si, human_time

    c = load_cluster(args.cluster)
    d = c.describe()
    if args.json:
        _print_json(d)
        return 0
    print(f"{d['cluster']}: {d['description']}")
    print(f"  {d['nodes']} node(s) x {d['devices_per_node']} devices = {d['world_size']} ranks; "
          f"collectives: {d['collective_library']}")
    dev = d["device"]
    peaks = ", ".join(f"{k} {human_si(v, 'FLOP/s')}" for k, v in dev["peak_flops_per_s"].items())
    print(f"  device {dev['name']}: {human_bytes(dev['memory_bytes'])} at "
          f"{human_si(dev['memory_bandwidth_bytes_per_s'], 'B/s')}; peak {peaks}")
    print(f"  groups per node: {d['groups_per_node']}; NICs per node: {d['nics_per_node']}")
    for cls, link in d["links"].items():
        print(f"  link {cls:8s} {human_si(link['bandwidth_bytes_per_s'], 'B/s'):>12s} per direction, "
              f"latency {human_time(link['latency_s'])}")
    if d["rank_devices"]:
        print("  rank -> (server, device_id): " + ", ".join(f"{r}->{tuple(x)}" for r, x in enumerate(d["rank_devices"])))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="parsim", description="Simulate and plan parallel training.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("model", help="print a model's layer table")
    p.add_argument("model", help="model.yaml")
    p.add_argument("--json", action="store_true", help="print JSON on stdout")
    p.set_defaults(func=cmd_model)

    p = sub.add_parser("cluster", help="print a cluster: devices, groups and links")
    p.add_argument("cluster", help="PROFILE:NODESxDEVICES (ascend910:2x8), a profile YAML or a rank-table JSON")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_cluster)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except ParsimError as e:
        print(f"parsim: error: {e}", file=sys.stderr)
        return e.exit_code
    except BrokenPipeError:  # e.g. `parsim model m.yaml | head`
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print("parsim: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
