# The FSDP2 checkpoint test that crashed once in a full suite (5d03613, results/2026-12-05e-intel-xeon/
# ci-rehearsals.txt), run 20 times in a row beside a busy-loop process on the second core, on the code before
# parsim.exec.tensor_parallel.full stopped calling DTensor.full_tensor (a clone of ffcdca4 at /tmp/repro).
#   bash results/2026-12-05f-intel-xeon/fsdp2_checkpoint_loop.sh   (prints one line a run)
export PYTHONPATH=/tmp/repro
cd /tmp/repro
python -c 'while 1: pass' & HOG=$!
for i in $(seq 1 20); do
  timeout 300 python -m pytest -q -x -p no:cacheprovider \
    "tests/test_exec.py::test_zero2_and_zero3_run_as_fsdp2_with_the_priced_collectives[resnet-dp2-zero3-examples/resnet50_cifar10_local.yaml-3-1]" \
    > /tmp/repro_$i.log 2>&1
  echo "$i rc=$? $(tail -1 /tmp/repro_$i.log)"
done
kill $HOG
