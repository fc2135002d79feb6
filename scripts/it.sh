#!/bin/bash
# it.sh - one integration (or E2B) test file against the gcc build, for the
# inner loop: no ASan build, no deps step, no PostgreSQL of its own (export
# ABX_TEST_PG_URL to include the PostgreSQL cases). `make it T=...` calls it.
#
#   scripts/it.sh wire              tests/integration/wire.test.mjs
#   scripts/it.sh e2b/files         tests/e2b/files.test.mjs
#   scripts/it.sh tests/e2b/pty.test.mjs
#   scripts/it.sh                   the whole integration suite
#   scripts/it.sh e2b               the whole E2B suite
#   scripts/it.sh wire --test-name-pattern=upload    (the rest goes to node)
#
# ABX_TEST_CONCURRENCY sets node's --test-concurrency (files at once; 2);
# BUILD names the build directory (build).
set -eu
cd "$(dirname "$0")/.."

t=${1:-integration}
[ $# -gt 0 ] && shift
case $t in
integration | e2b) target=tests/$t/ ;;
*.mjs) target=$t ;;
e2b/*) target=tests/$t.test.mjs ;;
*) target=tests/integration/$t.test.mjs ;;
esac
if [ ! -e "$target" ]; then
    echo "it.sh: no test file $target (try: wire, e2b/files, a path)" >&2
    exit 2
fi
case $target in
tests/e2b*)
    if [ ! -d tests/e2b/node_modules ]; then
        echo "it.sh: tests/e2b needs the E2B SDK: make deps (npm ci in tests/e2b)" >&2
        exit 2
    fi
    ;;
esac

b=${BUILD:-build}
if [ ! -f "$b/build.ninja" ]; then
    meson setup "$b" --buildtype=debugoptimized -Dwerror=true
fi
ninja -C "$b"
exec env ABX_BIN_DIR="$PWD/$b/src" node --test \
    --test-concurrency="${ABX_TEST_CONCURRENCY:-2}" "$@" "$target"
