#!/bin/bash
# Runs abx's tests, by stages, and ends with "N passed, N failed". Exit
# status is non-zero on any failure.
#
#   scripts/test.sh              every stage, the way CI does (make test):
#                                gcc asan fuzz-gcc layering format
#   scripts/test.sh STAGE...     only those stages, in the order given
#   scripts/test.sh check        the inner loop (make check): build-gcc
#                                unit-gcc fuzz-gcc layering, unit tests on a
#                                tmpfs TMPDIR
#
# Stages:
#   build-gcc unit-gcc fuzz-gcc integration-gcc e2b-gcc
#       the gcc build (warnings are errors), its unit tests, its corpus
#       replay (tests/fuzz/replay.c), the integration and E2B SDK suites
#       (abxd as it starts by default: split in two, docs/security.md)
#   build-asan unit-asan fuzz-asan integration-asan e2b-asan
#       the same on the clang build with ASan+UBSan and libFuzzer targets,
#       abxd in one process (ABX_TEST_PRIVSEP=0): all of its code then
#       runs under the leak check, which the split's network process goes
#       without; privsep.test.mjs still splits it
#   layering   DESIGN.md's dependency rules on the includes, and no circle
#              of calls between files (in the gcc build's libraries)
#   format     clang-format on every C file
# Groups: gcc = build-gcc unit-gcc integration-gcc e2b-gcc;
#         asan = build-asan unit-asan fuzz-asan integration-asan e2b-asan.
#
# A throwaway PostgreSQL server is started for any stage that runs unit or
# integration tests (the store and workspace tests use it; a missing server
# is a failure), unless ABX_TEST_PG_URL already names one.
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
# tests/e2b: the real E2B SDK) against a build, jobs files at once (2 unless
# given; ABX_TEST_CONCURRENCY overrides both).
node_suite() {
    local bindir=$1 label=$2 dir=${3:-tests/integration} jobs=${4:-2}
    node_run "$bindir" "$label" "$jobs" "$dir"/
}

