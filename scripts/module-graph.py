#!/usr/bin/env python3
"""Prints the top-level module import graph of a crate, its strongly connected components
(import cycles), and the functions longer than 100 and 150 lines.

An edge `a -> b` means some file under top-level module `a` names `crate::b` (in a `use`, a
re-export or a qualified path) or reaches `b` through `super::` from below the crate root.
Names the crate root re-exports (`pub use store::Store;` in lib.rs) count as their module.

Usage: scripts/module-graph.py [CRATE_SRC_DIR...]   (default: engine/src ui/src src)
Options: --quiet (only the summary lines), --check (exit 1 on a module or file import cycle, an
engine function over 150 lines, or a face naming an engine module it may not), --faces (only
the faces' references to engine modules other than `api`, `domain`, `config` and `paths`, and
their direct store calls: how far `src/` is from reaching the engine through the API alone;
with --files, the files that do; with --check, exit 1 when there is any)."""
import os
import re
import sys

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def strip(src):
    """Source text with comments, strings and char literals blanked (newlines kept), so that
    braces and paths are only counted in code."""
    out = []
    i, n = 0, len(src)

    def blank(s):
        return "".join("\n" if c == "\n" else " " for c in s)

    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(blank(src[i:j]))
            i = j
        elif src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(blank(src[i:j]))
            i = j
        elif c in "br" and re.match(r"b?r#*\"", src[i:i + 40]) and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            m = re.match(r"b?r(#*)\"", src[i:])
            end = "\"" + m.group(1)
            j = src.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append('""' + blank(src[i + 2:j]))
            i = j
        elif c == '"' or (c == "b" and src.startswith('b"', i) and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_"))):
            j = i + (2 if c == "b" else 1)
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            out.append('""' + blank(src[i + 2:j + 1]))
            i = j + 1
        elif c == "'":
            m = re.match(r"'(\\(u\{[0-9a-fA-F]+\}|x[0-9a-fA-F]{2}|.)|[^\\'])'", src[i:i + 12], re.S)
            if m:
                out.append(blank(m.group(0)))
                i += m.end()
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def module_of(root, path):
    rel = os.path.relpath(path, root)[:-3].split(os.sep)
    if rel[-1] in ("lib", "main", "mod"):
        rel = rel[:-1]
    return rel


def top_modules(root):
    """Top-level modules declared in lib.rs and the root re-exports that name them."""
    lib = os.path.join(root, "lib.rs")
    if not os.path.exists(lib):
        lib = os.path.join(root, "main.rs")
    code = strip(open(lib).read())
    mods = re.findall(r"^\s*(?:pub(?:\([a-z]+\))?\s+)?mod\s+([a-z_0-9]+)\s*;", code, re.M)
    # Modules declared through a macro listing them (`internal_modules!(a, b, ...);`).
    for listed in re.findall(r"^\s*[a-z_]+_modules!\(([^)]*)\)", code, re.M):
        mods += [m for m in IDENT.findall(listed) if m not in mods]
    aliases = {}
    for m in re.finditer(r"pub\s+use\s+([a-z_0-9]+)::(\{[^}]*\}|[A-Za-z_0-9]+)\s*;", code):
        if m.group(1) in mods:
            for name in IDENT.findall(m.group(2)):
                aliases[name] = m.group(1)
    return mods, aliases


def path_targets(code, start):
    """The first segments of the path (or `{...}` group) that begins at `start`."""
    if code[start:start + 1] == "{":
        depth, j = 0, start
        while j < len(code):
            if code[j] == "{":
                depth += 1
            elif code[j] == "}":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        inner = code[start + 1:j]
        # split top-level items of the group
        items, depth, cur = [], 0, ""
        for ch in inner:
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            if ch == "," and depth == 0:
                items.append(cur)
                cur = ""
            else:
                cur += ch
        items.append(cur)
        return [m.group(0) for m in (IDENT.search(it) for it in items) if m]
    m = IDENT.match(code, start)
    return [m.group(0)] if m else []


def inline_modules(code):
    """The inline modules of a file (`mod tests { ... }`), as (start, end, name): they deepen
    the module path for `super::` between start and end."""
    out = []
    for m in re.finditer(r"\bmod\s+([a-z_0-9]+)\s*\{", code):
        depth, end = 0, code.index("{", m.start())
        while end < len(code):
            if code[end] == "{":
                depth += 1
            elif code[end] == "}":
                depth -= 1
                if depth == 0:
                    break
            end += 1
        out.append((m.start(), end, m.group(1)))
    return out


def edges_of_file(code, mod, tops, aliases):
    """Top-level modules this file's code names, outside its own top-level module."""
    found = set()
    inline = inline_modules(code)

    def mod_at(pos):
        return list(mod) + [name for start, end, name in inline if start < pos < end]

    for m in re.finditer(r"(?<![A-Za-z0-9_:])((?:super::)+|crate::)", code):
        here = mod_at(m.start())
        if m.group(1) != "crate::":
            ups = m.group(1).count("super::")
            if ups < len(here):
                continue  # stays below the crate root: inside the same top-level module
        for seg in path_targets(code, m.end()):
            target = seg if seg in tops else aliases.get(seg)
            if target and (not here or target != here[0]):
                found.add(target)
    return found


def fn_lengths(code):
    """(name, first line, length in lines) of every function with a body."""
    res = []
    for m in re.finditer(r"\bfn\s+([A-Za-z_][A-Za-z0-9_]*)", code):
        j, depth = m.end(), 0
        while j < len(code):
            ch = code[j]
            if ch in "([":
                depth += 1
            elif ch in ")]":
                depth -= 1
            elif ch == ";" and depth == 0:
                j = -1
                break
            elif ch == "{" and depth == 0:
                break
            j += 1
        if j < 0 or j >= len(code):
            continue
        depth, k = 0, j
        while k < len(code):
            if code[k] == "{":
                depth += 1
            elif code[k] == "}":
                depth -= 1
                if depth == 0:
                    break
            k += 1
        first = code.count("\n", 0, m.start()) + 1
        last = code.count("\n", 0, k) + 1
        res.append((m.group(1), first, last - first + 1))
    return res


def sccs(nodes, edges):
    """Tarjan's strongly connected components, largest first."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return sorted(out, key=lambda c: (-len(c), c))


ENGINE_PATH = re.compile(r"\b(?:crate::engine|cleveragents_engine)::([a-z_][a-z0-9_]*)")
# Direct database use: `.store()` and a method called on a value named `store`.
STORE_CALL = re.compile(r"\.store\(\)|\bstore\.[a-z_][a-z0-9_]*\(")
# Engine modules a face may name: the API, and the public record types its views are made of.
FACE_ALLOWED = {"api", "domain", "config", "paths"}
SEGMENTS = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\s*::\s*(?:[A-Za-z_][A-Za-z0-9_]*|\{))*")


def file_modules(root):
    """Every file of the crate's module tree, by module path (`('lifecycle', 'apply')`)."""
    tops, _ = top_modules(root)
    out = {}
    for d, _, names in os.walk(root):
        for f in names:
            if f.endswith(".rs"):
                path = os.path.join(d, f)
                mod = tuple(module_of(root, path))
                if not mod or mod[0] in tops:
                    out[mod] = path
    return out


def expand(code, start):
    """The paths written at `start`: `a::b::c`, `a::{b, c::d}` as `a::b` and `a::c::d`, or a
    group `{b, c::d}` as `b` and `c::d`."""
    if code[start:start + 1] == "{":
        head, brace = ["{"], start  # `super::{a, b}`: a group right after the prefix
    else:
        m = SEGMENTS.match(code, start)
        if not m:
            return []
        head = [x.strip() for x in m.group(0).split("::")]
        if head[-1] != "{":
            return [head]
        brace = code.index("{", start + len(m.group(0)) - 1)
    depth, j, items, cur = 0, brace, [], ""
    while j < len(code):
        ch = code[j]
        depth += ch == "{"
        depth -= ch == "}"
        if depth == 0:
            break
        if ch == "," and depth == 1:
            items.append(cur)
            cur = ""
        elif j > brace:
            cur += ch
        j += 1
    items.append(cur)
    out = []
    for item in items:
        k = SEGMENTS.search(item)
        if k:
            for tail in expand(item, k.start()):
                out.append(head[:-1] + tail)
    return out


def file_edges(root):
    """File -> files it names through `crate::` and `super::` paths (the deepest file module
    each path reaches), within one crate."""
    files = file_modules(root)
    edges = {path: set() for path in files.values()}
    for mod, path in files.items():
        code = strip(open(path, encoding="utf-8").read())
        inline = inline_modules(code)
        for m in re.finditer(r"(?<![A-Za-z0-9_:])((?:super::)+|crate::)", code):
            base = []
            if m.group(1) != "crate::":
                # `super` of a file module is its parent; inside an inline module
                # (`mod tests { ... }`) the first `super` is the file's own module.
                ups = m.group(1).count("super::")
                ups -= sum(1 for start, end, _ in inline if start < m.start() < end)
                base = list(mod)[: max(len(mod) - ups, 0)]
            for segs in expand(code, m.end()):
                full = tuple(base + [s for s in segs if s != "self"])
                for n in range(len(full), 0, -1):
                    target = files.get(full[:n])
                    if target:
                        if target != path and full[:n] != mod[: n]:
                            edges[path].add(target)
                        break
    return edges


def file_cycles(root):
    """The import cycles between files of one crate (components of two or more files)."""
    edges = file_edges(root)
    return [c for c in sccs(edges.keys(), edges) if len(c) > 1]


def face_report(root="src"):
    """How far the faces are from reaching the engine through `api` alone: the references
    from `root` to each other engine module, and the `.store()` calls (direct database use)."""
    counts, store_calls, files = {}, 0, set()
    for d, _, names in os.walk(root):
        for f in sorted(names):
            if not f.endswith(".rs"):
                continue
            path = os.path.join(d, f)
            code = strip(open(path, encoding="utf-8").read())
            for m in ENGINE_PATH.finditer(code):
                if m.group(1) not in FACE_ALLOWED:
                    counts[m.group(1)] = counts.get(m.group(1), 0) + 1
                    files.add(path)
            n = len(STORE_CALL.findall(code))
            store_calls += n
            if n:
                files.add(path)
    total = sum(counts.values())
    allowed = ", ".join(sorted(FACE_ALLOWED))
    print(f"== faces ({root}): {total} references to engine modules other than {allowed}, "
          f"in {len(counts)} modules; {store_calls} store calls; {len(files)} files")
    for mod, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"  {mod}: {n}")
    if "--files" in sys.argv:
        for f in sorted(files):
            print(f"    {f}")
    return total + store_calls


