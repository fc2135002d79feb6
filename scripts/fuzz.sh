#!/bin/bash
# Fuzzes with mutation (`make fuzz`): builds the libFuzzer targets with
# clang, ASan and UBSan in their own build directory, runs each target,
# merges what adds coverage into its committed corpus and keeps crashes.
#
#   FUZZ_SECONDS=60        wall seconds per target (default 60)
#   FUZZ_CPU_SECONDS=N     instead: run each target in chunks until it has
#                          had N seconds of CPU (user+system, as getrusage
#                          counts them); for campaigns on a shared machine
#   FUZZ_TARGETS="a b"     only these targets (names without fuzz-; commas
#                          or spaces); default every target
#   FUZZ_BUILD=build-fuzz  the build directory
#   FUZZ_OUT=DIR           work directory: new inputs, logs and crashes
#                          (default $FUZZ_BUILD/fuzz-out)
#   FUZZ_RECORD=FILE       append one TSV line per target: target, CPU
#                          seconds, execs, cov, ft, corpus files, findings
#   FUZZ_NO_MERGE=1        leave tests/fuzz/corpus/ alone
#
# Exits 1 when a target crashed, leaked, timed out or hit UB; the inputs
# are in $FUZZ_OUT/crashes/, printed at the end.
set -u
cd "$(dirname "$0")/.."

# scripts/fuzz.sh --table FILE: a FUZZ_RECORD file as a Markdown table,
# one row per target (CPU and executions summed over its runs, the last
# run's coverage and corpus, every finding).
if [ "${1:-}" = --table ]; then
    awk -F'\t' 'NR > 1 && $1 != "target" {
        if (!($1 in cpu)) order[n++] = $1
        cpu[$1] += $2; ex[$1] += $3; cov[$1] = $4; ft[$1] = $5; corp[$1] = $6
        if ($7 != "-") find[$1] = find[$1] (find[$1] ? "; " : "") $7
    } END {
        print "| target | CPU min | executions | cov | ft | corpus files | findings |"
        print "| --- | ---: | ---: | ---: | ---: | ---: | --- |"
        for (i = 0; i < n; i++) {
            t = order[i]
            printf "| `fuzz-%s` | %.1f | %.2f M | %s | %s | %s | %s |\n", t, cpu[t] / 60,
                ex[t] / 1e6, cov[t], ft[t], corp[t], find[t] ? find[t] : "none"
        }
    }' "$2"
    exit
fi

SECONDS_EACH=${FUZZ_SECONDS:-60}
CPU_GOAL=${FUZZ_CPU_SECONDS:-}
BUILD=${FUZZ_BUILD:-build-fuzz}
OUT=${FUZZ_OUT:-$BUILD/fuzz-out}
RECORD=${FUZZ_RECORD:-}
CORPORA=tests/fuzz/corpus

# Largest input per target: enough for every shape the parser knows (a
# path over PATH_MAX, a few tar blocks, a gzip member with a header), small
# enough that the corpus stays small and each run stays fast.
max_len() {
    case $1 in
    parse | names | proto-event | rfc3339) echo 256 ;;
    b64 | command | resolve | e2b) echo 1024 ;;
    connect | sudo-msg | tool-manifest | keys | tool-select) echo 2048 ;;
    path | tar | fileops) echo 8192 ;;
    priv) echo 17408 ;;
    *) echo 4096 ;;
    esac
}

mkdir -p "$OUT/crashes" "$OUT/logs" || exit 1
OUT=$(cd "$OUT" && pwd)

# Two campaign runners may start at once: one builds, the other waits.
(
    flock 9
    if [ ! -f "$BUILD/build.ninja" ]; then
        CC=clang meson setup "$BUILD" --buildtype=debug -Dwerror=true \
            -Db_sanitize=address,undefined -Db_lundef=false -Dfuzz=true >"$OUT/logs/setup.log" 2>&1 ||
            { cat "$OUT/logs/setup.log"; exit 1; }
    fi
    # Regenerate first: a target added to meson.build since the last run is
    # not in the old build.ninja that -t targets reads.
    ninja -C "$BUILD" build.ninja >"$OUT/logs/regen.log" 2>&1 || { cat "$OUT/logs/regen.log"; exit 1; }
    all=$(ninja -C "$BUILD" -t targets all | grep -o '^tests/fuzz/fuzz-[a-z0-9-]*:' | tr -d : | sort -u)
    ninja -C "$BUILD" $all >"$OUT/logs/build.log" 2>&1 || { tail -30 "$OUT/logs/build.log"; exit 1; }
) 9>"$OUT/.build-lock" || exit 1

if [ -n "${FUZZ_TARGETS:-}" ]; then
    TARGETS=$(echo "$FUZZ_TARGETS" | tr ',' ' ')
