#!/usr/bin/env python3
"""Writes data/preferences-small.jsonl: a tiny preference set written for zt (original
text, no outside source): sums answered right (chosen) or off by a few (rejected), and
requests answered politely (chosen) or curtly (rejected). Deterministic (seed 7).
Usage: examples/make_preferences.py [OUT.jsonl]"""
import json
import random
import sys

rng = random.Random(7)
tasks = ["water the plants", "close the window", "check the oven", "feed the cat",
         "read the note", "sort the letters", "fold the towels", "lock the gate"]
pairs = []
for i in range(240):
    if i % 2 == 0:
        a, b = rng.randint(1, 40), rng.randint(1, 40)
        wrong = a + b + rng.choice([-3, -2, -1, 1, 2, 3])
        pairs.append({"prompt": f"Q: what is {a} plus {b}?\nA: ",
                      "chosen": f"{a} plus {b} is {a + b}.",
                      "rejected": f"{a} plus {b} is {wrong}."})
    else:
        t = rng.choice(tasks)
        pairs.append({"prompt": f"Q: could you {t}?\nA: ",
                      "chosen": f"Yes, gladly. I will {t} now.",
                      "rejected": f"No. Do it yourself."})
out = sys.argv[1] if len(sys.argv) > 1 else "data/preferences-small.jsonl"
with open(out, "w") as f:
    for p in pairs:
        f.write(json.dumps(p) + "\n")
