#!/bin/bash
# Runs every test abx has, the way CI does:
#   1. gcc build (warnings are errors), unit tests, integration tests
#   2. clang build with ASan+UBSan, unit tests, integration tests, fuzz
#      corpus replay
#   3. clang-format check
# and ends with "N passed, N failed". Exit status is non-zero on any failure.
set -u
cd "$(dirname "$0")/.."

PASS=0
FAIL=0
FAILED=()
LOGDIR=${ABX_TEST_LOGS:-build/test-logs}
mkdir -p "$LOGDIR"

note() { printf '\n==> %s\n' "$*"; }
bad() { FAIL=$((FAIL + 1)); FAILED+=("$1"); printf 'FAIL: %s\n' "$1"; }

# Counts "ok"/"fail" from meson's summary.
meson_suite() {
    local dir=$1 suite=$2 label=$3
    local log="$LOGDIR/$label.log"
    meson test -C "$dir" --suite "$suite" --print-errorlogs >"$log" 2>&1
    local rc=$?
    local ok fail skip
    ok=$(grep -E '^Ok:' "$log" | awk '{print $2}')
    fail=$(grep -E '^Fail:' "$log" | awk '{print $2}')
    skip=$(grep -E '^Skipped:' "$log" | awk '{print $2}')
    PASS=$((PASS + ${ok:-0}))
    if [ "$rc" -ne 0 ] || [ "${fail:-0}" -ne 0 ]; then
        FAIL=$((FAIL + ${fail:-1}))
        FAILED+=("$label")
        grep -E '^ *[0-9]+/[0-9]+ .*(FAIL|ERROR|TIMEOUT)' "$log" | sed 's/^/  /'
    fi
    printf '%s: %s passed, %s failed, %s skipped (log: %s)\n' "$label" "${ok:-0}" "${fail:-0}" "${skip:-0}" "$log"
}

# Runs node's test runner on a suite (tests/integration by default, or
# tests/e2b: the real E2B SDK) against a build.
node_suite() {
    local bindir=$1 label=$2 dir=${3:-tests/integration}
    local log="$LOGDIR/$label.log"
    ABX_BIN_DIR="$bindir" node --test --test-concurrency=2 "$dir"/ >"$log" 2>&1
    local rc=$?
    local p f
    p=$(grep -E '^# pass ' "$log" | awk '{print $3}')
    f=$(grep -E '^# fail ' "$log" | awk '{print $3}')
    PASS=$((PASS + ${p:-0}))
    if [ "$rc" -ne 0 ] || [ "${f:-0}" -ne 0 ]; then
        FAIL=$((FAIL + ${f:-1}))
        FAILED+=("$label")
        grep -E '^ *not ok' "$log" | sed 's/^/  /'
    fi
    printf '%s: %s passed, %s failed (log: %s)\n' "$label" "${p:-0}" "${f:-0}" "$log"
}

note "PostgreSQL (for the store and workspace tests)"
# The store suite runs against SQLite and this server; ABX_TEST_PG_REQUIRED
# makes a missing server a failure rather than a skip.
PGDIR=$(mktemp -d /tmp/abx-test-pg.XXXXXX)
export ABX_TEST_PG_REQUIRED=1
if url=$(scripts/pg.sh start "$PGDIR" 2>"$LOGDIR/pg.log"); then
    export ABX_TEST_PG_URL=$url
    PASS=$((PASS + 1))
    echo "started $url"
else
    bad "postgresql"
    cat "$LOGDIR/pg.log"
fi
trap 'scripts/pg.sh stop "$PGDIR" >/dev/null 2>&1 || true' EXIT

note "build (gcc, -Werror)"
if [ ! -f build/build.ninja ]; then
    meson setup build --buildtype=debugoptimized -Dwerror=true || exit 1
fi
if ninja -C build >"$LOGDIR/build-gcc.log" 2>&1; then
    PASS=$((PASS + 1))
else
    bad "build (gcc)"
    tail -30 "$LOGDIR/build-gcc.log"
fi

note "unit tests (gcc)"
meson_suite build unit unit-gcc

note "integration tests (gcc)"
node_suite build/src integration-gcc

note "E2B SDK compatibility tests (gcc)"
node_suite build/src e2b-gcc tests/e2b

note "build (clang, ASan+UBSan, fuzz targets)"
if [ ! -f build-asan/build.ninja ]; then
    CC=clang meson setup build-asan --buildtype=debug -Dwerror=true \
        -Db_sanitize=address,undefined -Db_lundef=false -Dfuzz=true || exit 1
fi
if ninja -C build-asan >"$LOGDIR/build-asan.log" 2>&1; then
    PASS=$((PASS + 1))
else
    bad "build (clang asan)"
    tail -30 "$LOGDIR/build-asan.log"
fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

note "unit tests (ASan+UBSan)"
meson_suite build-asan unit unit-asan

note "fuzz corpus replay (ASan+UBSan)"
meson_suite build-asan fuzz fuzz-replay

note "integration tests (ASan+UBSan abxd)"
node_suite build-asan/src integration-asan

note "E2B SDK compatibility tests (ASan+UBSan abxd)"
node_suite build-asan/src e2b-asan tests/e2b

note "layering (DESIGN.md's dependency rules on the includes)"
if python3 scripts/layering.py >"$LOGDIR/layering.log" 2>&1; then
    PASS=$((PASS + 1))
else
    bad "layering"
    sed 's/^/  /' "$LOGDIR/layering.log"
fi

note "clang-format"
unformatted=$(git ls-files '*.c' '*.h' | while read -r f; do
    [ -f "$f" ] && ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1 && echo "$f"; done)
if [ -z "$unformatted" ]; then
    PASS=$((PASS + 1))
else
    bad "clang-format"
    echo "$unformatted" | sed 's/^/  not formatted: /'
fi

echo
if [ "$FAIL" -ne 0 ]; then
    printf 'failed: %s\n' "${FAILED[*]}"
fi
echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
