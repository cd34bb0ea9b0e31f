#!/usr/bin/env python3
"""Static checks of the source tree that keep the house in order (issue 37); no build needed.

Usage: scripts/source-check.py [lines|layers|all] [--root DIR]

lines   no C/C++/CUDA source or header under src/ include/ tests/ checklist/ bench/ fuzz/
        has more than 600 lines (split it by concept, each file opening with what it holds).
layers  every layer includes only its own headers and those of the layers its row in
        docs/architecture.md's layer table lists under "may use", each of which must be a
        layer below it (a row further up). The table is the one source of truth: its rows
        give the order, the folders of each layer and what each may use. Every source file
        under src/ and include/ must lie in a layer's folder; every quoted include of a layer
        file must resolve (beside the file or under include/), generated headers excepted.
        An angle-bracket include that names a project file other than <zt/...> under
        include/ (reached through an include directory, `<nvml.hpp>`) is a break: project
        headers are included as "name" beside the file or <zt/layer/...>. A layer's
        CMakeLists.txt never adds another layer's folder (or a folder above one, but
        include/) to target_include_directories. The top-level CMakeLists.txt adds the
        layers in the table's order.

Exit 0: clean; 1: a rule is broken (each break named, file:line); 2: bad usage, or the
table cannot be read.
"""
import argparse
import os
import re
import sys

