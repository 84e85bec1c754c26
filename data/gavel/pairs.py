"""Writes v100-pairs.csv from simulation_throughputs.json: run `python3 data/gavel/pairs.py`."""
import json
import re
from pathlib import Path

here = Path(__file__).parent
table = json.loads((here / "simulation_throughputs.json").read_text())["v100"]
keys = [k for k in table if k.endswith(", 1)")]


def job_type(key):
    name = key[2:-5]
    m = re.match(r"(.*) \(batch size (\d+)\)", name)
    return (m.group(1), int(m.group(2))) if m else (name, 0)


alone = {k: table[k]["null"] for k in keys}
with open(here / "v100-pairs.csv", "w") as out:
    out.write("# Derived from simulation_throughputs.json (v100, single-GPU job types; Gavel, MIT) by\n")
    out.write("# pairs.py: each measured pair's speeds beside each other as a fraction of alone (clamped to\n")
    out.write("# 0.02..1); 0,0 marks a pair that ran out of memory. Batch 0: the type's one measured batch.\n")
    out.write("family_a,batch_a,family_b,batch_b,speed_a,speed_b\n")
    for i, a in enumerate(keys):
        for b in keys[i:]:
            if b not in table[a]:
                continue
            pair = table[a][b]
            (fa, ba), (fb, bb) = job_type(a), job_type(b)
            if all(v == 0 for v in pair):
                sa = sb = 0.0
            else:
                sa = min(max(pair[0] / alone[a], 0.02), 1.0)
                sb = min(max(pair[1] / alone[b], 0.02), 1.0)
            out.write(f"{fa},{ba},{fb},{bb},{sa:.4f},{sb:.4f}\n")