else
    TARGETS=$(cd "$BUILD/tests/fuzz" && ls fuzz-* | grep -v '\.p$' | sed 's/^fuzz-//')
fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

FAILED=()

# Runs target $1 once for $2 wall seconds over its work and committed
# corpus; adds its CPU seconds to CPU and its executions to EXECS, sets
# COV/FT from its last status line. Returns libFuzzer's exit status.
chunk() {
    local t=$1 secs=$2 log=$OUT/logs/$1.log
    local bin=$BUILD/tests/fuzz/fuzz-$1
    /usr/bin/time -f '%U %S' -o "$OUT/logs/$t.time" \
        "$bin" -max_total_time="$secs" -max_len="$(max_len "$t")" -timeout=10 \
        -print_final_stats=1 -error_exitcode=1 -timeout_exitcode=1 \
        -artifact_prefix="$OUT/crashes/$t-" "$OUT/work/$t" "$CORPORA/$t" >"$log" 2>&1
    local rc=$?
    cat "$log" >>"$OUT/logs/$t.all.log"
    local u s
    read -r u s < <(tail -1 "$OUT/logs/$t.time")
    CPU=$(echo "$CPU + ${u:-0} + ${s:-0}" | bc)
    echo "$(date -u +%FT%TZ) $secs s wall: ${u:-0} user + ${s:-0} sys, $CPU CPU s so far" \
        >>"$OUT/logs/$t.cpu"
    local n
    n=$(grep -E '^stat::number_of_executed_units:' "$log" | awk '{print $2}')
    EXECS=$((EXECS + ${n:-0}))
    local last
    last=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -1)
    if [ -n "$last" ]; then
        COV=$(echo "$last" | sed -n 's/.* cov: \([0-9]*\).*/\1/p')
        FT=$(echo "$last" | sed -n 's/.* ft: \([0-9]*\).*/\1/p')
    fi
    return $rc
}

for t in $TARGETS; do
    if [ ! -x "$BUILD/tests/fuzz/fuzz-$t" ]; then
        echo "fuzz: no target fuzz-$t in $BUILD" >&2
        FAILED+=("$t")
        continue
    fi
    mkdir -p "$OUT/work/$t" "$CORPORA/$t"
    rm -f "$OUT/logs/$t.all.log"
    CPU=0 EXECS=0 COV=? FT=? finding=-
    if [ -n "$CPU_GOAL" ]; then
        # Chunks of at most 10 minutes, each as long as the CPU still
        # owed (a process that gets half a core needs two).
        while [ "$(echo "$CPU < $CPU_GOAL" | bc)" = 1 ]; do
            left=$(echo "($CPU_GOAL - $CPU + 0.999) / 1" | bc)
            [ "$left" -gt 600 ] && left=600
            [ "$left" -lt 20 ] && left=20
            chunk "$t" "$left" || { finding=crash; break; }
        done
    else
        chunk "$t" "$SECONDS_EACH" || finding=crash
    fi
    if [ "$finding" != - ]; then
        FAILED+=("$t")
        what=$(grep -m1 -oE 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer): [a-z-]+|runtime error: .*|invariant broken: .*' "$OUT/logs/$t.log")
        finding=${what:-crash}
        echo "fuzz-$t: $finding (log: $OUT/logs/$t.log)"
    fi
    if [ -z "${FUZZ_NO_MERGE:-}" ]; then
        # Only what adds edges to the committed corpus goes into it (hit
        # counts aside, and a small set covering them), so it stays small.
        before=$(ls "$CORPORA/$t" | wc -l)
        "$BUILD/tests/fuzz/fuzz-$t" -set_cover_merge=1 -use_counters=0 \
            -max_len="$(max_len "$t")" -timeout=10 \
            "$CORPORA/$t" "$OUT/work/$t" >"$OUT/logs/$t.merge.log" 2>&1 ||
            echo "fuzz-$t: merge failed (log: $OUT/logs/$t.merge.log)"
        added=$(($(ls "$CORPORA/$t" | wc -l) - before))
    else
        added=0
    fi
    files=$(ls "$CORPORA/$t" | wc -l)
    printf 'fuzz-%s: %.0f CPU s, %s execs, cov %s ft %s, corpus %s (+%s)\n' \
        "$t" "$CPU" "$EXECS" "$COV" "$FT" "$files" "$added"
    if [ -n "$RECORD" ]; then
        printf '%s\t%.0f\t%s\t%s\t%s\t%s\t%s\n' "$t" "$CPU" "$EXECS" "$COV" "$FT" "$files" \
            "$finding" >>"$RECORD"
    fi
done

if [ ${#FAILED[@]} -ne 0 ]; then
    echo "fuzz: findings in: ${FAILED[*]}; inputs in $OUT/crashes/"
    exit 1
fi
echo "fuzz: no findings; crashes would be in $OUT/crashes/"
