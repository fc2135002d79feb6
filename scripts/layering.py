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

Run from the top of the checkout (make check and make test do).
"""
import os
import re
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
    # The privileged parent and its client (privilege separation): on jail
    # only; nothing uses it yet.
    'priv': ['jail', 'util'],
    'sandbox': ['jail', 'util'],
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


def main():
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
    for b in bad:
        print(b)
    if bad:
        print(f'layering: {len(bad)} violation(s)', file=sys.stderr)
        return 1
    print('layering: ok')
    return 0


if __name__ == '__main__':
    sys.exit(main())
