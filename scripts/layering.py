#!/usr/bin/env python3
"""layering.py - the dependency rules of DESIGN.md, checked on the includes.

Every project include is written "piece/header.h" (relative to src/, or
"abx/..." for the public headers in include/). A file of piece P may
include headers of P and of the pieces below P, as BELOW says - nothing
else, and headers ONLY names only from the pieces it names. A piece's
*-internal.h is for its own files only. Files of the sub-
pieces of a piece (src/P/<sub>/...) may not include each other in a
circle, and where SUB_BELOW orders them (api: core <- wire, e2b, ports
<- router), a sub-piece includes only those below it. Prints every violation as file:line and exits 1 if there is one.

With --calls BUILD it also reads the static libraries of a build (nm)
and checks the calls: which file calls a function another file defines.
No files may call each other in a circle (CALL_CYCLE_MAX files are
allowed in one, and never across folders): a file that both dispatches to
others and serves them helpers is the usual cause; move the helpers below
it. And the privileged parent's code, followed through the libraries as a
static link would, reaches no parser of hostile input (PARENT_*).

Run from the top of the checkout (make check and make test do).
"""
import glob
import os
import re
import subprocess
import sys

# piece -> the pieces it may use directly (closure taken below). The
# order is DESIGN.md's: util <- http, jail, store <- sandbox, sync <-
# workspace, tools, template <- api <- abxd; client <- cli. template uses
# sandbox (start/ready commands run in one).
BELOW = {
    'util': [],
    'http': ['util'],
    'jail': ['util'],
    'store': ['util'],
    'net': ['util'],
    'image': ['util'],
    # Privilege separation: the parent and its client, the network
    # process's confinement; on jail only. The local sandbox reaches the
    # parent through the client (sandbox/jailer-priv.c).
    'priv': ['jail', 'util'],
    'sandbox': ['priv', 'jail', 'util'],
    'snapshot': ['sandbox'],
    'sync': ['sandbox', 'store'],
    'workspace': ['sync', 'sandbox', 'store'],
    'tools': ['util', 'abx'],
    'toolkit': ['tools', 'util', 'abx'],
    'template': ['sandbox', 'util'],
    'cluster': ['sandbox', 'store'],
    'api': ['workspace', 'sync', 'sandbox', 'snapshot', 'store', 'http', 'tools',
            'template', 'net', 'image', 'cluster'],
    'abxd': ['api'],
    'client': ['util', 'abx'],
    # The CLI validates templates and builds tool bundles offline: it uses
    # those pieces' parsers as a documented exception (docs/architecture.md).
    # It links template's parser library only (abx-template), never the
    # part that runs in sandboxes (abx-template-run), so no jail code.
    'cli': ['client', 'template', 'tools', 'toolkit'],
    'abx': [],
}

# Headers only some pieces may include, whatever lies below them: the jail
# is the local sandbox's business, so above sandbox/ nothing names a jail
# type - except abxd, the composition root, which makes the jail host and
# hands it to sandbox_host_new() (sandbox/sandbox-local.h).
ONLY = {
    'jail/': {'jail', 'priv', 'sandbox', 'abxd'},
    'sandbox/sandbox-local.h': {'sandbox', 'abxd'},
}


# Inside a piece: sub-piece -> the sub-pieces it may include (closure() taken
# on it). A sub-piece is a folder src/P/<sub>/. A file directly in src/P
# belongs to TOP[P] (its headers, to BASE[P]: what every sub-piece may
# include, so they may include only what BASE may). DESIGN.md: inside api,
# core <- wire, e2b, ports <- router.
SUB_BELOW = {
    'api': {
        'core': [],
        'wire': ['core'],
        'e2b': ['core'],
        'ports': ['core'],
        'router': ['wire', 'e2b', 'ports', 'core'],
    },
}
TOP = {'api': 'router'}

# Headers a piece may not include although they lie below it: the
# privileged parent runs as host root and parses no client bytes, so
# priv/ names no JSON or tar code of util (and nothing of http or template,
# which BELOW already keeps out).
FORBID = {
    'priv': ['util/json.h', 'util/tar.h'],
}
BASE = {'api': 'core'}


def sub_of(piece, rel):
    """The sub-piece of a file (rel: its path under src/, split)."""
    if len(rel) > 2:
        return rel[1]
    if rel[-1].endswith('.h') and piece in BASE:
        return BASE[piece]
    return TOP.get(piece)


def sub_of_include(piece, parts):
    """The sub-piece of an included header ("P/..." split)."""
    if len(parts) > 2:
        return parts[1]
    return BASE.get(piece)


