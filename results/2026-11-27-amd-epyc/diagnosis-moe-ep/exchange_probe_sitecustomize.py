import os, time, sys, json
REC = []
def _patch():
    import parsim.exec.expert_parallel as ep
    ot, oc = ep.Exchanges.tokens, ep.Exchanges.counts
    def wrap(name, f):
        def g(*a, **k):
            t = time.monotonic(); r = f(*a, **k); REC.append((name, t, time.monotonic()))
            if len(REC) % 100 == 0:
                json.dump(REC, open(f"/tmp/probe/rec.{os.environ['RANK']}.json", "w"))
            return r
        return g
    ep.Exchanges.tokens = wrap("tokens", ot); ep.Exchanges.counts = wrap("counts", oc)
if os.environ.get("RANK") is not None:
    import importlib.abc
    class Hook(importlib.abc.MetaPathFinder):
        done = False
        def find_spec(self, name, path, target=None):
            if not Hook.done and hasattr(sys.modules.get("parsim.exec.expert_parallel"), "parallelize"):
                Hook.done = True
                _patch()
            return None
    sys.meta_path.insert(0, Hook())
