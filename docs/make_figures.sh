#!/usr/bin/env bash
# Regenerates the figures under docs/ with parsim itself. Run from anywhere, with parsim installed
# (or PYTHONPATH at the repository root): `bash docs/make_figures.sh`.
#
# docs/quickstart_gantt.png, the README's picture: the Gantt chart of the quick start's pick. It
# plans the README's quick-start example on the default cluster, then simulates the written plan.
# Keep QUICKSTART_MODEL equal to the model in the README's quick-start command.
set -euo pipefail
cd "$(dirname "$0")/.."
QUICKSTART_MODEL=examples/resnet50_cifar10_seeds.yaml
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
python -m parsim.cli plan "$QUICKSTART_MODEL" -o "$tmp/plan.json" > /dev/null
python -m parsim.cli simulate "$tmp/plan.json" --gantt docs/quickstart_gantt.png