def closure(below=BELOW):
    """What each key of below may use, directly or through others."""
    out = {}
    for p in below:
        seen, todo = set(), list(below[p])
        while todo:
            q = todo.pop()
            if q in seen:
                continue
            seen.add(q)
            todo += below.get(q, [])
        out[p] = seen
    return out


INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


CALL_CYCLE_MAX = 1  # files in one circle of calls: none (there are none)


def lib_cycles(lib):
    """The circles of calls between the objects of one static library."""
    defs, uses = {}, {}
    out = subprocess.run(['nm', '-A', lib], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        f = line.split()
        if not f or f[0].count(':') < 2:
            continue
        # meson names an object <dirs joined by _>_<file>.c.o
        obj = os.path.basename(f[0].split(':')[1])
        if len(f) >= 3 and f[-2] in 'TDBR':
            defs[f[-1]] = obj
        elif len(f) >= 2 and f[-2] == 'U':
            uses.setdefault(obj, set()).add(f[-1])
    graph = {k: {defs[x] for x in v if x in defs and defs[x] != k} for k, v in uses.items()}
    index, low, stack, on, comps = {}, {}, [], set(), []

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
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
            if len(comp) > 1:
                comps.append(sorted(c[:-len('.c.o')] if c.endswith('.c.o') else c for c in comp))

    for v in list(graph):
        if v not in index:
            visit(v)
    return comps


# The privileged parent (privilege separation) links no parser of hostile
# input: no HTTP, JSON, YAML, tar, gzip, DNS, SQL, curl. What its code
# reaches, as a static link would pull it in from these libraries starting
# at its own files, must define and call none of that.
PARENT_LIBS = ['libabx-abxd-host.a', 'libabx-priv.a', 'libabx-jail.a', 'libabx-net-host.a',
               'libabx-sandbox.a', 'libabx-util.a']
PARENT_ROOTS = ['abxd_host.c.o', 'abxd_split.c.o', 'abxd_config.c.o',
                'priv_parent.c.o', 'priv_proto.c.o', 'sandbox_fileops-helper.c.o',
                'net_link.c.o', 'net_nft.c.o', 'net_pool.c.o']
PARENT_FORBID_OBJECTS = ['util_json.c.o', 'util_tar.c.o']
PARENT_FORBID_SYMBOLS = ('json_', 'MHD_', 'yaml_', 'inflate', 'deflate', 'gz', 'ldns_', 'curl_',
                         'PQ', 'sqlite3_', 'archive_', 'XML_')


def lib_symbols(lib):
    """{object: (defined symbols, undefined symbols)} of one static library."""
    out = subprocess.run(['nm', '-A', lib], capture_output=True, text=True, check=True).stdout
    objs = {}
    for line in out.splitlines():
        f = line.split()
        if not f or f[0].count(':') < 2:
            continue
        obj = os.path.basename(f[0].split(':')[1])
        d, u = objs.setdefault(obj, (set(), set()))
        if len(f) >= 3 and f[-2] in 'TDBRVW':
            d.add(f[-1])
        elif len(f) >= 2 and f[-2] == 'U':
            u.add(f[-1])
    return objs


def parent_parsers(build):
    """What the parent's code would link that parses hostile input."""
    objs, lib_of = {}, {}
    for name in PARENT_LIBS:
        lib = os.path.join(build, 'src', name)
        if not os.path.exists(lib):
            return [f'{lib}: missing (build first)']
    # The parent's libraries first (libabx.a repeats util's objects), then
    # every other of ours, so that a call into one that is not the
    # parent's is seen too, not taken for a system library's.
    libs = [os.path.join(build, 'src', n) for n in PARENT_LIBS]
    libs += sorted(set(glob.glob(os.path.join(build, 'src', '**', 'libabx*.a'), recursive=True)) -
                   set(libs))
    for lib in libs:
        for obj, syms in lib_symbols(lib).items():
            if obj not in objs:
                objs[obj] = syms
                lib_of[obj] = os.path.basename(lib)
    where = {}
    for obj, (d, _) in objs.items():
        for sym in d:
            where.setdefault(sym, obj)
    bad, seen, todo = [], set(), [r for r in PARENT_ROOTS if r in objs]
    if len(todo) != len(PARENT_ROOTS):
        missing = sorted(set(PARENT_ROOTS) - set(objs))
        return [f'the parent\'s files are not in {", ".join(PARENT_LIBS)}: {", ".join(missing)}']
    while todo:
        obj = todo.pop()
        if obj in seen:
            continue
        seen.add(obj)
        if lib_of[obj] not in PARENT_LIBS:
            bad.append(f'parent: its code reaches {obj} of {lib_of[obj]}, not one of the '
                       f'parent\'s libraries')
            continue
        for sym in sorted(objs[obj][1]):
            if sym in where:
                todo.append(where[sym])
            elif sym.startswith(PARENT_FORBID_SYMBOLS):
                bad.append(f'parent: {obj} calls {sym} (a parser library)')
    for obj in sorted(seen & set(PARENT_FORBID_OBJECTS)):
        bad.append(f'parent: its code reaches {obj} (a parser)')
    return bad


def call_cycles(build):
    """Violations of the call rule in the static libraries under build/src."""
    libs = sorted(glob.glob(os.path.join(build, 'src', '**', 'libabx*.a'), recursive=True))
    if not libs:
        return [f'{build}: no libraries to read (build first)']
    sys.setrecursionlimit(10000)
    bad = []
    for lib in libs:
        for names in lib_cycles(lib):
            folders = {n.rsplit('_', 1)[0] if '_' in n else '' for n in names}
            if len(names) > CALL_CYCLE_MAX or len(folders) > 1:
                bad.append(f'{lib}: {len(names)} files call each other in a circle: '
                           f'{", ".join(names)}')
    return bad


def main():
    calls = None
    if len(sys.argv) == 3 and sys.argv[1] == '--calls':
        calls = sys.argv[2]
    elif len(sys.argv) != 1:
        print('usage: layering.py [--calls BUILD]', file=sys.stderr)
        return 2
    allowed = closure()
    sub_allowed = {p: closure(SUB_BELOW[p]) for p in SUB_BELOW}
    bad = []
    subedges = {}
    for dp, _, files in os.walk('src'):
        for f in sorted(files):
            if not f.endswith(('.c', '.h')):
                continue
            path = os.path.join(dp, f)
            rel = os.path.relpath(path, 'src').split(os.sep)
            piece = rel[0]
            text = open(path, encoding='utf-8', errors='replace').read()
            for m in INCLUDE.finditer(text):
                inc = m.group(1)
                line = text.count('\n', 0, m.start()) + 1
                where = f'{path}:{line}'
                parts = inc.split('/')
                if len(parts) < 2:
                    bad.append(f'{where}: "{inc}": write includes as "piece/header.h"')
                    continue
                q = parts[0]
                if q not in BELOW:
                    bad.append(f'{where}: "{inc}": no piece {q!r}')
                    continue
                if q != piece and q not in allowed.get(piece, set()):
                    bad.append(f'{where}: "{inc}": {piece} may not use {q} (not below it)')
                if inc in FORBID.get(piece, []):
                    bad.append(f'{where}: "{inc}": {piece} may not use it (no parser there)')
                for prefix, who in ONLY.items():
                    if inc.startswith(prefix) and piece not in who:
                        bad.append(f'{where}: "{inc}": only {", ".join(sorted(who))} may '
                                   f'include it')
                if q != piece and parts[-1].endswith('-internal.h'):
                    bad.append(f'{where}: "{inc}": {q}\'s internal header, outside {q}')
                # sub-pieces: src/P/<sub>/file including src/P/<other>/...
                if q == piece and len(rel) > 2 and len(parts) > 2 and parts[1] != rel[1]:
                    subedges.setdefault((piece, rel[1]), set()).add(parts[1])
                # the order of a piece's sub-pieces
                if q == piece and piece in SUB_BELOW:
                    s, t = sub_of(piece, rel), sub_of_include(piece, parts)
                    if s not in SUB_BELOW[piece] or t not in SUB_BELOW[piece]:
                        bad.append(f'{where}: "{inc}": {piece} has no sub-piece '
                                   f'{s if s not in SUB_BELOW[piece] else t!r}')
                    elif s != t and t not in sub_allowed[piece][s]:
                        bad.append(f'{where}: "{inc}": {piece}/{s} may not use {piece}/{t} '
                                   f'(not below it)')
    # circles between sub-pieces of one piece
    for (piece, sub), outs in subedges.items():
        for o in outs:
            if sub in subedges.get((piece, o), set()):
                if sub < o:
                    bad.append(f'src/{piece}: sub-pieces {sub} and {o} include each other')
    if calls:
        bad += call_cycles(calls)
        bad += parent_parsers(calls)
    for b in bad:
        print(b)
    if bad:
        print(f'layering: {len(bad)} violation(s)', file=sys.stderr)
        return 1
    print('layering: ok')
    return 0


if __name__ == '__main__':
    sys.exit(main())
