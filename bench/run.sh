#!/usr/bin/env bash
# bench/run.sh - `make bench`: every abx benchmark in one run, side by side.
#
# Builds the two C tools (bench/spawn-bench.c: fork+exec+wait baselines;
# bench/abx-bench.c: abxd driven through libabx) against build/, starts its
# own abxd (bin/abxd) on a free loopback port with a temporary state
# directory and a generated ABX_API_KEY (of E2B's shape, e2b_ + 40 hex, which
# the E2B SDK checks before sending), runs the measurements (the
# workspace ones through bench/ws-bench.sh, which uses curl; the E2B SDK
# ones through bench/e2b-bench.mjs, which uses node), prints the
# table and writes it into docs/performance.md between the BEGIN/END
# markers. Whatever happens (failure, Ctrl-C, SIGTERM) it stops its abxd with
# SIGTERM and removes its temporary directory and abxd's (empty) instance
# cgroups. The tools land in build/bench/. Figures only: nothing here
# passes or fails on a threshold; the exit status says whether every
# measurement ran.
#
# Must run as root (namespaces, cgroups, drop_caches). Knobs, for quick
# trials (the documented figures use the defaults):
#   BENCH_EXEC_N (2000) BENCH_WARMUP (200) BENCH_LIFECYCLE_N (200)
#   BENCH_LIVE (500) BENCH_THREADS (16) BENCH_SECONDS (10) BENCH_BIG_MIB (1024)
#   BENCH_SETTLE_S (10) BENCH_WS_FILES (10000) BENCH_WS_REPS (5)
#   BENCH_WS_WAKE_MIB (100) BENCH_TOOLS_RUNS (10) BENCH_E2B_N (200) BENCH_E2B_WARMUP (20)
#   BENCH_DISK_AREAS (1000) BENCH_DISK_ROUNDS (200)
#   BENCH_DOC (docs/performance.md; "-" = do not write)
#   BENCH_TMPDIR (/var/tmp: the files and the state directory share its disk)
#   BENCH_QUICK=1 (small counts everywhere; does not write the document)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

BUILD=${BUILD:-build}
CC=${CC:-cc}
if [ "${BENCH_QUICK:-0}" = 1 ]; then
    : "${BENCH_EXEC_N:=200}" "${BENCH_WARMUP:=20}" "${BENCH_LIFECYCLE_N:=20}" "${BENCH_LIVE:=50}"
    : "${BENCH_SECONDS:=3}" "${BENCH_BIG_MIB:=128}" "${BENCH_SETTLE_S:=2}" "${BENCH_DOC:=-}"
    : "${BENCH_E2B_N:=30}" "${BENCH_E2B_WARMUP:=5}" "${BENCH_DISK_AREAS:=100}" "${BENCH_DISK_ROUNDS:=20}"
fi
N_EXEC=${BENCH_EXEC_N:-2000}
WARMUP=${BENCH_WARMUP:-200}
N_LIFE=${BENCH_LIFECYCLE_N:-200}
N_LIVE=${BENCH_LIVE:-500}
THREADS=${BENCH_THREADS:-16}
SECONDS_TP=${BENCH_SECONDS:-10}
BIG_MIB=${BENCH_BIG_MIB:-1024}
SMALL_MIB=64
SETTLE_S=${BENCH_SETTLE_S:-10}
DOC=${BENCH_DOC:-docs/performance.md}
LIFE_WARMUP=10
BWRAP_ARGS=(--unshare-all --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib
    --symlink usr/lib64 /lib64 --proc /proc --dev /dev /bin/true)

