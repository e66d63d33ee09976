"""Residuals before (HEAD) and after (the working tree): development, held-out and all rows, and the rows that moved most.

    python results/2026-12-02b-amd-epyc/compare_residuals.py
"""
import subprocess

import yaml
old = yaml.safe_load(subprocess.run(["git","show","HEAD:results/published/residuals.yaml"],capture_output=True,text=True).stdout)["rows"]
new = yaml.safe_load(open("results/published/residuals.yaml"))["rows"]
o = {r["id"]: r for r in old}; n = {r["id"]: r for r in new}
def stats(rows):
    dev=[r for r in rows if not r.get("held_out")]; ho=[r for r in rows if r.get("held_out")]
    m=lambda rs: sum(abs(r["error"]) for r in rs)/len(rs)
    dev2=[r for r in dev if "deepseek15" not in r["id"]]
    return f"dev {len(dev)} {100*m(dev):.2f}% (w/o +467 row {100*m(dev2):.2f}%), >25%: {sum(abs(r['error'])>.25 for r in dev)}; held-out {len(ho)} {100*m(ho):.2f}%; all {100*m(rows):.2f}%"
print("before:", stats(old)); print("after: ", stats(new))
ch = sorted(n, key=lambda i: -abs(abs(n[i]["error"]) - abs(o[i]["error"])) if i in o else 0)
for i in ch[:25]:
    if i in o: print(f"  {i:48s} {o[i]['family']:22s} {100*o[i]['error']:+7.1f} -> {100*n[i]['error']:+7.1f}{'  (held out)' if n[i].get('held_out') else ''}")
