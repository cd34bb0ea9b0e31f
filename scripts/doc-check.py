#!/usr/bin/env python3
"""Checks of the user docs (docs/*.md, README.md) and the evidence files (bench/results/*.md).

Usage: scripts/doc-check.py [--root DIR]

links   every relative Markdown link in those files resolves: the file or folder exists,
        and a '#anchor' into a Markdown file names one of its headings (GitHub's rule:
        lower case, punctuation dropped, spaces to '-', a repeated heading gets '-1', '-2').
lines   no line of docs/*.md or README.md has more than 400 characters, nor any line of
        bench/results/*.md outside a fenced block (logs stay as they were printed).
hints   every section the code names in a hint or comment (`docs/X.md "Heading"`, also
        `docs/X.md, "Heading"`, `docs/X.md's "Heading"`, `docs/X.md ("Heading"`, escaped quotes
        in C strings) is a heading of that doc: the heading starts with the quoted words;
        likewise a doc's own `"Heading" above` / `"Heading" below`.
size    docs/*.md and README.md hold fewer than 60,000 words in all (`wc -w`), and
        docs/architecture.md, the map a newcomer reads first, fewer than 1,200.

Exit 0: clean; 1: a rule is broken (each break named, file:line, with a hint); 2: bad usage.
"""
import argparse
import glob
import os
import re
import sys

LINE_LIMIT = 400
WORDS_ALL = 60000
WORDS_MAP = 1200
MAP = os.path.join("docs", "architecture.md")
LINK_RE = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
FENCE_RE = re.compile(r"^\s*(```|~~~)")
# A section named by the code: docs/X.md, then up to 3 characters (", ", "'s ", " (") and a quoted heading.
HINT_RE = re.compile(r'((?:docs|bench/results)/[A-Za-z0-9_.-]+\.md)(?:\'s|[ ,(]){1,3}\\?"([^"\\]{2,80})\\?"')
CODE_DIRS = ("src", "include", "checklist", "scripts", "tests", "bench", "cmake", "fuzz")
CODE_EXT = (".cpp", ".hpp", ".cu", ".cuh", ".h", ".py", ".sh", ".cmake", ".txt", ".toml")


def guides(root):
    return sorted(glob.glob(os.path.join(root, "docs", "*.md"))) + [os.path.join(root, "README.md")]


def evidence(root):
    return sorted(glob.glob(os.path.join(root, "bench", "results", "*.md")))


