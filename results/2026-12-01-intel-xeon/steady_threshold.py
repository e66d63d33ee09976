import sys, time, io, contextlib
from parsim.sim import steady
th = float(sys.argv[3])
steady.FROM_ACTIONS = th
from parsim.cli import main
buf = io.StringIO()
t = time.perf_counter()
with contextlib.redirect_stdout(buf):
    main(["plan", sys.argv[1], "--cluster", sys.argv[2]])
dt = time.perf_counter() - t
out = buf.getvalue()
import re
out = re.sub(r"simulated (\d+) in [0-9.]+ s", r"simulated \1", out)
open(sys.argv[4], "w").write(out)
print(f"threshold {th:g}: {dt:.2f} s")
