#!/bin/bash
# the four trimmed tests, before (0f57bf3) and after (HEAD), each checkout's own tests against its own code, alone
T="tests/test_export_frameworks.py::test_deepspeed_accepts_the_export tests/test_search_bound.py::test_searched_floor_is_below_the_searched_layouts_phases_and_every_simulated_step tests/test_exec.py::test_bf16_runs_with_fp32_master_weights_as_priced tests/test_notebooks.py::test_notebook_ships_current_outputs"
for side in before after; do
  # before: a worktree of 0f57bf3 at /tmp/wt_before (git worktree add /tmp/wt_before 0f57bf3); after: this checkout
  if [ $side = before ]; then d=/tmp/wt_before; else d=/work/main; fi
  echo "== $side ($(git -C $d rev-parse --short HEAD))"
  (cd $d && PYTHONPATH=$d /work/venv/bin/python -m pytest -q -p no:cacheprovider $T --durations=10 2>&1 | grep -E "s call|passed|failed")
done
