#!/usr/bin/env python3
"""Writes data/instructions-small.jsonl: a small instruction set in the Alpaca format
({"instruction", "input", "output"}) for the CPU fine-tuning example (docs/finetune.md,
"Fine-tune on the CPU"). Original, written for zt: a few simple task families (adding,
counting, next day/number, reversing, spelling, capitals, opposites, plurals, repeating
an input) over a list of common words, with short answers a tiny model can learn in
minutes. Deterministic (seeded); the file in the repository is its output.

  python3 examples/make_instructions.py [OUT.jsonl]
"""
import json
import os
import random
import sys

WORDS = ["apple", "river", "stone", "cloud", "bread", "green", "house", "light", "table",
         "water", "tiger", "music", "paper", "smile", "train", "chair", "plant", "sugar",
         "night", "ocean", "horse", "glass", "bird", "moon", "tree", "fish", "lamp", "road",
         "song", "book", "door", "milk", "rain", "star", "wind", "snow", "cake", "ship",
         "coat", "king", "frog", "salt", "hill", "leaf", "bell", "corn", "gold", "nest"]
OPPOSITES = [("hot", "cold"), ("big", "small"), ("up", "down"), ("fast", "slow"),
             ("day", "night"), ("open", "closed"), ("early", "late"), ("full", "empty"),
             ("happy", "sad"), ("light", "dark"), ("old", "new"), ("wet", "dry"),
             ("high", "low"), ("hard", "soft"), ("near", "far"), ("long", "short"),
             ("rich", "poor"), ("left", "right"), ("first", "last"), ("strong", "weak")]
PLURALS = [("cat", "cats"), ("dog", "dogs"), ("box", "boxes"), ("child", "children"),
           ("mouse", "mice"), ("city", "cities"), ("leaf", "leaves"), ("foot", "feet"),
           ("tooth", "teeth"), ("bus", "buses"), ("baby", "babies"), ("knife", "knives"),
           ("man", "men"), ("woman", "women"), ("goose", "geese"), ("story", "stories")]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


def examples(rng):
    out = []
    for _ in range(90):
        a, b = rng.randint(0, 20), rng.randint(0, 20)
        out.append((f"Add {a} and {b}.", "", f"{a + b}"))
    for _ in range(50):
        n = rng.randint(0, 98)
        out.append((f"What number comes after {n}?", "", f"{n + 1}"))
    for w in WORDS:
        out.append(("Reverse the word.", w, w[::-1]))
        out.append(("Spell the word with dashes between the letters.", w, "-".join(w)))
        out.append((f"How many letters are in the word {w}?", "", f"{len(w)}"))
        out.append((f"Write {w} in capital letters.", "", w.upper()))
    for a, b in OPPOSITES:
        out.append((f"What is the opposite of {a}?", "", b))
        out.append((f"What is the opposite of {b}?", "", a))
    for s, p in PLURALS:
        out.append((f"What is the plural of {s}?", "", p))
    for i, d in enumerate(DAYS):
        out.append((f"Which day comes after {d}?", "", DAYS[(i + 1) % 7]))
        out.append((f"Which day comes before {d}?", "", DAYS[(i - 1) % 7]))
    for _ in range(40):
        w = rng.choice(WORDS)
        out.append(("Repeat the input twice, separated by a space.", w, f"{w} {w}"))
    rng.shuffle(out)
    return out


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "data", "instructions-small.jsonl")
    rows = examples(random.Random(21))
    with open(path, "w") as f:
        for ins, inp, outp in rows:
            f.write(json.dumps({"instruction": ins, "input": inp, "output": outp}) + "\n")
    print(f"wrote {path}: {len(rows)} examples")
    return 0


if __name__ == "__main__":
    sys.exit(main())