say() { printf 'bench: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

[ "$(id -u)" -eq 0 ] || die "must run as root (abxd needs namespaces and cgroups; drop_caches needs root)"
[ -x bin/abxd ] || die "bin/abxd is missing: run 'make' first"
LIBABX=$BUILD/src/client/libabx.a
[ -f "$LIBABX" ] || die "$LIBABX is missing: run 'make' first"

WORK=$(mktemp -d "${BENCH_TMPDIR:-/var/tmp}/abx-bench.XXXXXX")
# abxd splits in two by default: its network process's uid must reach the
# state directory inside $WORK.
chmod 0711 "$WORK"
STATE=$WORK/state
RESULTS=$WORK/results
COMMANDS=$WORK/commands
: >"$RESULTS"
: >"$COMMANDS"
ABXD_PID=
INSTANCE_CGROUPS=
PORT=
URL=
FAILED=0
# E2B's key shape: the E2B SDK (section 8c) refuses any other before sending.
KEY=e2b_$(od -An -N20 -tx1 /dev/urandom | tr -d ' \n')
export ABX_API_KEY=$KEY

# --- cleanup: stop our abxd, remove what we made ---

stop_abxd() {
    [ -n "$ABXD_PID" ] || return 0
    local pid=$ABXD_PID i
    ABXD_PID=
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 600; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        say "abxd (pid $pid) did not stop within 60 s of SIGTERM; killing it"
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        # A new abxd on the same state directory reclaims what the old one
        # left (cgroups, directories); then it stops cleanly.
        ABX_POOL=0 bin/abxd --listen 127.0.0.1:0 --state-dir "$STATE" >>"$WORK/abxd-reclaim.log" 2>&1 &
        pid=$!
        sleep 3
        kill -TERM "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
}

# abxd keeps one instance cgroup per controller (<hierarchy>/abx-<hash of
# the state directory>) and leaves it when it exits; ours are empty by now.
remove_instance_cgroups() {
    local d
    for d in $INSTANCE_CGROUPS; do
        rmdir "$d" 2>/dev/null || true
    done
    INSTANCE_CGROUPS=
}

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    stop_abxd
    remove_instance_cgroups
    # The sandboxes' disks (abxd's, disk-bench's), if something did not
    # unmount them; their loop devices go with the mount.
    umount -l "$STATE/sandboxes" 2>/dev/null || true
    umount -l "$WORK/disk/sandboxes" 2>/dev/null || true
    if [ "$rc" -ne 0 ] && [ -f "$WORK/abxd.log" ]; then
        say "abxd's log (last lines):"
        tail -n 20 "$WORK/abxd.log" >&2 || true
    fi
    rm -rf --one-file-system "$WORK"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- build the tools ---

CFLAGS_BENCH=(-std=gnu17 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Wpedantic -Werror -Wshadow
    -Wformat=2 -Wstrict-prototypes -Wmissing-prototypes -Wmissing-declarations -Wpointer-arith
    -Wcast-qual -Wvla -Wimplicit-fallthrough -Wundef -Wnull-dereference
    -Wno-missing-field-initializers -fstack-protector-strong -D_FORTIFY_SOURCE=2)
if "$CC" --version 2>/dev/null | grep -qi gcc; then
    CFLAGS_BENCH+=(-Wjump-misses-init -Wduplicated-cond -Wlogical-op)
fi
TOOLS=$BUILD/bench
mkdir -p "$TOOLS"
say "building $TOOLS/spawn-bench and $TOOLS/abx-bench"
"$CC" "${CFLAGS_BENCH[@]}" -o "$TOOLS/spawn-bench" bench/spawn-bench.c bench/bench-util.c
# shellcheck disable=SC2046 # pkg-config prints several words on purpose
"$CC" "${CFLAGS_BENCH[@]}" -Iinclude $(pkg-config --cflags libcurl jansson) \
    -o "$TOOLS/abx-bench" bench/abx-bench.c bench/bench-util.c "$LIBABX" \
    $(pkg-config --libs libcurl jansson) -lpthread -lm
say "building $TOOLS/disk-bench"
# shellcheck disable=SC2046 # pkg-config prints several words on purpose
"$CC" "${CFLAGS_BENCH[@]}" -Isrc -o "$TOOLS/disk-bench" bench/disk-bench.c bench/bench-util.c \
    "$BUILD/src/libabx-jail.a" "$BUILD/src/libabx-util.a" \
    $(pkg-config --libs libseccomp jansson) -lpthread -lm
say "building $TOOLS/priv-bench"
# shellcheck disable=SC2046 # pkg-config prints several words on purpose
"$CC" "${CFLAGS_BENCH[@]}" -Isrc -o "$TOOLS/priv-bench" bench/priv-bench.c bench/bench-util.c \
    "$BUILD/src/libabx-priv.a" "$BUILD/src/libabx-jail.a" "$BUILD/src/libabx-util.a" \
    $(pkg-config --libs libseccomp jansson) -lpthread -lm
SPAWN=$TOOLS/spawn-bench
ABXB=$TOOLS/abx-bench
DISKB=$TOOLS/disk-bench
PRIVB=$TOOLS/priv-bench

# --- helpers ---

# Records a command as the document shows it (the URL and key are per run).
note_cmd() {
    local s="$*"
    s=${s//$ROOT\//}
    s=${s//$WORK/\$WORK}
    s=${s//$KEY/\$KEY}
    [ -z "$URL" ] || s=${s//$URL/\$URL}
    printf '%s\n' "$s" >>"$COMMANDS"
}

# measure CMD...: runs a tool, keeps its name.key=value lines, echoes them.
measure() {
    local out=$WORK/out.tmp
    note_cmd "$@"
    if "$@" >"$out"; then
        cat "$out" >>"$RESULTS"
        cat "$out" >&2
        return 0
    fi
    say "FAILED: $*"
    FAILED=1
    return 1
}

put() { printf '%s=%s\n' "$1" "$2" >>"$RESULTS"; }
get() { local v; v=$(grep -m1 "^$1=" "$RESULTS" | cut -d= -f2-) || true; printf '%s' "${v:--}"; }

ms() { # microseconds -> milliseconds with 2 decimals
    local v=$1
    [ "$v" != - ] || { printf -- '-'; return; }
    awk -v v="$v" 'BEGIN { printf "%.2f", v / 1000 }'
}
ratio() {
    if [ "$1" = - ] || [ "$2" = - ]; then printf -- '-'; return; fi
    awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else printf "-" }'
}

drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches; }
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$ABXD_PID/status"; }

# The /proc/meminfo fields the memory table shows, kB.
MEM_FIELDS="MemAvailable AnonPages Shmem Slab SUnreclaim KernelStack PageTables Percpu"
# meminfo_snapshot TAG: each field's median of 3 readings one second apart,
# caches dropped before each, kept as mem.TAG.FIELD.
meminfo_snapshot() {
    local i
    for i in 1 2 3; do
        drop_caches
        cp /proc/meminfo "$WORK/meminfo.$i"
        [ "$i" -lt 3 ] && sleep 1
    done
    awk -v tag="$1" -v fields="$MEM_FIELDS" '
        BEGIN { n = split(fields, f, " "); for (i = 1; i <= n; i++) want[f[i] ":"] = 1 }
        want[$1] { k = substr($1, 1, length($1) - 1); v[k, ++c[k]] = $2 }
        END {
            for (i = 1; i <= n; i++) {
                k = f[i]; a = v[k, 1]; b = v[k, 2]; d = v[k, 3]
                if (a > b) { t = a; a = b; b = t }
                if (b > d) { t = b; b = d; d = t }
                if (a > b) { t = a; a = b; b = t }
                printf "mem.%s.%s=%s\n", tag, k, b
            }
        }' "$WORK/meminfo.1" "$WORK/meminfo.2" "$WORK/meminfo.3" >>"$RESULTS"
}

# Sum of the proportional set size of abxd's children (the sandboxes' init), kB.
init_pss() {
    local sum=0 n=0 pid v
    for pid in $(pgrep -P "$ABXD_PID" || true); do
        v=$(awk '/^Pss:/ { print $2 }' "/proc/$pid/smaps_rollup" 2>/dev/null) || continue
        [ -n "$v" ] || continue
        sum=$((sum + v))
        n=$((n + 1))
    done
    put init.pss_kib "$sum"
    put init.processes "$n"
}

metric() {
    curl -sf -H "Authorization: Bearer $KEY" "$URL/metrics" | awk -v k="abx_$1" '$1 == k { print $2 }'
}

wait_pool() { # wait_pool N: until abxd holds N warm sandboxes (at most 30 s)
    local i
    for ((i = 0; i < 300; i++)); do
        [ "$(metric pool_ready)" -ge "$1" ] 2>/dev/null && return 0
        sleep 0.1
    done
    say "the warm pool did not reach $1 in 30 s"
}

start_abxd() { # start_abxd POOL
    local pool=$1 i
    # The sample tools (built by make into build/tools) for section 8b.
    local tools=()
    [ -d build/tools ] && tools=(--tools-dir build/tools)
    note_cmd "ABX_API_KEY=<generated> ${ABX_LOG_LEVEL:+ABX_LOG_LEVEL=$ABX_LOG_LEVEL }ABX_POOL=$pool bin/abxd --listen 127.0.0.1:0 --state-dir \$WORK/state ${tools[*]}"
    # shellcheck disable=SC2086 # ABXD_EXTRA: words on purpose (section 10)
    ABX_POOL=$pool bin/abxd --listen 127.0.0.1:0 --state-dir "$STATE" "${tools[@]}" ${ABXD_EXTRA:-} >"$WORK/abxd.log" 2>&1 &
    ABXD_PID=$!
    PORT=
    for ((i = 0; i < 300; i++)); do
        PORT=$(sed -n 's|.*listening on http://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$WORK/abxd.log")
        [ -n "$PORT" ] && break
        kill -0 "$ABXD_PID" 2>/dev/null || die "abxd exited at start: $(tail -n 5 "$WORK/abxd.log")"
        sleep 0.1
    done
    [ -n "$PORT" ] || die "abxd did not start listening within 30 s"
    URL=http://127.0.0.1:$PORT
    export ABX_URL=$URL
    # A few tries: once a loaded machine refused the first request right
    # after the listening line.
    for ((i = 0; i < 50; i++)); do
        curl -sf "$URL/readyz" >"$WORK/readyz.json" 2>/dev/null && break
        sleep 0.1
    done
    [ "$i" -lt 50 ] ||
        die "abxd is not ready: $(curl -sS "$URL/readyz" 2>&1) $(tail -n 5 "$WORK/abxd.log")"
    [ "$i" -eq 0 ] || say "abxd answered /readyz after $((i + 1)) tries"
    if [ "$pool" -gt 0 ]; then wait_pool "$pool"; fi
    if [ -z "$INSTANCE_CGROUPS" ]; then
        INSTANCE_CGROUPS=$(find "/proc/$ABXD_PID/fd" -mindepth 1 -maxdepth 1 -printf '%l\n' 2>/dev/null |
            grep -E '^/sys/fs/cgroup/.*/abx-[0-9a-f]{12}$' | sort -u | tr '\n' ' ') || true
        say "abxd's instance cgroups (removed at the end): ${INSTANCE_CGROUPS:-none}"
    fi
    say "abxd pid $ABXD_PID on $URL (ABX_POOL=$pool)"
}

# --- the machine ---

CPU_MODEL=$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo)
CPU_FAM=$(awk -F': *' '/^cpu family/ { print $2; exit }' /proc/cpuinfo)
CPU_MOD=$(awk -F': *' '/^model\t/ { print $2; exit }' /proc/cpuinfo)
HYPER=$(lscpu 2>/dev/null | awk -F': *' '/^Hypervisor vendor/ { print $2 }')
NCPU=$(nproc)
MEM_GIB=$(awk '/^MemTotal:/ { printf "%.1f", $2 / 1048576 }' /proc/meminfo)
KERNEL=$(uname -r)
DEBIAN=$(cat /etc/debian_version 2>/dev/null || echo unknown)
CONTAINER=$(systemd-detect-virt --container 2>/dev/null || true)
[ -z "$CONTAINER" ] && [ -f /.dockerenv ] && CONTAINER=docker
[ "$CONTAINER" = none ] && CONTAINER=
COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
if [ -n "$(GIT_OPTIONAL_LOCKS=0 git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
    COMMIT="$COMMIT with uncommitted changes"
fi
DATE=$(date -u '+%Y-%m-%d %H:%M UTC')
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
say "$DATE on $CPU_MODEL x$NCPU, $MEM_GIB GiB, kernel $KERNEL, Debian $DEBIAN; load $LOAD_START"

# --- 1a. baselines: fork+exec+wait of /bin/true and of bwrap ---

say "1. fork+exec+wait baselines ($N_EXEC runs after $WARMUP)"
measure "$SPAWN" -n "$N_EXEC" -w "$WARMUP" --name fork_true -- /bin/true || true
if command -v bwrap >/dev/null; then
    measure "$SPAWN" -n "$N_EXEC" -w "$WARMUP" --name bwrap_true -- "$(command -v bwrap)" \
        "${BWRAP_ARGS[@]}" || true
else
    say "bwrap is not installed (make deps): skipped"
fi

start_abxd 2
CGROUP=$(sed -n 's/.*"cgroup":"\([^"]*\)".*/\1/p' "$WORK/readyz.json")

# --- context: GET /healthz with wrk ---

if command -v wrk >/dev/null; then
    say "context: wrk on /healthz"
    note_cmd "wrk -t2 -c16 -d5s \$URL/healthz"
    if wrk -t2 -c16 -d5s "$URL/healthz" >"$WORK/wrk.txt" 2>&1; then
        put healthz.rps "$(awk '/^Requests\/sec:/ { printf "%.0f", $2 }' "$WORK/wrk.txt")"
        put healthz.latency_avg "$(awk '$1 == "Latency" { print $2 }' "$WORK/wrk.txt")"
    else
        say "wrk failed"; FAILED=1
    fi
else
    say "wrk is not installed (make deps): skipped"
fi

# --- 1b. exec of /bin/true over HTTP, one live sandbox ---

say "1. abx_exec of /bin/true ($N_EXEC runs after $WARMUP)"
note_cmd "$ABXB create"
EXEC_ID=$("$ABXB" create) || die "cannot create a sandbox"
measure "$ABXB" exec --id "$EXEC_ID" -n "$N_EXEC" -w "$WARMUP" --pid "$ABXD_PID" --name exec_1 || true

say "1. fork+exec+wait of /bin/true inside the sandbox"
note_cmd "bin/abx cp $SPAWN \$ID:/spawn-bench && bin/abx exec \$ID -- chmod 755 /home/user/spawn-bench"
if bin/abx cp "$SPAWN" "$EXEC_ID:/spawn-bench" >/dev/null &&
    bin/abx exec "$EXEC_ID" -- chmod 755 /home/user/spawn-bench; then
    measure bin/abx exec "$EXEC_ID" -- /home/user/spawn-bench -n "$N_EXEC" -w "$WARMUP" \
        --name sandbox_fork_true -- /bin/true || true
else
    say "cannot put spawn-bench into the sandbox"; FAILED=1
fi

# --- 5. throughput: 16 clients, each on its own sandbox ---

say "5. throughput: $THREADS clients for $SECONDS_TP s"
measure "$ABXB" throughput --threads "$THREADS" --seconds "$SECONDS_TP" --name tp || true

# --- 6. file transfers and abxd's peak RSS ---

say "6. upload and download of $SMALL_MIB MiB and $BIG_MIB MiB"
FILE_ID=$("$ABXB" create) || die "cannot create a sandbox"
for mib in "$SMALL_MIB" "$BIG_MIB"; do
    head -c "$((mib * 1024 * 1024))" /dev/urandom >"$WORK/src.bin"
    sync
    measure "$ABXB" upload --id "$FILE_ID" --file "$WORK/src.bin" --pid "$ABXD_PID" \
        --name "up_$mib" || true
    measure "$ABXB" download --id "$FILE_ID" --file "$WORK/dst.bin" --pid "$ABXD_PID" \
        --name "down_$mib" || true
    if ! cmp -s "$WORK/src.bin" "$WORK/dst.bin"; then
        say "the $mib MiB file came back different"; FAILED=1
    fi
    rm -f "$WORK/src.bin" "$WORK/dst.bin"
done
# The same big upload again, with execs running meanwhile: file bodies are
# written on abxd's event loop, so this shows what a large upload does to
# everyone else's latency.
# The sandbox's writable space is bounded (--disk-mb, 2 GiB by default):
# make room for the second big file first.
bin/abx rm "$FILE_ID" /bench.bin >/dev/null || FAILED=1
head -c "$((BIG_MIB * 1024 * 1024))" /dev/urandom >"$WORK/src.bin"
sync
say "exec latency while $BIG_MIB MiB are being uploaded"
note_cmd "$ABXB upload --id \$ID --file \$WORK/src.bin --pid \$ABXD_PID --name up_during & $ABXB exec --id \$ID -n 300 -w 0 --name exec_during_upload"
"$ABXB" upload --id "$FILE_ID" --file "$WORK/src.bin" --pid "$ABXD_PID" --path /again.bin \
    --name up_during >"$WORK/up_during.txt" &
UP_PID=$!
sleep 0.2
measure "$ABXB" exec --id "$EXEC_ID" -n 300 -w 0 --name exec_during_upload || true
if wait "$UP_PID"; then cat "$WORK/up_during.txt" >>"$RESULTS"; else FAILED=1; fi
rm -f "$WORK/src.bin"
"$ABXB" kill --id "$FILE_ID" --name kill_file >/dev/null || FAILED=1

# --- 3 and 4. memory per idle sandbox; exec latency with many live ---

say "3. memory with $N_LIVE idle sandboxes"
# Three snapshots: before creating them, with them, and after deleting
# them; the baseline is the mean of the first and the last, so memory that
# other work on the machine takes or frees meanwhile cancels out as far as
# it drifts linearly.
wait_pool 2
sleep 2
meminfo_snapshot before
RSS0=$(rss_kb)
measure "$ABXB" fill -n "$N_LIVE" --ids "$WORK/ids" --name fill || true
wait_pool 2
say "settling for $SETTLE_S s"
sleep "$SETTLE_S"
meminfo_snapshot with
RSS1=$(rss_kb)
LIVE=$(metric sandboxes)
put mem.live "$LIVE"
put mem.rss_before_kib "$RSS0"
put mem.rss_with_kib "$RSS1"
init_pss
measure "$ABXB" usage --ids "$WORK/ids" --name usage || true

say "4. abx_exec of /bin/true with $LIVE live sandboxes"
measure "$ABXB" exec --id "$EXEC_ID" -n "$N_EXEC" -w "$WARMUP" --pid "$ABXD_PID" --name exec_many || true
measure "$ABXB" kill --ids "$WORK/ids" --name kill_many || true
wait_pool 2
sleep "$SETTLE_S"
meminfo_snapshot after
"$ABXB" kill --id "$EXEC_ID" --name kill_exec >/dev/null || FAILED=1

# --- 2. create -> first exec -> delete ---

say "2. lifecycle: $N_LIFE rounds each"
wait_pool 2
measure "$ABXB" lifecycle -n "$N_LIFE" -w "$LIFE_WARMUP" --wait-pool 2 --name life_pool2_paced || true
measure "$ABXB" lifecycle -n "$N_LIFE" -w "$LIFE_WARMUP" --name life_pool2 || true
stop_abxd
start_abxd 8
measure "$ABXB" lifecycle -n "$N_LIFE" -w "$LIFE_WARMUP" --name life_pool8 || true
stop_abxd
start_abxd 0
measure "$ABXB" lifecycle -n "$N_LIFE" -w "$LIFE_WARMUP" --name life_cold || true
stop_abxd

# --- 7. workspaces: mirror, wake, store throughput ---

# A fresh abxd with the default pool, logging at debug level: its log gives
# each wake's restore time. bench/ws-bench.sh works in $WORK, which holds
# the state directory, so its host baselines run on the same file system.
say "7. workspaces: mirror, wake and store throughput"
ABX_LOG_LEVEL=debug start_abxd 2
WS_ARGS=(--pid "$ABXD_PID" --work "$WORK" --log "$WORK/abxd.log" --pool 2)
if [ "${BENCH_QUICK:-0}" = 1 ]; then WS_ARGS+=(--quick); fi
WS_ARGS+=(--small-mib "$SMALL_MIB" --big-mib "$BIG_MIB")
if [ -n "${BENCH_WS_FILES:-}" ]; then WS_ARGS+=(--files "$BENCH_WS_FILES"); fi
if [ -n "${BENCH_WS_REPS:-}" ]; then WS_ARGS+=(--reps "$BENCH_WS_REPS" --wake-reps "$BENCH_WS_REPS"); fi
if [ -n "${BENCH_WS_WAKE_MIB:-}" ]; then WS_ARGS+=(--wake-mib "$BENCH_WS_WAKE_MIB"); fi
measure bench/ws-bench.sh "${WS_ARGS[@]}" || true
stop_abxd

# --- 8. tool bundles: abx tools build of the sample tools ---

# Cold: --force into an emptied directory before every run (each package's
# build, the contract run on the host, fsync of every file, the swap);
# nothing changed: only the content hashes and the stamps are read. No abxd.
say "8. tool bundles: abx tools build of sample-tools"
TB_OUT=$WORK/tools
TB_RUNS=${BENCH_TOOLS_RUNS:-10}
[ "${BENCH_QUICK:-0}" = 1 ] && TB_RUNS=3
# tools_hyperfine NAME ARGS...: hyperfine's median, min and max (µs) as NAME.*
tools_hyperfine() {
    local name=$1
    shift
    if hyperfine --style none --runs "$TB_RUNS" --export-csv "$WORK/$name.csv" "$@" >&2; then
        awk -F, -v n="$name" 'NR == 2 { printf "%s.median_us=%.0f\n%s.min_us=%.0f\n%s.max_us=%.0f\n",
            n, $4 * 1e6, n, $7 * 1e6, n, $8 * 1e6 }' "$WORK/$name.csv" >>"$RESULTS"
    else
        say "FAILED: hyperfine $*"
        FAILED=1
    fi
}
if ! command -v hyperfine >/dev/null; then
    say "hyperfine is not installed (make deps): skipped"
elif ! bin/abx tools build --out "$TB_OUT" sample-tools >"$WORK/tools-build.log" 2>&1; then
    say "FAILED: bin/abx tools build --out \$WORK/tools sample-tools: $(tail -n 5 "$WORK/tools-build.log")"
    FAILED=1
else
    put tools_build.packages "$(grep -c ': built' "$WORK/tools-build.log")"
    note_cmd "hyperfine --runs $TB_RUNS --prepare 'rm -rf \$WORK/tools' 'bin/abx tools build --force --out \$WORK/tools sample-tools'"
    tools_hyperfine tools_build_cold --prepare "rm -rf $TB_OUT" \
        "bin/abx tools build --force --out $TB_OUT sample-tools"
    bin/abx tools build --out "$TB_OUT" sample-tools >/dev/null 2>&1 || true
    note_cmd "hyperfine --runs $TB_RUNS 'bin/abx tools build --out \$WORK/tools sample-tools'"
    tools_hyperfine tools_build_warm "bin/abx tools build --out $TB_OUT sample-tools"
fi

# --- 8b. a tool call against an exec of the same launcher ---

# Both on one warm workspace, through curl (its time_total: request sent to
# answer complete), one request at a time: the tool route's own cost is
# the schema validation, the walk before and after (for "files") and the
# JSON answer, against exec's NDJSON stream.
say "8b. tool call round trip against exec of the same launcher"
TC_N=${BENCH_TOOL_CALLS:-200}
[ "${BENCH_QUICK:-0}" = 1 ] && TC_N=20
# tc_lat NAME PATH BODY: TC_N POSTs, p50/p99/mean of time_total as NAME.*_us
tc_lat() {
    local name=$1 path=$2 body=$3 i
    for ((i = 0; i < TC_N; i++)); do
        curl -sS -o /dev/null -w '%{http_code} %{time_total}\n' -H "Authorization: Bearer $KEY" \
            -H 'Content-Type: application/json' -X POST "$URL$path" --data-binary "$body"
    done >"$WORK/$name.times"
    if grep -qv '^200 ' "$WORK/$name.times"; then
        say "FAILED: $name: $(grep -v '^200 ' "$WORK/$name.times" | head -n 1)"
        FAILED=1
        return
    fi
    awk '{ print $2 * 1e6 }' "$WORK/$name.times" | sort -n | awk -v n="$name" '
        { v[NR] = $1; t += $1 }
        END { printf "%s.p50_us=%.0f\n%s.p99_us=%.0f\n%s.mean_us=%.0f\n", n, v[int(NR * 0.5 + 0.5)],
              n, v[int(NR * 0.99 + 0.5)], n, t / NR }' >>"$RESULTS"
}
if [ ! -d build/tools ]; then
    say "build/tools is missing (make builds it): skipped"
else
    start_abxd 2
    TC_WS=$(curl -sS -H "Authorization: Bearer $KEY" -X POST "$URL/v1/workspaces" -d '{}' |
        sed -n 's/.*"id" *: *"\([a-z0-9]*\)".*/\1/p')
    awk 'BEGIN { print "city,temp,rain"; for (i = 0; i < 100; i++) printf "c%d,%d.5,%d\n", i % 7, i % 30, i % 11 }' \
        >"$WORK/tc.csv"
    curl -sS -o /dev/null -H "Authorization: Bearer $KEY" -X PUT --data-binary @"$WORK/tc.csv" \
        "$URL/v1/workspaces/$TC_WS/files/data.csv"
    TC_ARGS='{"path":"data.csv"}'
    TC_EXEC='{"argv":["/.tools/csv-summary/launch","summarize","{\"path\":\"data.csv\"}"]}'
    # Wake it, then warm both paths up.
    curl -sS -o /dev/null -H "Authorization: Bearer $KEY" -X POST "$URL/v1/workspaces/$TC_WS/exec" \
        -d "$TC_EXEC"
    note_cmd "curl -X POST \$URL/v1/workspaces/\$WS/tools/csv-summary:summarize -d '{\"arguments\":$TC_ARGS}'  # $TC_N times"
    tc_lat tool_call "/v1/workspaces/$TC_WS/tools/csv-summary:summarize" "{\"arguments\":$TC_ARGS}"
    note_cmd "curl -X POST \$URL/v1/workspaces/\$WS/exec -d '$TC_EXEC'  # $TC_N times"
    tc_lat tool_exec "/v1/workspaces/$TC_WS/exec" "$TC_EXEC"
    stop_abxd
fi

# --- 8c. the E2B SDK from Node against libabx, same abxd, same run ---

# The four operations of issue 4 through the official e2b npm package
# (tests/e2b/node_modules, installed by make deps) and through libabx, one
# after the other on one fresh abxd with the default pool of 2. Each create
# round waits (untimed) for a full pool on both sides, so both create from
# the pool. commands.run('true') runs "/bin/bash -l -c true", so the libabx
# side runs that too; libabx's /bin/true and Node's own fetch on abxd's
# native API are there to show where the difference goes.
say "8c. E2B SDK from Node against libabx"
E2B_N=${BENCH_E2B_N:-200}
E2B_W=${BENCH_E2B_WARMUP:-20}
E2B_NOTE=
E2B_VERSION=
NODE_VERSION=
if ! command -v node >/dev/null; then
    E2B_NOTE="skipped: node is not installed (make deps installs it)"
elif [ ! -f tests/e2b/node_modules/e2b/package.json ]; then
    E2B_NOTE="skipped: tests/e2b/node_modules is missing (make deps installs the e2b package there)"
else
    NODE_VERSION=$(node --version)
    E2B_VERSION=$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' tests/e2b/node_modules/e2b/package.json | head -n 1)
    start_abxd 2
    measure "$ABXB" e2b-baseline -n "$E2B_N" -w "$E2B_W" --create-n "$N_LIFE" \
        --create-w "$LIFE_WARMUP" --wait-pool 2 --name e2b_abx || true
    measure node bench/e2b-bench.mjs -n "$E2B_N" -w "$E2B_W" --create-n "$N_LIFE" \
        --create-w "$LIFE_WARMUP" --wait-pool 2 --name e2b_sdk || true
    stop_abxd
fi
[ -z "$E2B_NOTE" ] || say "8c. $E2B_NOTE"

# --- 9. the disk bound: a subvolume with a quota per sandbox ---

# src/jail/disk.h on its own, in $WORK (the disk of the state directory):
# the image made and mounted, then per sandbox what abxd does (create with a
# limit, destroy), on an empty disk and with BENCH_DISK_AREAS bounded areas
# holding 64 KiB each; writes with and without a bound meanwhile.
say "9. the disk bound (disk-bench)"
DISK_AREAS=${BENCH_DISK_AREAS:-1000}
DISK_ROUNDS=${BENCH_DISK_ROUNDS:-200}
mkdir -p "$WORK/disk"
measure "$DISKB" --dir "$WORK/disk" --areas "$DISK_AREAS" --rounds "$DISK_ROUNDS" || true

# --- 11. the privileged hop (src/priv), on the modules, without abxd ---

# A descriptor-passing round trip between two processes (the floor), then
# a sandbox's stats and a spawn of /bin/true through the parent's protocol
# against the same jail calls in-process, in one run.
say "11. the privileged hop (priv-bench)"
PRIV_N=${BENCH_PRIV_N:-2000}
mkdir -p "$WORK/priv"
measure "$PRIVB" --dir "$WORK/priv" -n "$PRIV_N" -w 200 || true

# --- 10. file operations: through the file helper, and in-process ---

# The same native file operations on one sandbox, against an abxd in the ns
# mode (every file operation goes through the sandbox user's abx-fileops
# helper) and one in the none mode (the same functions inside abxd, with
# abxd's rights): the difference is what the helper costs.
say "10. file operations through the file helper (ns) and in-process (none)"
# Both with the home on the state directory's file system (--disk-mb 0),
# so that only the helper differs, not the file system under the files.
FO_N=${BENCH_FO_N:-500}
ABXD_EXTRA="--disk-mb 0" start_abxd 1
measure python3 bench/fileops-bench.py --url "$URL" --key "$ABX_API_KEY" --name fo_ns -n "$FO_N" || true
stop_abxd
ABXD_EXTRA="--isolation none --disk-mb 0" start_abxd 1
measure python3 bench/fileops-bench.py --url "$URL" --key "$ABX_API_KEY" --name fo_none -n "$FO_N" || true
stop_abxd

# --- 12. privilege separation: the same calls through the split abxd ---

# One abxd in one process (ABX_PRIVSEP=0) and one split in two
# (ABX_PRIVSEP=1, the default: the network process asks the privileged
# parent for every jail operation),
# one after the other, the same calls: exec of /bin/true, create -> first
# exec -> delete from a pool of 2 and cold, a 64 MiB upload and download
# (the bytes go to the file helper on a descriptor the parent passed).
say "12. privilege separation: one process against the split"
SPLIT_MIB=64
split_round() { # split_round TAG: exec, lifecycle, transfer on the abxd started last
    local tag=$1 id pid
    # The process whose RSS the transfer reads: the one that serves.
    pid=$(pgrep -P "$ABXD_PID" -f -- '--role=net' | head -n 1 || true)
    pid=${pid:-$ABXD_PID}
    id=$("$ABXB" create) || { say "cannot create a sandbox"; FAILED=1; return; }
    measure "$ABXB" exec --id "$id" -n "$N_EXEC" -w "$WARMUP" --name "exec_$tag" || true
    head -c "$((SPLIT_MIB * 1024 * 1024))" /dev/urandom >"$WORK/src.bin"
    measure "$ABXB" upload --id "$id" --file "$WORK/src.bin" --pid "$pid" --name "up_$tag" || true
    measure "$ABXB" download --id "$id" --file "$WORK/dst.bin" --pid "$pid" --name "down_$tag" || true
    cmp -s "$WORK/src.bin" "$WORK/dst.bin" || { say "the file came back different ($tag)"; FAILED=1; }
    rm -f "$WORK/src.bin" "$WORK/dst.bin"
    "$ABXB" kill --id "$id" --name "kill_$tag" >/dev/null || FAILED=1
    wait_pool 2
    measure "$ABXB" lifecycle -n "$N_LIFE" -w "$LIFE_WARMUP" --name "life_$tag" || true
}
ABX_PRIVSEP=0 start_abxd 2
split_round one
stop_abxd
ABX_PRIVSEP=1 start_abxd 2
split_round split
stop_abxd
ABX_PRIVSEP=1 start_abxd 0
measure "$ABXB" lifecycle -n "$N_LIFE" -w "$LIFE_WARMUP" --name life_split_cold || true
stop_abxd

LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)

# --- the table ---

row_lat() { # row_lat LABEL NAME: p50/p90/p99/mean in ms
    printf '| %s | %s | %s | %s | %s |\n' "$1" "$(ms "$(get "$2.p50_us")")" \
        "$(ms "$(get "$2.p90_us")")" "$(ms "$(get "$2.p99_us")")" "$(ms "$(get "$2.mean_us")")"
}
row_life() { # row_life LABEL NAME
    local n=$2
    printf '| %s | %s/%s | %s / %s | %s / %s | %s / %s | %s / %s | %s / %s |\n' "$1" \
        "$(get "$n.from_pool")" "$(get "$n.create.n")" \
        "$(ms "$(get "$n.create.p50_us")")" "$(ms "$(get "$n.create.p99_us")")" \
        "$(ms "$(get "$n.server_total.p50_us")")" "$(ms "$(get "$n.server_total.p99_us")")" \
        "$(ms "$(get "$n.first_exec.p50_us")")" "$(ms "$(get "$n.first_exec.p99_us")")" \
        "$(ms "$(get "$n.delete.p50_us")")" "$(ms "$(get "$n.delete.p99_us")")" \
        "$(ms "$(get "$n.round.p50_us")")" "$(ms "$(get "$n.round.p99_us")")"
}
sum() { # sum A B...: the figures added up, "-" if one is missing
    local a
    for a in "$@"; do
        if [ "$a" = - ]; then printf -- '-'; return; fi
    done
    printf '%s\n' "$@" | awk '{ t += $1 } END { printf "%.0f", t }'
}
row_cpu_fork() { # row_cpu_fork LABEL NAME
    local p c
    p=$(get "$2.parent_cpu_us") c=$(get "$2.child_cpu_us")
    printf '| %s | %s | | | %s | %s | | |\n' "$1" "$p" "$c" "$(sum "$p" "$c")"
}
row_cpu_exec() { # row_cpu_exec LABEL NAME
    local cl ab in ch
    cl=$(get "$2.client_cpu_us") ab=$(get "$2.abxd_cpu_us") in=$(get "$2.init_cpu_us")
    ch=$(get "$2.child_cpu_us")
    printf '| %s | %s | %s | %s | %s | %s | %s | %s |\n' "$1" "$cl" "$ab" "$in" "$ch" \
        "$(sum "$cl" "$ab" "$in" "$ch")" "$(get "$2.abxd_runq_wait_us")" "$(get "$2.init_runq_wait_us")"
}
per_sandbox() { # per_sandbox KIB_TOTAL: KiB per sandbox of this run
    local n
    n=$(get usage.sandboxes)
    if [ "$1" = - ] || [ "$n" = - ]; then printf -- '-'; return; fi
    awk -v t="$1" -v n="$n" 'BEGIN { if (n > 0) printf "%.0f", t / n; else printf "-" }'
}
# mem_row FIELD LABEL SIGN: what FIELD grew by (SIGN -1: shrank by) with the
# sandboxes live, against before and after and the mean of both.
mem_row() {
    local b w a
    b=$(get "mem.before.$1") w=$(get "mem.with.$1") a=$(get "mem.after.$1")
    if [ "$b" = - ] || [ "$w" = - ] || [ "$a" = - ]; then
        printf '| %s | - | - | - | - | - |\n' "$2"
        return
    fi
    local d
    d=$(awk -v b="$b" -v w="$w" -v a="$a" -v s="$3" 'BEGIN { printf "%d", s * (w - (b + a) / 2) }')
    awk -v b="$b" -v w="$w" -v a="$a" -v s="$3" -v l="$2" -v d="$d" -v p="$(per_sandbox "$d")" \
        'BEGIN { printf "| %s | %d | %d | %d | %d KiB | %s KiB |\n", l, b, w, a, d, p }'
}
# Workspaces (7): ws-bench.sh keeps repeated figures as NAME.p50, .min,
# .max, .n and .all (comma-separated, in run order), in µs.
pmm() { # pmm NAME: "p50 (min–max)" in ms, or "-"
    local p
    p=$(get "$1.p50")
    if [ "$p" = - ]; then printf -- '-'; return; fi
    if [ "$(get "$1.n")" = 1 ]; then ms "$p"; return; fi
    printf '%s (%s–%s)' "$(ms "$p")" "$(ms "$(get "$1.min")")" "$(ms "$(get "$1.max")")"
}
ws_changes() { local c; c=$(get ws_mirror.changes); [ "$c" = - ] || printf '%s' "$c"; }
# shellcheck disable=SC2016 # the backquotes are Markdown's
mirror_rows() {
    local k label base b
    printf '| initial: all %s files new | 1 | %s | %s | %s | `cp -a` of the tree, then `sync` (fsync) of every file | %s |\n' \
        "$(get ws_mirror.files)" "$(ms "$(get ws_mirror.initial.server_us)")" \
        "$(ms "$(get ws_mirror.initial.client_us)")" "$(ms "$(get ws_mirror.initial.cpu_us)")" \
        "$(ms "$(get ws_base.initial_us)")"
    for k in 0 $(ws_changes); do
        if [ "$k" = 0 ]; then
            label="no change"
            base='`find -printf` of inode, size, mtime, ctime and mode of every entry'
            b=$(pmm ws_base.walk_us)
        else
            label="$k files changed"
            base="\`cp --parents\` of the $k files, then \`sync\` of each"
            b=$(pmm "ws_base.c$k.copy_us")
        fi
        printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$label" "$(get "ws_mirror.c$k.server_us.n")" \
            "$(pmm "ws_mirror.c$k.server_us")" "$(pmm "ws_mirror.c$k.client_us")" \
            "$(pmm "ws_mirror.c$k.cpu_us")" "$base" "$b"
    done
}
mirror_per_file() { # ms per changed file at the largest change count, mirror and baseline
    local k c0 ck bk
    k=$(ws_changes | awk '{ print $NF }')
    [ -n "$k" ] || { printf -- '-'; return; }
    c0=$(get ws_mirror.c0.server_us.p50) ck=$(get "ws_mirror.c$k.server_us.p50")
    bk=$(get "ws_base.c$k.copy_us.p50")
    awk -v k="$k" -v a="$c0" -v b="$ck" -v c="$bk" 'BEGIN {
        if (a == "-" || b == "-" || c == "-") { printf "-"; exit }
        printf "with %d changed, (flush - no-change flush) / %d = **%.2f ms per changed file** on the server, against %.2f ms per file for `cp` + `sync`", k, k, (b - a) / k / 1000, c / k / 1000 }'
}
wake_row() { # wake_row LABEL KEY
    printf '| %s | %s | %s |\n' "$1" "$(pmm "ws_wake.warm.$2")" "$(pmm "ws_wake.dropped.$2")"
}
paired_ratio() { # paired_ratio MODE A B [C]: median over rounds of (A - C) / B
    awk -v a="$(get "ws_wake.$1.$2.all")" -v b="$(get "ws_wake.$1.$3.all")" \
        -v c="$( [ -n "${4:-}" ] && get "ws_wake.$1.$4.all")" 'BEGIN {
        n = split(a, x, ","); m = split(b, y, ","); if (c != "") split(c, z, ",")
        if (n == 0 || n != m || a == "-" || b == "-") { printf "-"; exit }
        for (i = 1; i <= n; i++) r[i] = (x[i] - (c != "" ? z[i] : 0)) / y[i]
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (r[j] < r[i]) { t = r[i]; r[i] = r[j]; r[j] = t }
        printf "%.2f", n % 2 ? r[(n + 1) / 2] : (r[n / 2] + r[n / 2 + 1]) / 2 }'
}
store_row() { # store_row MIB put|get LABEL
    local n="ws_${2}_$1"
    printf '| %s MiB | %s | %s | %s | %s KiB | %s KiB |\n' "$1" "$3" "$(get "$n.mib_per_s")" \
        "$(ms "$(get "$n.us")")" "$(get "$n.abxd_rss_before_kib")" "$(get "$n.abxd_peak_rss_kib")"
}
pct4() { # pct4 NAME: "p50 / p90 / p99 / mean" in ms
    printf '%s / %s / %s / %s' "$(ms "$(get "$1.p50_us")")" "$(ms "$(get "$1.p90_us")")" \
        "$(ms "$(get "$1.p99_us")")" "$(ms "$(get "$1.mean_us")")"
}
e2b_row() { # e2b_row LABEL OP: the SDK against libabx, and their ratios
    printf '| %s | %s | %s | **%s** | %s |\n' "$1" "$(pct4 "e2b_sdk.$2")" "$(pct4 "e2b_abx.$2")" \
        "$(ratio "$(get "e2b_sdk.$2.p50_us")" "$(get "e2b_abx.$2.p50_us")")" \
        "$(ratio "$(get "e2b_sdk.$2.mean_us")" "$(get "e2b_abx.$2.mean_us")")"
}
# shellcheck disable=SC2016 # the backquotes are Markdown's
e2b_section() {
    if [ -n "$E2B_NOTE" ]; then
        printf '**8c. E2B SDK against libabx**: %s.\n' "$E2B_NOTE"
        return
    fi
    printf '**8c. E2B SDK against libabx** (the `e2b` npm package %s on Node %s, pointed at abxd by E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY only, against `abx-bench e2b-baseline` through libabx; one abxd with ABX_POOL=2, libabx first, then the SDK; %s runs after %s warm-up each, creates %s rounds after %s, each round after the pool is full again; 1 MiB = %s random bytes; ms)\n\n' \
        "$E2B_VERSION" "$NODE_VERSION" "$E2B_N" "$E2B_W" "$N_LIFE" "$LIFE_WARMUP" "$(get e2b_sdk.bytes)"
    printf '| operation | E2B SDK from Node: p50 / p90 / p99 / mean | libabx: p50 / p90 / p99 / mean | SDK / libabx, p50 | mean |\n'
    printf '| --- | ---: | ---: | ---: | ---: |\n'
    e2b_row '`Sandbox.create()` -> first `commands.run('"'true'"')` done (libabx: create, then exec of `/bin/bash -l -c true`; the kill is not timed)' create_run
    e2b_row '`commands.run('"'true'"')` round trip, one sandbox (libabx: exec of `/bin/bash -l -c true`, which is what it runs)' run
    e2b_row '`files.write` of 1 MiB (libabx: `abx_file_put` from memory)' write
    e2b_row '`files.read` of 1 MiB, `format: '"'bytes'"'` (libabx: `abx_file_download` into a memfd)' read
    printf '\nWhere the difference goes: the same from the same Node process through undici'"'"'s `fetch` (the HTTP client the SDK uses) on abxd'"'"'s own API, and libabx with no shell:\n\n'
    printf '| control | p50 / p90 / p99 / mean |\n| --- | ---: |\n'
    printf '| Node `fetch` POST `/v1/sandboxes/{id}/exec` of `/bin/bash -l -c true` | %s |\n' "$(pct4 e2b_sdk.native_run)"
    printf '| Node `fetch` PUT `/v1/sandboxes/{id}/files/...` of 1 MiB | %s |\n' "$(pct4 e2b_sdk.native_write)"
    printf '| Node `fetch` GET of it into an ArrayBuffer | %s |\n' "$(pct4 e2b_sdk.native_read)"
    printf '| libabx exec of `/bin/true` (no shell) | %s |\n' "$(pct4 e2b_abx.run_bin_true)"
}
table() {
    local rss_delta cg_kib pss_per
    rss_delta=$(awk -v a="$(get mem.rss_before_kib)" -v b="$(get mem.rss_with_kib)" \
        'BEGIN { if (a != "-" && b != "-") printf "%d", b - a; else printf "-" }')
    cg_kib=$(awk -v b="$(get usage.memory_bytes_sum)" 'BEGIN { if (b != "-") printf "%d", b / 1024; else printf "-" }')
    pss_per=$(awk -v s="$(get init.pss_kib)" -v n="$(get init.processes)" \
        'BEGIN { if (n > 0) printf "%.0f", s / n; else printf "-" }')
    cat <<EOF
Run: $DATE, commit $COMMIT.
Machine: $CPU_MODEL (family $CPU_FAM, model $CPU_MOD${HYPER:+, $HYPER guest}${CONTAINER:+, in a $CONTAINER container}), $NCPU cores, $MEM_GIB GiB RAM, kernel $KERNEL, Debian $DEBIAN, cgroup ${CGROUP:-?}. Load average at start $LOAD_START, at end $LOAD_END (a shared machine: other work ran meanwhile).
abxd: bin/abxd as built by \`make\` (Meson debugoptimized), defaults but ABX_POOL where noted; clients on the same machine over 127.0.0.1.

**1. Exec of /bin/true** ($N_EXEC runs after $WARMUP warm-up each; ms)

| what | p50 | p90 | p99 | mean |
| --- | ---: | ---: | ---: | ---: |
$(row_lat "fork+exec+wait of /bin/true" fork_true)
$(row_lat "fork+exec+wait of bwrap --unshare-all ... /bin/true" bwrap_true)
$(row_lat "fork+exec+wait of /bin/true inside a sandbox (spawn-bench run by abx exec)" sandbox_fork_true)
$(row_lat "abx_exec /bin/true, 1 live sandbox (+2 warm)" exec_1)
$(row_lat "abx_exec /bin/true, $(get mem.live) live sandboxes" exec_many)
$(row_lat "abx_exec /bin/true while a $BIG_MIB MiB upload runs (300 runs)" exec_during_upload)

Ratio abx_exec / fork+exec: p50 **$(ratio "$(get exec_1.p50_us)" "$(get fork_true.p50_us)")x**, p90 $(ratio "$(get exec_1.p90_us)" "$(get fork_true.p90_us)")x, p99 $(ratio "$(get exec_1.p99_us)" "$(get fork_true.p99_us)")x. Ratio bwrap / fork+exec p50: $(ratio "$(get bwrap_true.p50_us)" "$(get fork_true.p50_us)")x. With $(get mem.live) live against 1 live, exec p50: $(ratio "$(get exec_many.p50_us)" "$(get exec_1.p50_us)")x.

CPU time per run, µs (the run-queue columns are time spent runnable but not running, per exec):

| what | client / parent | abxd | sandbox init | the program, /bin/true | total | abxd run-queue wait | init run-queue wait |
| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |
$(row_cpu_fork "fork+exec+wait on the host" fork_true)
$(row_cpu_fork "fork+exec+wait inside a sandbox" sandbox_fork_true)
$(row_cpu_exec "abx_exec, 1 live sandbox" exec_1)
$(row_cpu_exec "abx_exec, $(get mem.live) live sandboxes" exec_many)

**2. Create -> first exec (/bin/true) done -> delete** ($N_LIFE rounds after $LIFE_WARMUP; ms, p50 / p99)

| abxd | from pool | create (client) | create \`timings.total_ms\` (server) | create -> exec done | delete | whole round |
| --- | ---: | ---: | ---: | ---: | ---: | ---: |
$(row_life "ABX_POOL=2, each round waits for a full pool" life_pool2_paced)
$(row_life "ABX_POOL=2, back to back" life_pool2)
$(row_life "ABX_POOL=8, back to back" life_pool8)
$(row_life "ABX_POOL=0 (cold)" life_cold)

Cold create stages from \`timings\` (p50 / p99 ms): prepare $(ms "$(get life_cold.server_prepare.p50_us)") / $(ms "$(get life_cold.server_prepare.p99_us)"), clone $(ms "$(get life_cold.server_clone.p50_us)") / $(ms "$(get life_cold.server_clone.p99_us)"), init $(ms "$(get life_cold.server_init.p50_us)") / $(ms "$(get life_cold.server_init.p99_us)").

**3. Memory per idle sandbox** ($(get usage.sandboxes) created one after another, $SETTLE_S s to settle; /proc/meminfo read with caches dropped, each figure the median of 3 readings; "grew by" is *with* minus the mean of *before* and *after deleting them*, so that drift from other work on the machine cancels out as far as it is linear)

| /proc/meminfo field (kB) | before | with them | after deleting | grew by | per sandbox |
| --- | ---: | ---: | ---: | ---: | ---: |
$(mem_row MemAvailable "**MemAvailable** (shrank by)" -1)
$(mem_row AnonPages "AnonPages" 1)
$(mem_row Shmem "Shmem (tmpfs)" 1)
$(mem_row Slab "Slab" 1)
$(mem_row SUnreclaim "of which SUnreclaim" 1)
$(mem_row KernelStack "KernelStack" 1)
$(mem_row PageTables "PageTables" 1)
$(mem_row Percpu "Percpu" 1)

| other measure | total | per sandbox |
| --- | ---: | ---: |
| sandbox cgroups' memory.usage_in_bytes, sum of GET /v1/sandboxes/{id} usage.memory_bytes | $cg_kib KiB | **$(per_sandbox "$cg_kib") KiB** (min $(get usage.memory_bytes_min) B, max $(get usage.memory_bytes_max) B) |
| abxd RSS growth (VmRSS $(get mem.rss_before_kib) -> $(get mem.rss_with_kib) KiB) | $rss_delta KiB | **$(per_sandbox "$rss_delta") KiB** |
| PSS of abxd's children (the sandboxes' init, $(get init.processes) processes incl. the pool) | $(get init.pss_kib) KiB | $pss_per KiB per init |

Creating them: p50 $(ms "$(get fill.p50_us)") ms, p99 $(ms "$(get fill.p99_us)") ms per create; deleting them: p50 $(ms "$(get kill_many.p50_us)") ms, p99 $(ms "$(get kill_many.p99_us)") ms per delete.

**4. Exec with many live sandboxes**: see the last row of table 1.

**5. Exec throughput**: $(get tp.threads) threads, each with its own abx_client and its own sandbox ($(get tp.sandboxes) sandboxes), /bin/true in a loop for $(get tp.seconds) s: **$(get tp.execs_per_s) execs/s** ($(get tp.execs) execs); latency under that load p50 $(ms "$(get tp.p50_us)") ms, p99 $(ms "$(get tp.p99_us)") ms.

**6. Files** (a local file on the same disk as the sandbox's workspace; abxd's VmHWM reset before each transfer)

| file | direction | MiB/s | abxd RSS before | abxd peak RSS |
| --- | --- | ---: | ---: | ---: |
| $SMALL_MIB MiB | upload | $(get "up_$SMALL_MIB.mib_per_s") | $(get "up_$SMALL_MIB.abxd_rss_before_kib") KiB | $(get "up_$SMALL_MIB.abxd_peak_rss_kib") KiB |
| $SMALL_MIB MiB | download | $(get "down_$SMALL_MIB.mib_per_s") | $(get "down_$SMALL_MIB.abxd_rss_before_kib") KiB | $(get "down_$SMALL_MIB.abxd_peak_rss_kib") KiB |
| $BIG_MIB MiB | upload | $(get "up_$BIG_MIB.mib_per_s") | $(get "up_$BIG_MIB.abxd_rss_before_kib") KiB | $(get "up_$BIG_MIB.abxd_peak_rss_kib") KiB |
| $BIG_MIB MiB | download | $(get "down_$BIG_MIB.mib_per_s") | $(get "down_$BIG_MIB.abxd_rss_before_kib") KiB | $(get "down_$BIG_MIB.abxd_peak_rss_kib") KiB |
| $BIG_MIB MiB, execs running meanwhile | upload | $(get up_during.mib_per_s) | $(get up_during.abxd_rss_before_kib) KiB | $(get up_during.abxd_peak_rss_kib) KiB |

**7. Workspaces** (bench/ws-bench.sh: curl against an abxd with the default pool of 2 and \`ABX_LOG_LEVEL=debug\`, whose log gives each restore's time; SQLite store in the state directory, on the same disk as the host baselines; load average $(get ws.load_start) at the start of this part, $(get ws.load_end) at its end. Client = curl's \`time_total\`, server = the answer's \`duration_ms\`, abxd CPU = all of abxd's threads over the request. Medians, min–max in brackets; ms)

Mirror (\`POST /v1/workspaces/{ws}/flush\`) of a workspace of $(get ws_mirror.files) small files (11–13 bytes each at first) in $(get ws_mirror.dirs) directories, made by an exec of \`sh\`; each changed-files flush follows an exec that appends a line to that many files:

| flush | runs | server | client | abxd CPU | baseline on the host, identical tree | baseline |
| --- | ---: | ---: | ---: | ---: | --- | ---: |
$(mirror_rows)

Per file: $(mirror_per_file). abxd's peak RSS over these mirrors $(get ws_mirror.abxd_peak_rss_kib) KiB (VmRSS $(get ws_mirror.abxd_rss_before_kib) KiB before).

Wake of a cold workspace of $(get ws_wake.files) files of $(get ws_wake.file_bytes) bytes ($(awk -v b="$(get ws_wake.bytes)" 'BEGIN { if (b != "-") printf "%.0f", b / 1048576; else printf "-" }') MiB, random) in $(get ws_wake.dirs) directories: the first exec of \`true\` on it (sandbox from the pool, restore of every file with its hash checked), then a warm exec of \`true\`, then \`POST /close\`; after each wake, \`cp -a\` of a host tree of the same shape to a new directory on the same file system. Before each wake and each cp, that side's previous tree has just been deleted (abxd's close deletes the sandbox; the bench deletes the last copy right after), then come \`sync\` and a 1 s pause. $(get ws_wake.reps) rounds with the page cache warm, then $(get ws_wake.reps) with \`echo 3 > /proc/sys/vm/drop_caches\` after the \`sync\`:

| step | page cache warm | after drop_caches |
| --- | ---: | ---: |
$(wake_row "**wake**: first exec of \`true\` on the cold workspace (client)" wake_us)
$(wake_row "of which the restore (abxd's log)" restore_us)
$(wake_row "abxd CPU during the wake" wake_cpu_us)
$(wake_row "warm exec of \`true\` right after (reference)" warm_exec_us)
$(wake_row "**\`cp -a\`** of the same-shape tree" cp_us)
$(wake_row "cp's CPU (user + sys)" cp_cpu_us)
| **wake / cp -a**, median of the rounds' ratios | **$(paired_ratio warm wake_us cp_us)x** | **$(paired_ratio dropped wake_us cp_us)x** |
| (wake − warm exec) / cp -a | $(paired_ratio warm wake_us cp_us warm_exec_us)x | $(paired_ratio dropped wake_us cp_us warm_exec_us)x |
$(wake_row "close after the wake (client)" close_us)
$(wake_row "its mirror (server)" close_server_us)
| directories that mirror wrote to the store again (count) | $(get ws_wake.warm.close_dirs.p50) | $(get ws_wake.dropped.close_dirs.p50) |

The first mirror of that tree: server $(ms "$(get ws_wake.mirror.server_us)") ms, client $(ms "$(get ws_wake.mirror.client_us)") ms.

Store throughput: \`PUT\` of a file of random bytes to a cold workspace (\`/v1/workspaces/{ws}/files/big\`, straight into the store: staged, hashed, fsynced, linked) and \`GET\` of it back into /dev/null (then checked against the source with \`cmp\` by a second, untimed GET); one run each, abxd's VmHWM reset before each transfer. Baseline: \`dd bs=1M conv=fsync\` of the same file to the same disk:

| file | direction | MiB/s | time (ms) | abxd RSS before | abxd peak RSS |
| --- | --- | ---: | ---: | ---: | ---: |
$(store_row "$SMALL_MIB" put "PUT to the store")
$(store_row "$SMALL_MIB" get "GET from the store")
| $SMALL_MIB MiB | baseline: \`dd conv=fsync\` | $(get "ws_dd_$SMALL_MIB.mib_per_s") | $(ms "$(get "ws_dd_$SMALL_MIB.us")") | | |
$(store_row "$BIG_MIB" put "PUT to the store")
$(store_row "$BIG_MIB" get "GET from the store")
| $BIG_MIB MiB | baseline: \`dd conv=fsync\` | $(get "ws_dd_$BIG_MIB.mib_per_s") | $(ms "$(get "ws_dd_$BIG_MIB.us")") | | |

**8. Tool bundles**: \`abx tools build\` of sample-tools ($(get tools_build.packages) packages, the python-stack carrier's module check included; hyperfine, $TB_RUNS runs, median (min–max) in ms): cold, \`--force\` into an emptied directory, **$(ms "$(get tools_build_cold.median_us)")** ($(ms "$(get tools_build_cold.min_us)")–$(ms "$(get tools_build_cold.max_us)")); nothing changed **$(ms "$(get tools_build_warm.median_us)")** ($(ms "$(get tools_build_warm.min_us)")–$(ms "$(get tools_build_warm.max_us)")).

**8b. Tool call** on a warm workspace (curl, one request at a time, $TC_N each; csv-summary \`summarize\` of a 100-row CSV; p50 / p99 / mean in ms): through \`POST /v1/workspaces/{ws}/tools/csv-summary:summarize\` **$(ms "$(get tool_call.p50_us)")** / $(ms "$(get tool_call.p99_us)") / $(ms "$(get tool_call.mean_us)"); the same launcher through \`POST .../exec\` **$(ms "$(get tool_exec.p50_us)")** / $(ms "$(get tool_exec.p99_us)") / $(ms "$(get tool_exec.mean_us)").

$(e2b_section)

**9. Disk bound** (bench/disk-bench.c on src/jail/disk.h, no abxd: a btrfs image of $(get disk.make.image_mib) MiB in the bench's directory, one subvolume with a qgroup limit of 64 MiB per sandbox; $DISK_ROUNDS rounds each; p50 / p99 in ms): making the image (fallocate, mkfs.btrfs, loop, mount, quotas) $(get disk.make.ms) ms, mounting it again at a restart $(get disk.mount.ms) ms.

| per sandbox | empty disk | with $(get disk.fill.areas) bounded subvolumes |
| --- | ---: | ---: |
| create + limit | $(ms "$(get disk.empty_create.p50_us)") / $(ms "$(get disk.empty_create.p99_us)") | $(ms "$(get disk.many_create.p50_us)") / $(ms "$(get disk.many_create.p99_us)") |
| destroy | $(ms "$(get disk.empty_destroy.p50_us)") / $(ms "$(get disk.empty_destroy.p99_us)") | $(ms "$(get disk.many_destroy.p50_us)") / $(ms "$(get disk.many_destroy.p99_us)") |
| write of 256 MiB + fsync, bounded area (MiB/s) | $(get disk.write_bounded_empty.mib_per_s) | $(get disk.write_bounded_many.mib_per_s) |
| the same, unbounded area (MiB/s) | $(get disk.write_unbounded_empty.mib_per_s) | $(get disk.write_unbounded_many.mib_per_s) |

Making the $(get disk.fill.areas) (64 KiB written into each): $(get disk.fill.ms) ms in all, create p50 / p99 $(ms "$(get disk.fill_create.p50_us)") / $(ms "$(get disk.fill_create.p99_us)") ms. With them: reading one's usage p50 $(ms "$(get disk.usage.p50_us)") ms, a new limit p50 $(ms "$(get disk.limit.p50_us)") ms; destroying all of them (reclaim) $(get disk.reclaim.ms) ms.

**10. File operations through the file helper** (bench/fileops-bench.py: native routes on one sandbox over one keep-alive connection, $FO_N runs each after 50, the walk 50 runs; ns = every operation in the sandbox user's abx-fileops helper, none = the same functions inside abxd; both with \`--disk-mb 0\`, so the files are on the same file system; p50 / p99 in ms)

| operation | ns (helper) | none (in-process) | helper's extra p50 |
| --- | --- | --- | --- |
$(for op in put_4k get_4k head walk; do
    case $op in put_4k) l="PUT of 4 KiB" ;; get_4k) l="GET of 4 KiB" ;; head) l="HEAD" ;; walk) l="walk of 1,000 files" ;; esac
    a=$(get fo_ns.$op.p50_us); b=$(get fo_none.$op.p50_us)
    d=-; if [ "$a" != - ] && [ "$b" != - ]; then d=$(ms $((a - b))); fi
    printf '| %s | %s / %s | %s / %s | %s |\n' "$l" "$(ms "$a")" "$(ms "$(get fo_ns.$op.p99_us)")" "$(ms "$b")" "$(ms "$(get fo_none.$op.p99_us)")" "$d"
done)

**11. The privileged hop** (bench/priv-bench.c on src/priv, no abxd: the parent in a child process holding a jail host, the client in the bench; $PRIV_N runs after 200 each; p50 / p99 in µs; abxd's own path through the parent, split, is part 12)

| what | through the parent | in-process | the hop's extra p50 |
| --- | --- | --- | --- |
$(for op in stats spawn_call spawn; do
    case $op in stats) l="a sandbox's cgroup stats" ;; spawn_call) l="the spawn call itself (what the caller's loop waits)" ;; spawn) l="spawn of /bin/true in a sandbox until its exit is seen" ;; esac
    a=$(get priv.${op}_parent.p50_us); b=$(get priv.${op}_local.p50_us)
    d=-; if [ "$a" != - ] && [ "$b" != - ]; then d=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.1f", a - b }'); fi
    printf '| %s | %s / %s | %s / %s | %s |\n' "$l" "$a" "$(get priv.${op}_parent.p99_us)" "$b" "$(get priv.${op}_local.p99_us)" "$d"
done)

Baseline, a SOCK_SEQPACKET round trip carrying one descriptor between two processes (p50 / p99 µs): as scheduled $(get priv.raw.p50_us) / $(get priv.raw.p99_us), both on one CPU $(get priv.raw_one_cpu.p50_us) / $(get priv.raw_one_cpu.p99_us), on two CPUs $(get priv.raw_two_cpus.p50_us) / $(get priv.raw_two_cpus.p99_us).

**12. Privilege separation** (one abxd in one process with \`ABX_PRIVSEP=0\`, then one split in two with \`ABX_PRIVSEP=1\`, the default since 2026-12-02 and so what every other part measures, the same calls one after the other; p50 / p99 ms; transfers in MiB/s; cold creates against part 2's \`ABX_POOL=0\` row of this run)

| what | one process | split | split / one (p50) |
| --- | --- | --- | --- |
| exec of /bin/true | $(ms "$(get exec_one.p50_us)") / $(ms "$(get exec_one.p99_us)") | $(ms "$(get exec_split.p50_us)") / $(ms "$(get exec_split.p99_us)") | $(ratio "$(get exec_split.p50_us)" "$(get exec_one.p50_us)")x |
| create -> first exec -> delete, pool 2 (round) | $(ms "$(get life_one.round.p50_us)") / $(ms "$(get life_one.round.p99_us)") | $(ms "$(get life_split.round.p50_us)") / $(ms "$(get life_split.round.p99_us)") | $(ratio "$(get life_split.round.p50_us)" "$(get life_one.round.p50_us)")x |
| create, pool 2 | $(ms "$(get life_one.create.p50_us)") / $(ms "$(get life_one.create.p99_us)") | $(ms "$(get life_split.create.p50_us)") / $(ms "$(get life_split.create.p99_us)") | $(ratio "$(get life_split.create.p50_us)" "$(get life_one.create.p50_us)")x |
| create -> first exec -> delete, cold (round) | $(ms "$(get life_cold.round.p50_us)") / $(ms "$(get life_cold.round.p99_us)") | $(ms "$(get life_split_cold.round.p50_us)") / $(ms "$(get life_split_cold.round.p99_us)") | $(ratio "$(get life_split_cold.round.p50_us)" "$(get life_cold.round.p50_us)")x |
| upload of $SPLIT_MIB MiB | $(get up_one.mib_per_s) | $(get up_split.mib_per_s) | |
| download of $SPLIT_MIB MiB | $(get down_one.mib_per_s) | $(get down_split.mib_per_s) | |

**Context**: GET /healthz with wrk (2 threads, 16 connections, 5 s): $(get healthz.rps) requests/s (mean latency $(get healthz.latency_avg)).

<details><summary>Commands, in the order they ran</summary>

\`\`\`
$(cat "$COMMANDS")
\`\`\`
</details>

<details><summary>Raw figures (name.key=value; latencies in µs)</summary>

\`\`\`
$(cat "$RESULTS")
\`\`\`
</details>
EOF
}

table >"$WORK/table.md"
printf '\n' >&2
cat "$WORK/table.md"

if [ "$FAILED" -ne 0 ]; then
    say "some measurements failed (see above); $DOC was not updated"
    exit 1
fi
if [ "$DOC" != - ]; then
    BEGIN='<!-- BEGIN make bench: generated by bench/run.sh, do not edit by hand -->'
    END='<!-- END make bench -->'
    if [ ! -f "$DOC" ] || ! grep -qF "$BEGIN" "$DOC"; then
        { printf '# Performance\n\n%s\n%s\n' "$BEGIN" "$END"; } >"$DOC.tmp"
        [ -f "$DOC" ] && { printf '\n'; cat "$DOC"; } >>"$DOC.tmp"
        mv "$DOC.tmp" "$DOC"
    fi
    awk -v b="$BEGIN" -v e="$END" -v t="$WORK/table.md" '
        $0 == b { print; while ((getline l < t) > 0) print l; skip = 1; next }
        $0 == e { skip = 0 }
        !skip { print }' "$DOC" >"$DOC.tmp"
    mv "$DOC.tmp" "$DOC"
    say "wrote the figures into $DOC"
fi