# node's test runner on targets (directories or files) against a build,
# jobs at once, counted into PASS and FAIL.
node_run() {
    local bindir=$1 label=$2 jobs=$3
    shift 3
    local log="$LOGDIR/$label.log"
    # workspaces-faults.test.mjs kills abxd 10 times by default; the full
    # run keeps its 50.
    ABX_FAULT_RUNS=${ABX_FAULT_RUNS:-50} ABX_BIN_DIR="$bindir" \
        node --test --test-concurrency="${ABX_TEST_CONCURRENCY:-$jobs}" "$@" >"$log" 2>&1
    local rc=$?
    local p f c
    p=$(grep -E '^# pass ' "$log" | awk '{print $3}')
    f=$(grep -E '^# fail ' "$log" | awk '{print $3}')
    # A failed hook cancels its tests: they count as failed, and a run
    # that failed without naming a test counts as one.
    c=$(grep -E '^# cancelled ' "$log" | awk '{print $3}')
    f=$((${f:-0} + ${c:-0}))
    [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
    PASS=$((PASS + ${p:-0}))
    if [ "$f" -ne 0 ]; then
        FAIL=$((FAIL + f))
        FAILED+=("$label")
        grep -E '^ *not ok' "$log" | sed 's/^/  /'
    fi
    printf '%s: %s passed, %s failed (log: %s)\n' "$label" "${p:-0}" "$f" "$log"
}


# The PostgreSQL server, started at most once and stopped on exit. A start
# in the background (pg_start_async) overlaps the build; pg_wait collects it.
PGDIR=
PGPID=
PG_DONE=
PG_TMPROOT=/tmp
pg_start_async() {
    if [ -n "${ABX_TEST_PG_URL:-}" ] || [ -n "$PGDIR" ]; then
        return
    fi
    PGDIR=$(mktemp -d "$PG_TMPROOT/abx-test-pg.XXXXXX")
    scripts/pg.sh start "$PGDIR" >"$LOGDIR/pg.url" 2>"$LOGDIR/pg.log" &
    PGPID=$!
}
pg_wait() {
    # The store suite runs against SQLite and this server; ABX_TEST_PG_REQUIRED
    # makes a missing server a failure rather than a skip.
    export ABX_TEST_PG_REQUIRED=1
    if [ -n "$PG_DONE" ] || [ -n "${ABX_TEST_PG_URL:-}" ]; then
        return
    fi
    PG_DONE=1
    pg_start_async
    note "PostgreSQL (for the store and workspace tests)"
    if wait "$PGPID" && url=$(cat "$LOGDIR/pg.url") && [ -n "$url" ]; then
        export ABX_TEST_PG_URL=$url
        PASS=$((PASS + 1))
        echo "started $url"
    else
        bad "postgresql"
        cat "$LOGDIR/pg.log"
        export ABX_TEST_PG_URL=
    fi
}
# The unit tests' TMPDIR for the check group (a tmpfs: the tests make
# hundreds of thousands of files and symlinks, several times faster there
# than on this disk), removed on exit. The check group's PostgreSQL lives
# on the tmpfs too (its commits wait for no disk).
UNIT_TMP=
# and how many unit tests run at once there: twice the cores, since most of
# them wait (on deadlines, children, the database) rather than compute.
UNIT_JOBS=
cleanup() {
    if [ -n "$PGDIR" ]; then
        [ -z "$PGPID" ] || wait "$PGPID" 2>/dev/null
        scripts/pg.sh stop "$PGDIR" >/dev/null 2>&1 || true
    fi
    if [ -n "$UNIT_TMP" ]; then
        rm -rf --one-file-system "$UNIT_TMP"
    fi
}
trap cleanup EXIT

build_gcc() {
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
}

build_asan() {
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
}

asan_env() {
    export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
    export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
}

unit_tmpfs() {
    [ -n "$UNIT_TMP" ] && return
    if [ -d /dev/shm ] && [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ] &&
        UNIT_TMP=$(mktemp -d /dev/shm/abx-unit.XXXXXX); then
        chmod 1777 "$UNIT_TMP"
        PG_TMPROOT=/dev/shm
    fi
}

layering() {
    note "layering (DESIGN.md's dependency rules on the includes; calls in build/)"
    local calls=()
    [ -f build/build.ninja ] && calls=(--calls build)
    if python3 scripts/layering.py "${calls[@]}" >"$LOGDIR/layering.log" 2>&1; then
        PASS=$((PASS + 1))
    else
        bad "layering"
        sed 's/^/  /' "$LOGDIR/layering.log"
    fi
}

format() {
    note "clang-format"
    unformatted=$(git ls-files '*.c' '*.h' | while read -r f; do
        [ -f "$f" ] && ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1 && echo "$f"; done)
    if [ -z "$unformatted" ]; then
        PASS=$((PASS + 1))
    else
        bad "clang-format"
        echo "$unformatted" | sed 's/^/  not formatted: /'
    fi
}

# Runs one stage (unit-gcc on a tmpfs TMPDIR when the check group made one).
stage() {
    case $1 in
    build-gcc) build_gcc ;;
    unit-gcc)
        pg_wait
        note "unit tests (gcc${UNIT_TMP:+, TMPDIR on tmpfs}${UNIT_JOBS:+, $UNIT_JOBS at once})"
        if [ -n "$UNIT_JOBS" ]; then
            export MESON_TESTTHREADS=$UNIT_JOBS
        fi
        TMPDIR=${UNIT_TMP:-${TMPDIR:-/tmp}} meson_suite build unit unit-gcc
        ;;
    fuzz-gcc)
        note "fuzz corpus replay (gcc, tests/fuzz/replay.c)"
        meson_suite build fuzz fuzz-replay-gcc
        ;;
    integration-gcc)
        pg_wait
        note "integration tests (gcc)"
        node_suite build/src integration-gcc
        ;;
    e2b-gcc)
        pg_wait
        note "E2B SDK compatibility tests (gcc)"
        # 4 files at once: 121 s instead of 174 s here, no failure. The
        # integration suite stays at 2: at 4 its files ran slower and the
        # load-bound ones (limits, workspaces-faults) failed.
        node_suite build/src e2b-gcc tests/e2b 4
        ;;
    build-asan) build_asan ;;
    unit-asan)
        pg_wait
        asan_env
        note "unit tests (ASan+UBSan)"
        meson_suite build-asan unit unit-asan
        ;;
    fuzz-asan)
        asan_env
        note "fuzz corpus replay (ASan+UBSan)"
        meson_suite build-asan fuzz fuzz-replay
        ;;
    integration-asan)
        pg_wait
        asan_env
        note "integration tests (ASan+UBSan abxd, one process)"
        ABX_TEST_PRIVSEP=${ABX_TEST_PRIVSEP:-0} node_suite build-asan/src integration-asan
        ;;
    e2b-asan)
        pg_wait
        asan_env
        note "E2B SDK compatibility tests (ASan+UBSan abxd, one process)"
        ABX_TEST_PRIVSEP=${ABX_TEST_PRIVSEP:-0} node_suite build-asan/src e2b-asan tests/e2b
        ;;
    layering) layering ;;
    format) format ;;
    *)
        echo "test.sh: unknown stage '$1' (see the top of $0)" >&2
        exit 2
        ;;
    esac
}

# Expands the groups; refuses unknown names before anything runs.
stages=()
[ $# -eq 0 ] && set -- all
for a in "$@"; do
    case $a in
    all) stages+=(build-gcc unit-gcc fuzz-gcc integration-gcc e2b-gcc
        build-asan unit-asan fuzz-asan integration-asan e2b-asan layering format) ;;
    gcc) stages+=(build-gcc unit-gcc integration-gcc e2b-gcc) ;;
    asan) stages+=(build-asan unit-asan fuzz-asan integration-asan e2b-asan) ;;
    check)
        unit_tmpfs
        UNIT_JOBS=${MESON_TESTTHREADS:-$((2 * $(nproc)))}
        stages+=(build-gcc unit-gcc fuzz-gcc layering)
        ;;
    build-gcc | unit-gcc | fuzz-gcc | integration-gcc | e2b-gcc | build-asan | \
        unit-asan | fuzz-asan | integration-asan | e2b-asan | layering | format) stages+=("$a") ;;
    *)
        echo "test.sh: unknown stage '$a' (see the top of $0)" >&2
        exit 2
        ;;
    esac
done

# PostgreSQL starts while the first build runs when a later stage needs it.
case " ${stages[*]} " in
*" unit-"* | *" integration-"* | *" e2b-"*) pg_start_async ;;
esac

for st in "${stages[@]}"; do
    t0=$SECONDS
    stage "$st"
    printf '(%s: %d s)\n' "$st" $((SECONDS - t0))
done

echo
if [ "$FAIL" -ne 0 ]; then
    printf 'failed: %s\n' "${FAILED[*]}"
fi
echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