def text_lines(path):
    """(number, line) of the lines outside fenced code blocks."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    fenced = False
    for n, line in enumerate(lines, 1):
        if FENCE_RE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield n, line


def slug(heading):
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        seen, out = {}, set()
        for _, line in text_lines(path):
            m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if not m:
                continue
            base = slug(m.group(1))
            k = seen.get(base, 0)
            out.add(base if k == 0 else f"{base}-{k}")
            seen[base] = k + 1
        cache[path] = out
    return cache[path]


def check_links(root, files):
    breaks = []
    for path in files:
        rel = os.path.relpath(path, root)
        for n, line in text_lines(path):
            line = re.sub(r"`[^`]*`", "", line)  # a link inside code is an example, not a link
            for m in LINK_RE.finditer(line):
                target = m.group(1) or m.group(2)
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                    continue
                file_part, _, anchor = target.partition("#")
                dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
                if not os.path.exists(dest):
                    breaks.append(f"{rel}:{n}: link to {target}: {os.path.relpath(dest, root)} does not exist. "
                                  f"HINT: links are relative to the file that holds them")
                elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                    breaks.append(f"{rel}:{n}: link to {target}: {os.path.relpath(dest, root)} has no heading "
                                  f"'#{anchor}'. HINT: the anchor is the heading in lower case, punctuation "
                                  f"dropped, spaces as '-'")
    return breaks


def headings(path, cache={}):
    if path not in cache:
        cache[path] = [m.group(1) for _, line in text_lines(path)
                       if (m := re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line))]
    return cache[path]


def check_hints(root):
    breaks = []
    for top in CODE_DIRS:
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for name in sorted(names):
                if not name.endswith(CODE_EXT) and name != "CMakeLists.txt":
                    continue
                path = os.path.join(dirpath, name)
                if os.path.samefile(path, os.path.abspath(__file__)) or name == "doc_check_test.py":
                    continue  # this check's own examples and planted breaks
                try:
                    with open(path, encoding="utf-8") as f:
                        lines = f.read().splitlines()
                except (UnicodeDecodeError, OSError):
                    continue
                for n, line in enumerate(lines, 1):
                    for m in HINT_RE.finditer(line):
                        doc, title = m.group(1), m.group(2).strip()
                        if os.path.splitext(os.path.basename(doc))[0].isupper():
                            continue  # a placeholder (docs/X.md) in a comment that describes the rule
                        target = os.path.join(root, doc)
                        rel = os.path.relpath(path, root)
                        if not os.path.isfile(target):
                            breaks.append(f"{rel}:{n}: names {doc}, which does not exist. HINT: name the doc "
                                          f"that holds the section")
                        elif not any(h.startswith(title) for h in headings(target)):
                            breaks.append(f"{rel}:{n}: names {doc} \"{title}\", which is not a heading there. "
                                          f"HINT: name a heading of that doc (its first words), or add it")
    for path in guides(root):
        if not os.path.isfile(path):
            continue
        for n, line in text_lines(path):
            for m in re.finditer(r'"([^"]{3,80})"[,)]? (?:above|below)', line):
                if not any(h.startswith(m.group(1)) for h in headings(path)):
                    breaks.append(f"{os.path.relpath(path, root)}:{n}: \"{m.group(1)}\" is not a heading of this doc. "
                                  f"HINT: name a heading (its first words) of the section meant")
    return breaks


def check_lines(root, files, prose_only=False):
    breaks = []
    for path in files:
        with open(path, encoding="utf-8") as f:
            numbered = text_lines(path) if prose_only else enumerate(f.read().splitlines(), 1)
            for n, line in numbered:
                if len(line) > LINE_LIMIT:
                    breaks.append(f"{os.path.relpath(path, root)}:{n}: {len(line)} characters, over {LINE_LIMIT}. "
                                  f"HINT: shorten it; evidence (logs, figures) goes to bench/results/")
    return breaks


def words(path):
    with open(path, encoding="utf-8") as f:
        return len(f.read().split())


def check_size(root, files):
    breaks = []
    total = sum(words(p) for p in files)
    if total >= WORDS_ALL:
        breaks.append(f"docs/*.md + README.md: {total} words, the budget is under {WORDS_ALL}. HINT: say how "
                      f"to use a feature and what it guarantees; move the evidence to bench/results/")
    path = os.path.join(root, MAP)
    if os.path.isfile(path) and words(path) >= WORDS_MAP:
        breaks.append(f"{MAP}: {words(path)} words, the budget is under {WORDS_MAP}. HINT: it is the map "
                      f"only; details belong in each layer's doc")
    return breaks, total


def main():
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=here, help="the source tree (default: this script's repository)")
    root = parser.parse_args().root
    if not os.path.isfile(os.path.join(root, "README.md")):
        print(f"doc-check: {root} has no README.md: not a zt source tree (--root DIR)")
        return 2
    docs = [f for f in guides(root) if os.path.isfile(f)]
    size_breaks, total = check_size(root, docs)
    breaks = check_links(root, docs + evidence(root)) + check_lines(root, docs) + check_lines(root, evidence(root), prose_only=True) + size_breaks + check_hints(root)
    print("\n".join(breaks + [f"doc-check: {len(docs)} docs ({total} words), {len(evidence(root))} "
                              f"evidence files; {len(breaks)} broken rule(s)"]))
    return 1 if breaks else 0


if __name__ == "__main__":
    sys.exit(main())