LIMIT = 600
SIZE_ROOTS = ("src", "include", "tests", "checklist", "bench", "fuzz")
SOURCE_EXT = (".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".hxx", ".cu", ".cuh", ".inl", ".ipp", ".tpp")
LAYERED_ROOTS = ("src", "include")  # every source file here must belong to a layer
GENERATED = {"zt/version.hpp"}  # configured into the build tree (cmake/version.hpp.in)
TABLE_DOC = os.path.join("docs", "architecture.md")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


class TableError(Exception):
    pass


def sources(root, tops):
    """Relative paths of the C/C++/CUDA files under root/<top> for each top, sorted."""
    out = []
    for top in tops:
        base = os.path.join(root, top)
        for d, dirs, files in os.walk(base):
            dirs[:] = sorted(x for x in dirs if not x.startswith("."))
            for f in files:
                if f.endswith(SOURCE_EXT):
                    out.append(os.path.relpath(os.path.join(d, f), root))
    return sorted(out)


def count_lines(path):
    with open(path, "rb") as f:
        data = f.read()
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def check_lines(root):
    over = []
    files = sources(root, SIZE_ROOTS)
    for rel in files:
        n = count_lines(os.path.join(root, rel))
        if n > LIMIT:
            over.append((n, rel))
    for n, rel in sorted(over, reverse=True):
        print(f"{rel}: {n} lines, over the limit of {LIMIT}. HINT: split it by concept "
              f"(docs/architecture.md \"Rules the suite checks\"), each new file opening with what it holds")
    print(f"source-check lines: {len(files)} files under {', '.join(SIZE_ROOTS)}; {len(over)} over {LIMIT} lines")
    return 1 if over else 0


def split_row(line):
    cells = line.strip()
    if not (cells.startswith("|") and cells.endswith("|")):
        return None
    return [c.strip() for c in cells[1:-1].split("|")]


def parse_table(root):
    """[(layer, [folders], [may use])] in the table's order, lowest first."""
    path = os.path.join(root, TABLE_DOC)
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise TableError(f"cannot read {TABLE_DOC}: {e.strerror}")
    start = next((i for i, l in enumerate(lines) if l.startswith("## Layers")), None)
    if start is None:
        raise TableError(f"{TABLE_DOC} has no '## Layers' section")
    i = start + 1
    while i < len(lines) and not lines[i].startswith("|"):
        if lines[i].startswith("#"):
            raise TableError(f"{TABLE_DOC}: no table under '## Layers'")
        i += 1
    header = split_row(lines[i]) if i < len(lines) else None
    if not header:
        raise TableError(f"{TABLE_DOC}: no table under '## Layers'")
    names = [h.lower() for h in header]
    try:
        c_layer, c_folders, c_uses = names.index("layer"), names.index("folders"), names.index("may use")
    except ValueError:
        raise TableError(f"{TABLE_DOC}:{i + 1}: the layer table needs the columns 'layer', 'folders' "
                         f"and 'may use' (found: {', '.join(header)})")
    rows = []
    for j in range(i + 2, len(lines)):
        cells = split_row(lines[j])
        if cells is None:
            break
        if len(cells) != len(header):
            raise TableError(f"{TABLE_DOC}:{j + 1}: {len(cells)} cells, the header has {len(header)} "
                             f"(a '|' inside a cell?)")
        layer = cells[c_layer].strip("`* ")
        folders = [f.rstrip("/") for f in re.findall(r"`([^`]+)`", cells[c_folders])]
        uses = [u for u in re.split(r"[,\s]+", cells[c_uses].replace("`", "")) if u and u not in ("-", "—")]
        if not re.fullmatch(r"[a-z0-9_]+", layer) or not folders:
            raise TableError(f"{TABLE_DOC}:{j + 1}: a row needs a layer name and its folders in `backticks`")
        rows.append((layer, folders, uses, j + 1))
    if not rows:
        raise TableError(f"{TABLE_DOC}: the layer table has no rows")
    known = [r[0] for r in rows]
    for k, (layer, folders, uses, ln) in enumerate(rows):
        if layer in known[:k]:
            raise TableError(f"{TABLE_DOC}:{ln}: layer {layer} twice")
        for u in uses:
            if u not in known:
                raise TableError(f"{TABLE_DOC}:{ln}: {layer} may use '{u}', which is no layer of the table")
            if known.index(u) >= k:
                raise TableError(f"{TABLE_DOC}:{ln}: {layer} may use {u}, which is not below it; "
                                 f"a layer uses only layers below it (move the row, or the code)")
        for f in folders:
            if not os.path.isdir(os.path.join(root, f)):
                raise TableError(f"{TABLE_DOC}:{ln}: {layer}'s folder {f} does not exist")
    return [(l, f, u) for l, f, u, _ in rows]


def layer_of(rel, folders):
    """The layer whose folder holds rel (the longest folder wins), or None."""
    best, best_len = None, -1
    for layer, fs in folders:
        for f in fs:
            if (rel == f or rel.startswith(f + "/")) and len(f) > best_len:
                best, best_len = layer, len(f)
    return best


def check_layers(root):
    try:
        table = parse_table(root)
    except TableError as e:
        print(f"source-check layers: {e}")
        return 2
    order = [l for l, _, _ in table]
    folders = [(l, f) for l, f, _ in table]
    may_use = {l: set(u) for l, _, u in table}
    breaks = []
    tops = sorted({f.split("/")[0] for _, fs in folders for f in fs} | set(LAYERED_ROOTS))
    files = [r for r in sources(root, tops) if r.split("/")[0] in LAYERED_ROOTS or layer_of(r, folders)]
    for rel in files:
        own = layer_of(rel, folders)
        if own is None:
            breaks.append(f"{rel}: in no layer's folder. HINT: put it in a layer's folder, or add its folder "
                          f"to the layer's row in {TABLE_DOC}")
            continue
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
            text = f.read().splitlines()
        for n, line in enumerate(text, 1):
            m = INCLUDE_RE.match(line)
            if not m:
                continue
            quote, name = m.groups()
            if name in GENERATED:
                continue
            target = None
            if quote == "<" and not name.startswith("zt/"):
                reached = project_file(root, rel, name, files)
                if reached is None:
                    continue  # a system or third-party header
                breaks.append(f"{rel}:{n}: #include <{name}> reaches the project file {reached} through an include "
                              f"directory. HINT: include it as \"{name}\" beside the file, or as <zt/<layer>/...> "
                              f"under include/")
                target = reached
            if target is None and quote == '"':
                beside = os.path.normpath(os.path.join(os.path.dirname(rel), name))
                if os.path.isfile(os.path.join(root, beside)):
                    target = beside
            if target is None and (quote == '"' or name.startswith("zt/")):
                public = os.path.normpath(os.path.join("include", name))
                if os.path.isfile(os.path.join(root, public)):
                    target = public
            if target is None:
                if quote == '"' or name.startswith("zt/"):
                    close = '"' if quote == '"' else ">"
                    breaks.append(f"{rel}:{n}: #include {quote}{name}{close}: found neither beside the file nor under "
                                  f"include/. HINT: a layer includes its own files, or include/zt/<layer>/...; "
                                  f"system headers take <>")
                continue
            other = layer_of(target, folders)
            if other is None:
                breaks.append(f"{rel}:{n}: includes {target}, which is in no layer (a layer never includes "
                              f"tests, bench or fuzz code)")
            elif other != own and other not in may_use[own]:
                if order.index(other) > order.index(own):
                    why = f"{other} is above {own} in {TABLE_DOC}'s layer table; a layer uses only layers below it"
                else:
                    why = (f"{other} is below {own} but not in {own}'s 'may use' cell in {TABLE_DOC}: add it "
                           f"there if the dependency is meant")
                breaks.append(f"{rel}:{n}: {own} includes {target} of layer {other}: {why}")
    breaks += check_include_dirs(root, folders)
    breaks += check_cmake_order(root, order)
    for b in breaks:
        print(b)
    print(f"source-check layers: {len(order)} layers ({' < '.join(order)}), {len(files)} files; "
          f"{len(breaks)} broken rule(s)")
    return 1 if breaks else 0


def project_file(root, rel, name, files):
    """The project file an angle-bracket include of `name` in rel can reach: beside it,
    under include/, or any source file whose path ends in /name; else None."""
    for cand in (os.path.normpath(os.path.join(os.path.dirname(rel), name)), os.path.normpath(os.path.join("include", name))):
        if os.path.isfile(os.path.join(root, cand)):
            return cand
    ends = [f for f in files if f.endswith("/" + name)]
    return ends[0] if ends else None


INCLUDE_DIRS_RE = re.compile(r"target_include_directories\s*\(([^)]*)\)", re.S)
CMAKE_KEYWORDS = {"PRIVATE", "PUBLIC", "INTERFACE", "SYSTEM", "BEFORE", "AFTER"}


def check_include_dirs(root, folders):
    """No layer's CMakeLists.txt adds another layer's folder, or a folder above one (but
    include/, whose zt/<layer>/ paths the include rule checks), as an include directory."""
    breaks = []
    for layer, fs in folders:
        for f in fs:
            for d, dirs, files in os.walk(os.path.join(root, f)):
                dirs[:] = sorted(x for x in dirs if not x.startswith("."))
                if "CMakeLists.txt" not in files:
                    continue
                cmake = os.path.relpath(os.path.join(d, "CMakeLists.txt"), root)
                with open(os.path.join(root, cmake), encoding="utf-8", errors="replace") as fh:
                    text = fh.read()
                here = os.path.dirname(cmake)
                for m in INCLUDE_DIRS_RE.finditer(text):
                    line = text.count("\n", 0, m.start()) + 1
                    for token in m.group(1).split()[1:]:
                        token = token.strip('"')
                        for var in ("${CMAKE_CURRENT_SOURCE_DIR}", "${CMAKE_CURRENT_LIST_DIR}"):
                            token = token.replace(var, "./" + here if here else ".")
                        for var in ("${PROJECT_SOURCE_DIR}", "${CMAKE_SOURCE_DIR}", "${zt_SOURCE_DIR}"):
                            token = token.replace(var, ".")
                        if token in CMAKE_KEYWORDS or "$" in token or os.path.isabs(token):
                            continue  # the build tree, a found package, a generator expression
                        rooted = token == "." or token.startswith("./")
                        target = os.path.normpath(token if rooted else os.path.join(here, token))
                        if target == "include":
                            continue
                        owner = layer_of(target, folders)
                        below = sorted({l for l, lfs in folders for lf in lfs
                                        if l != layer and (target == "." or lf.startswith(target + "/"))})
                        if owner is not None and owner != layer:
                            breaks.append(f"{cmake}:{line}: target_include_directories adds {target}, a folder of "
                                          f"layer {owner}, to {layer}. HINT: include its public headers as "
                                          f"<zt/{owner}/...> (include/), never its private folder")
                        elif owner is None and below:
                            breaks.append(f"{cmake}:{line}: target_include_directories adds {target}, above the "
                                          f"folders of {', '.join(below)}, to {layer}. HINT: add only this layer's "
                                          f"own folders")
    return breaks


def check_cmake_order(root, order):
    """The top-level CMakeLists.txt adds src/<layer> in the table's order."""
    path = os.path.join(root, "CMakeLists.txt")
    if not os.path.isfile(path):
        return []
    with open(path, encoding="utf-8") as f:
        m = re.search(r"foreach\(layer ([^)]*)\)", f.read())
    if not m:
        return [f"CMakeLists.txt: no 'foreach(layer ...)' adding the layers (source-check reads their order there)"]
    listed = m.group(1).split()
    unknown = [l for l in listed if l not in order]
    if unknown:
        return [f"CMakeLists.txt: foreach(layer ...) names {', '.join(unknown)}, not layers of {TABLE_DOC}"]
    if listed != sorted(listed, key=order.index):
        return [f"CMakeLists.txt: foreach(layer {' '.join(listed)}) is not in {TABLE_DOC}'s order "
                f"({' '.join(l for l in order if l in listed)})"]
    return []


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("check", nargs="?", default="all", choices=("lines", "layers", "all"))
    p.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                   help="the source tree (default: this script's repository)")
    a = p.parse_args()
    if not os.path.isdir(os.path.join(a.root, "src")):
        print(f"source-check: {a.root} has no src/: not a zt source tree (--root DIR)")
        return 2
    rc = 0
    if a.check in ("lines", "all"):
        rc = max(rc, check_lines(a.root))
    if a.check in ("layers", "all"):
        rc = max(rc, check_layers(a.root))
    return rc


if __name__ == "__main__":
    sys.exit(main())
