#!/bin/bash
# validate with a busy process (one core, pure Python loop) during pass 2's first run only
cd /work/main; . /work/venv/bin/activate
L=/work/runs/hostwatch-loaded.log
parsim validate results/heldout/models/vgg11_bn_cifar.yaml --set quick --passes 2 --steps 8 --out /work/runs/hostwatch-loaded --no-results > $L 2>&1 &
V=$!
until grep -q "^\[pass 2/2, 1/3\]" $L 2>/dev/null; do sleep 0.2; done
python -c "while True: pass" & B=$!
echo "busy start $(date -u +%T)" >> /work/runs/hostwatch-loaded.busy
until grep -q "^\[pass 2/2, 2/3\]" $L 2>/dev/null; do sleep 0.2; done
kill $B; echo "busy stop $(date -u +%T)" >> /work/runs/hostwatch-loaded.busy
wait $V; echo "rc=$?" >> $L