def main():
    if "--faces" in sys.argv:
        sys.exit(1 if face_report() and "--check" in sys.argv else 0)
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    quiet, check = "--quiet" in sys.argv, "--check" in sys.argv
    roots = args or ["engine/src", "ui/src", "src"]
    failed = False
    for root in roots:
        tops, aliases = top_modules(root)
        edges, fns = {t: set() for t in tops}, []
        for d, _, files in os.walk(root):
            for f in sorted(files):
                if not f.endswith(".rs"):
                    continue
                path = os.path.join(d, f)
                mod = module_of(root, path)
                if mod and mod[0] not in tops:
                    continue  # a binary or a file outside the library's module tree
                code = strip(open(path, encoding="utf-8").read())
                if mod:
                    edges[mod[0]] |= edges_of_file(code, mod, tops, aliases)
                for name, line, length in fn_lengths(code):
                    fns.append((length, os.path.relpath(path, root), line, name))
        cyclic = [c for c in sccs(tops, edges) if len(c) > 1]
        over100 = sorted((f for f in fns if f[0] > 100), reverse=True)
        over150 = [f for f in over100 if f[0] > 150]
        print(f"== {root}: {len(tops)} top-level modules")
        if not quiet:
            for t in sorted(tops):
                print(f"  {t} -> {', '.join(sorted(edges[t])) or '(none)'}")
        print(f"  cycles: {'; '.join(' <-> '.join(c) for c in cyclic) if cyclic else 'none'}")
        print(f"  functions over 100 lines: {len(over100)}, over 150: {len(over150)}")
        if not quiet:
            for length, path, line, name in over100:
                print(f"    {length:4} {path}:{line} {name}")
        file_cyclic = file_cycles(root)
        print(f"  file-level cycles: {len(file_cyclic)}"
              + (f" (largest: {len(file_cyclic[0])} files)" if file_cyclic else ""))
        if not quiet:
            for c in file_cyclic:
                print("    " + " <-> ".join(os.path.relpath(f, root) for f in c))
        if check and (cyclic or file_cyclic or (root.rstrip("/").endswith("engine/src") and over150)):
            failed = True
    if check and "src" in [r.rstrip("/") for r in roots] and face_report():
        failed = True
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
