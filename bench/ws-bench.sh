#!/usr/bin/env bash
# bench/ws-bench.sh - the workspace benchmarks of `make bench` (issue
# "Durable workspaces"), each beside a host baseline from the same run.
#
#   1. mirror (POST /flush) of a workspace of FILES small files in DIRS
#      directories: the initial mirror, then no change, then CHANGES files
#      changed (by an exec) before each flush; baselines on an identical tree
#      on the host: a `find` walk that stats every entry, and `cp` + fsync
#      of the same changed files;
#   2. wake of a cold workspace of WAKE_FILES files, WAKE_MIB MiB in all: the
#      first exec of `true` (sandbox + restore of every file with its hash
#      checked), a warm exec of `true` right after, then close; baseline:
#      `cp -a` of a tree of the same shape on the same file system, run in
#      turn with each wake (each side deletes its previous tree first:
#      close deletes the sandbox, we delete the last copy; then sync or
#      drop_caches, and 1 s); once with the page cache warm, once with
#      drop_caches before each wake and each cp;
#   3. PUT and GET of a SMALL_MIB and a BIG_MIB file to a cold workspace
#      (straight to and from the store; GET into /dev/null, then checked by
#      a second, untimed GET), with abxd's RSS before and its peak (VmHWM,
#      reset before each transfer); baseline: `dd conv=fsync` of the same
#      bytes to a file on the same disk.
#
# It drives the abxd at $ABX_URL with $ABX_API_KEY over HTTP with curl (the
# command-line tool) and prints its figures on stdout as name.key=value
# lines (times in µs); progress and problems go to stderr. Client times are
# curl's own %{time_total} (request sent to answer complete; curl's process
# start is not in them); the server's are the answers' duration_ms; abxd CPU
# is the sum of its threads' /proc/PID/task/*/schedstat run time over the
# request. Host times are `date +%s%N` around the command. Every repeated
# figure is reported as its median (p50), min and max. Nothing passes or
# fails on a threshold: the exit status says whether every step worked.
#
# Needs root (drop_caches, /proc/PID of abxd) and sh, coreutils and curl.
# bench/run.sh runs it against its own abxd; standalone:
#   ABX_URL=http://127.0.0.1:8700 ABX_API_KEY=... bench/ws-bench.sh --pid $(pidof abxd) \
#       --work /var/tmp/ws [--log abxd.log] [--quick]
# --work must be on the file system of abxd's state directory (the cp -a
# baseline runs there); --log is abxd's log written with ABX_LOG_LEVEL=debug,
# from which the restore's own duration is read (without it: "-").
# shellcheck disable=SC2015,SC2016 # A && B || C: B cannot fail; the tree scripts expand in sh
set -euo pipefail

PID=
WORKDIR=
LOG=
FILES=10000
DIRS=10
CHANGES="10 1000"
REPS=5
WAKE_FILES=1000
WAKE_MIB=100
WAKE_REPS=5
WAKE_DIRS=10
SMALL_MIB=64
BIG_MIB=1024
POOL=2

usage() {
    cat >&2 <<'EOF'
usage: ws-bench.sh --pid PID --work DIR [--log FILE] [--quick] [--files N] [--changes "K1 K2"]
       [--reps N] [--wake-files N] [--wake-mib N] [--wake-reps N] [--small-mib N] [--big-mib N]
       [--pool N]
EOF
    exit 2
}

while [ $# -gt 0 ]; do
    case $1 in
    --pid) PID=$2; shift ;;
    --work) WORKDIR=$2; shift ;;
    --log) LOG=$2; shift ;;
    --quick) FILES=1000 CHANGES="10 100" REPS=2 WAKE_FILES=100 WAKE_MIB=10 WAKE_REPS=2
        SMALL_MIB=16 BIG_MIB=128 ;;
    --files) FILES=$2; shift ;;
    --changes) CHANGES=$2; shift ;;
    --reps) REPS=$2; shift ;;
    --wake-files) WAKE_FILES=$2; shift ;;
    --wake-mib) WAKE_MIB=$2; shift ;;
    --wake-reps) WAKE_REPS=$2; shift ;;
    --small-mib) SMALL_MIB=$2; shift ;;
    --big-mib) BIG_MIB=$2; shift ;;
    --pool) POOL=$2; shift ;;
    *) usage ;;
    esac
    shift
done
[ -n "$PID" ] && [ -n "$WORKDIR" ] || usage
URL=${ABX_URL:?ABX_URL must name the abxd}
KEY=${ABX_API_KEY:?ABX_API_KEY must be set}
for v in "$FILES" "$REPS" "$WAKE_FILES" "$WAKE_MIB" "$WAKE_REPS" "$SMALL_MIB" "$BIG_MIB" "$POOL" $CHANGES; do
    case $v in '' | *[!0-9]*) usage ;; esac
done
[ $((FILES % DIRS)) -eq 0 ] && [ $((WAKE_FILES % WAKE_DIRS)) -eq 0 ] ||
    { echo "ws-bench: --files and --wake-files must be multiples of 10" >&2; exit 2; }
for k in $CHANGES; do
    [ $((k % DIRS)) -eq 0 ] && [ "$k" -le "$FILES" ] ||
        { echo "ws-bench: each change count must be a multiple of $DIRS, at most --files" >&2; exit 2; }
done

export LC_ALL=C
mkdir -p "$WORKDIR"
WD=$(mktemp -d "$WORKDIR/ws.XXXXXX")
trap 'rm -rf --one-file-system "$WD"' EXIT
FAILED=0
TAG=$$

say() { printf 'ws-bench: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }
fail() { say "FAILED: $*"; FAILED=1; }
out() { printf '%s=%s\n' "$1" "$2"; }

now_ns() { date +%s%N; }
us_since() { echo $((($(now_ns) - $1) / 1000)); }
abxd_cpu_ns() { awk '{ s += $1 } END { printf "%.0f", s }' /proc/"$PID"/task/*/schedstat; }
proc_kb() { awk -v k="$1:" '$1 == k { print $2 }' "/proc/$PID/status"; }
drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches; }
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

# req METHOD PATH [curl args]: the answer's body in $BODY (or $OUTF when
# set), its status in CODE, curl's time_total in T_US.
BODY=$WD/body
req() {
    local m=$1 p=$2 w
    shift 2
    w=$(curl -sS -o "${OUTF:-$BODY}" -w '%{http_code} %{time_total}' -X "$m" \
        -H "Authorization: Bearer $KEY" -H 'Expect:' "$@" "$URL$p") || { CODE=000; return 1; }
    CODE=${w%% *}
    T_US=$(awk -v t="${w#* }" 'BEGIN { printf "%.0f", t * 1e6 }')
}
# field NAME: a number from the JSON answer in $BODY
field() { sed -n "s/.*\"$1\":\([0-9.]*\).*/\1/p" "$BODY" | head -n 1; }
ms_to_us() { awk -v v="$1" 'BEGIN { if (v == "") print "-"; else printf "%.0f", v * 1000 }'; }

# exec_sh WS SCRIPT ARGS...: runs `sh -c SCRIPT sh ARGS` in the workspace,
# waits for it; T_US is the exec's client time. SCRIPT must hold no " or \.
exec_sh() {
    local ws=$1 script=$2 a argv
    shift 2
    case $script in *\"* | *\\*) die "exec_sh: script with a quote or backslash" ;; esac
    argv="\"sh\",\"-c\",\"$script\",\"sh\""
    for a in "$@"; do argv="$argv,\"$a\""; done
    req POST "/v1/workspaces/$ws/exec" -H 'Content-Type: application/json' \
        -d "{\"argv\":[$argv],\"timeout_s\":1800}" || return 1
    [ "$CODE" = 200 ] && tail -n 1 "$BODY" | grep -q '"exit_code":0[,}]'
}
exec_true() {
    req POST "/v1/workspaces/$1/exec" -H 'Content-Type: application/json' -d '{"argv":["true"]}' &&
        [ "$CODE" = 200 ] && tail -n 1 "$BODY" | grep -q '"exit_code":0[,}]'
}

# summary NAME V...: NAME.p50 (the median; the mean of the middle two for an
# even count), NAME.min, NAME.max, NAME.n and NAME.all; "-" values are skipped.
summary() {
    local name=$1
    shift
    printf '%s\n' "$@" | { grep -v '^-$' || true; } | sort -n | awk -v n="$name" '
        { v[NR] = $1 }
        END {
            if (NR == 0) { printf "%s.p50=-\n%s.n=0\n", n, n; exit }
            m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
            printf "%s.p50=%.0f\n%s.min=%s\n%s.max=%s\n%s.n=%d\n", n, m, n, v[1], n, v[NR], n, NR
        }'
    local IFS=,
    out "$name.all" "$*"
}

wait_pool() { # until abxd holds POOL warm sandboxes again (at most 10 s)
    local i v
    [ "$POOL" -gt 0 ] || return 0
    for ((i = 0; i < 200; i++)); do
        v=$(curl -sf -H "Authorization: Bearer $KEY" "$URL/metrics" |
            awk '$1 == "abx_pool_ready" { print $2 }') || true
        [ "${v:-0}" -ge "$POOL" ] 2>/dev/null && return 0
        sleep 0.05
    done
    say "the warm pool did not refill to $POOL in 10 s"
}

ws_create() {
    req POST /v1/workspaces -H 'Content-Type: application/json' -d "{\"id\":\"$1\"}" &&
        [ "$CODE" = 201 ] || die "cannot create workspace $1: $CODE $(cat "$BODY" 2>/dev/null)"
}
ws_delete() {
    req DELETE "/v1/workspaces/$1" && [ "$CODE" = 204 ] || fail "DELETE workspace $1: $CODE $(cat "$BODY")"
}

# The trees. Each script runs in the sandbox (cwd /home/user) and on the host
# (cwd the host tree), so both sides have the same shape and, for the small
# files, the same bytes. $1 directories; small: $2 files each "file dN/fI";
# change: the first $2 files of each directory get "rev $3" appended;
# big: $2 files of $3 random bytes each.
SMALL_TREE='d=0; while [ $d -lt $1 ]; do mkdir -p d$d || exit 1; i=0; while [ $i -lt $2 ]; do echo file d$d/f$i >d$d/f$i || exit 1; i=$((i+1)); done; d=$((d+1)); done'
CHANGE='d=0; while [ $d -lt $1 ]; do i=0; while [ $i -lt $2 ]; do echo rev $3 >>d$d/f$i || exit 1; i=$((i+1)); done; d=$((d+1)); done'
BIG_TREE='d=0; while [ $d -lt $1 ]; do mkdir -p w$d || exit 1; head -c $(($2 * $3)) /dev/urandom | split -a 3 -d -b $3 - w$d/f || exit 1; d=$((d+1)); done'

say "load $(loadavg); abxd pid $PID on $URL"
out ws.load_start "$(loadavg)"

# --- 1. mirror of FILES small files ---

PER=$((FILES / DIRS))
WSM=bench-mirror-$TAG
say "1. mirror: $FILES files in $DIRS directories; changes 0 $CHANGES, $REPS flushes each"
ws_create "$WSM"
exec_sh "$WSM" "$SMALL_TREE" "$DIRS" "$PER" || die "cannot populate $WSM: $CODE $(tail -n 2 "$BODY")"
out ws_mirror.populate_us "$T_US"
out ws_mirror.files "$FILES"
out ws_mirror.dirs "$DIRS"
out ws_mirror.changes "$CHANGES"
out ws_mirror.reps "$REPS"
echo 5 >"/proc/$PID/clear_refs"
RSS0=$(proc_kb VmRSS)
c0=$(abxd_cpu_ns)
req POST "/v1/workspaces/$WSM/flush" && [ "$CODE" = 200 ] || die "initial flush: $CODE $(cat "$BODY")"
c1=$(abxd_cpu_ns)
out ws_mirror.initial.client_us "$T_US"
out ws_mirror.initial.server_us "$(ms_to_us "$(field duration_ms)")"
out ws_mirror.initial.cpu_us $(((c1 - c0) / 1000))
out ws_mirror.initial.copied "$(field files)"
out ws_mirror.initial.bytes "$(field bytes)"
[ "$(field files)" = "$FILES" ] || fail "initial mirror copied $(field files) files, not $FILES"
say "initial mirror: $(cat "$BODY")"

for k in 0 $CHANGES; do
    srv=() cli=() cpu=()
    for ((r = 1; r <= REPS; r++)); do
        if [ "$k" -gt 0 ]; then
            exec_sh "$WSM" "$CHANGE" "$DIRS" $((k / DIRS)) "c$k.$r" ||
                die "cannot change $k files: $CODE $(tail -n 2 "$BODY")"
        fi
        c0=$(abxd_cpu_ns)
        req POST "/v1/workspaces/$WSM/flush" && [ "$CODE" = 200 ] || die "flush: $CODE $(cat "$BODY")"
        c1=$(abxd_cpu_ns)
        [ "$(field files)" = "$k" ] ||
            fail "flush after $k changes copied $(field files) files: $(cat "$BODY")"
        srv+=("$(ms_to_us "$(field duration_ms)")") cli+=("$T_US") cpu+=($(((c1 - c0) / 1000)))
    done
    say "flush with $k changed: server ${srv[*]} µs, client ${cli[*]} µs"
    summary "ws_mirror.c$k.server_us" "${srv[@]}"
    summary "ws_mirror.c$k.client_us" "${cli[@]}"
    summary "ws_mirror.c$k.cpu_us" "${cpu[@]}"
done
out ws_mirror.abxd_rss_before_kib "$RSS0"
out ws_mirror.abxd_peak_rss_kib "$(proc_kb VmHWM)"

say "1. host baselines on an identical tree in $WD"
HT=$WD/tree
mkdir "$HT"
(cd "$HT" && sh -c "$SMALL_TREE" sh "$DIRS" "$PER") || die "cannot build the host tree"
sync
# the initial mirror's counterpart: copy every file and fsync each
t0=$(now_ns)
cp -a "$HT" "$WD/copy" && (cd "$WD/copy" && find . -type f -exec sync -- {} +)
out ws_base.initial_us "$(us_since "$t0")"
rm -rf "$WD/copy"
# the no-change mirror's floor: walk the tree and stat every entry (the
# fields of a version stamp), one process
walk=()
for ((r = 1; r <= REPS; r++)); do
    t0=$(now_ns)
    find "$HT" -printf '%i %s %T@ %C@ %m %p\n' >/dev/null
    walk+=("$(us_since "$t0")")
done
summary ws_base.walk_us "${walk[@]}"
for k in $CHANGES; do
    list=()
    for ((d = 0; d < DIRS; d++)); do
        for ((i = 0; i < k / DIRS; i++)); do list+=("d$d/f$i"); done
    done
    t=()
    for ((r = 1; r <= REPS; r++)); do
        (cd "$HT" && sh -c "$CHANGE" sh "$DIRS" $((k / DIRS)) "c$k.$r") || die "cannot change the host tree"
        rm -rf "$WD/copy"
        mkdir "$WD/copy"
        sync
        t0=$(now_ns)
        (cd "$HT" && cp --parents -- "${list[@]}" "$WD/copy/") && (cd "$WD/copy" && sync -- "${list[@]}")
        t+=("$(us_since "$t0")")
    done
    rm -rf "$WD/copy"
    summary "ws_base.c$k.copy_us" "${t[@]}"
done
rm -rf "$HT"

# --- 2. wake of a cold workspace of WAKE_FILES files, WAKE_MIB MiB ---

WPER=$((WAKE_FILES / WAKE_DIRS))
WSIZE=$((WAKE_MIB * 1048576 / WAKE_FILES))
WSW=bench-wake-$TAG
say "2. wake: $WAKE_FILES files of $WSIZE bytes, $WAKE_REPS wakes and cp -a each, warm and dropped page cache"
ws_create "$WSW"
exec_sh "$WSW" "$BIG_TREE" "$WAKE_DIRS" "$WPER" "$WSIZE" || die "cannot populate $WSW: $CODE $(tail -n 2 "$BODY")"
req POST "/v1/workspaces/$WSW/flush" && [ "$CODE" = 200 ] || die "flush of $WSW: $CODE $(cat "$BODY")"
[ "$(field files)" = "$WAKE_FILES" ] || fail "the mirror of $WSW copied $(field files) files"
out ws_wake.files "$WAKE_FILES"
out ws_wake.dirs "$WAKE_DIRS"
out ws_wake.file_bytes "$WSIZE"
out ws_wake.reps "$WAKE_REPS"
out ws_wake.bytes "$(field bytes)"
out ws_wake.mirror.client_us "$T_US"
out ws_wake.mirror.server_us "$(ms_to_us "$(field duration_ms)")"
req POST "/v1/workspaces/$WSW/close" && [ "$CODE" = 200 ] || die "close of $WSW: $CODE $(cat "$BODY")"
WT=$WD/wsrc
mkdir "$WT"
(cd "$WT" && sh -c "$BIG_TREE" sh "$WAKE_DIRS" "$WPER" "$WSIZE") || die "cannot build the host tree"
[ "$(du -sb "$WT" | cut -f1)" -ge $((WAKE_FILES * WSIZE)) ] || die "the host tree is short"

restored_ms() { # the restore time of the last wake of $WSW from abxd's debug log
    [ -n "$LOG" ] && [ -r "$LOG" ] || { echo -; return; }
    sed -n "s/.*workspace=$WSW restored [0-9]* files ([0-9]* bytes) in \([0-9.]*\) ms.*/\1/p" "$LOG" |
        tail -n 1 | grep . || echo -
}
restored_count() {
    if [ -n "$LOG" ] && [ -r "$LOG" ]; then grep -c "workspace=$WSW restored" "$LOG" || true; else echo 0; fi
}

# Each timed wake and each timed cp starts the same way: the tree that the
# previous round made on that side (the closed sandbox's, the last copy) was
# deleted a little earlier - abxd's close deletes the sandbox, we delete the
# copy right after it - and then come `sync` (or drop_caches) and a 1 s
# pause. The pause matters on ext4 without a journal: it does not reuse an
# inode freed within the last minute, but one freed in the current second
# it does, so a cp right after an rm would find its old inodes ready.
prepare() { # prepare MODE
    if [ "$1" = dropped ]; then drop_caches; else sync; fi
    sleep 1
}
TIMEFORMAT='%3U %3S'
cp -a "$WT" "$WD/wdst" # so that the first round, too, deletes a copy
for mode in warm dropped; do
    wake=() restore=() wcpu=() warm=() closec=() closes=() closed=() cp=() cpcpu=()
    for ((r = 1; r <= WAKE_REPS; r++)); do
        wait_pool
        prepare "$mode"
        n0=$(restored_count)
        c0=$(abxd_cpu_ns)
        exec_true "$WSW" || die "wake of $WSW: $CODE $(tail -n 2 "$BODY")"
        c1=$(abxd_cpu_ns)
        wake+=("$T_US") wcpu+=($(((c1 - c0) / 1000)))
        if [ "$(restored_count)" -gt "$n0" ]; then
            restore+=("$(ms_to_us "$(restored_ms)")")
        else
            restore+=(-)
            [ -z "$LOG" ] || fail "no restore logged for wake $r ($mode); did the exec wake it?"
        fi
        exec_true "$WSW" || die "warm exec in $WSW: $CODE $(tail -n 2 "$BODY")"
        warm+=("$T_US")
        req POST "/v1/workspaces/$WSW/close" && [ "$CODE" = 200 ] || die "close of $WSW: $CODE $(cat "$BODY")"
        closec+=("$T_US") closes+=("$(ms_to_us "$(field duration_ms)")")
        [ "$(field files)" = 0 ] || fail "close after a wake copied $(field files) files: $(cat "$BODY")"
        closed+=("$(field dirs)")
        # the baseline, in the same conditions
        rm -rf "$WD/wdst"
        prepare "$mode"
        t0=$(now_ns)
        { time cp -a "$WT" "$WD/wdst"; } 2>"$WD/cptime"
        cp+=("$(us_since "$t0")")
        cpcpu+=("$(awk '{ printf "%.0f", ($1 + $2) * 1e6 }' "$WD/cptime")")
    done
    say "wake ($mode cache): ${wake[*]} µs; cp -a: ${cp[*]} µs"
    summary "ws_wake.$mode.wake_us" "${wake[@]}"
    summary "ws_wake.$mode.restore_us" "${restore[@]}"
    summary "ws_wake.$mode.wake_cpu_us" "${wcpu[@]}"
    summary "ws_wake.$mode.warm_exec_us" "${warm[@]}"
    summary "ws_wake.$mode.close_us" "${closec[@]}"
    summary "ws_wake.$mode.close_server_us" "${closes[@]}"
    summary "ws_wake.$mode.close_dirs" "${closed[@]}"
    summary "ws_wake.$mode.cp_us" "${cp[@]}"
    summary "ws_wake.$mode.cp_cpu_us" "${cpcpu[@]}"
done
rm -rf "$WT" "$WD/wdst"

# --- 3. store throughput: PUT and GET to a cold workspace ---

WSS=bench-store-$TAG
say "3. store: PUT and GET of $SMALL_MIB MiB and $BIG_MIB MiB to a cold workspace"
ws_create "$WSS"
for mib in "$SMALL_MIB" "$BIG_MIB"; do
    head -c $((mib * 1048576)) /dev/urandom >"$WD/src.bin"
    sync
    out "ws_put_$mib.abxd_rss_before_kib" "$(proc_kb VmRSS)"
    echo 5 >"/proc/$PID/clear_refs"
    if req PUT "/v1/workspaces/$WSS/files/big" -T "$WD/src.bin" && { [ "$CODE" = 201 ] || [ "$CODE" = 200 ]; }; then
        out "ws_put_$mib.abxd_peak_rss_kib" "$(proc_kb VmHWM)"
        out "ws_put_$mib.us" "$T_US"
        out "ws_put_$mib.mib_per_s" "$(awk -v m="$mib" -v t="$T_US" 'BEGIN { printf "%.1f", m / (t / 1e6) }')"
    else
        fail "PUT of $mib MiB: $CODE $(cat "$BODY")"
    fi
    out "ws_get_$mib.abxd_rss_before_kib" "$(proc_kb VmRSS)"
    echo 5 >"/proc/$PID/clear_refs"
    # into /dev/null, so that the client's own disk writes do not set the pace
    if OUTF=/dev/null req GET "/v1/workspaces/$WSS/files/big" && [ "$CODE" = 200 ]; then
        out "ws_get_$mib.abxd_peak_rss_kib" "$(proc_kb VmHWM)"
        out "ws_get_$mib.us" "$T_US"
        out "ws_get_$mib.mib_per_s" "$(awk -v m="$mib" -v t="$T_US" 'BEGIN { printf "%.1f", m / (t / 1e6) }')"
        # untimed: the same GET again, compared byte for byte
        curl -sSf -H "Authorization: Bearer $KEY" "$URL/v1/workspaces/$WSS/files/big" |
            cmp -s - "$WD/src.bin" || fail "the $mib MiB file came back different"
    else
        fail "GET of $mib MiB: $CODE"
    fi
    # the baseline: the same bytes written to a file on the same disk and fsynced
    sync
    t0=$(now_ns)
    dd if="$WD/src.bin" of="$WD/dd.bin" bs=1M conv=fsync status=none
    dd_us=$(us_since "$t0")
    out "ws_dd_$mib.us" "$dd_us"
    out "ws_dd_$mib.mib_per_s" "$(awk -v m="$mib" -v t="$dd_us" 'BEGIN { printf "%.1f", m / (t / 1e6) }')"
    rm -f "$WD/src.bin" "$WD/dd.bin"
done

# --- the end: delete what we made, collect the blobs ---

ws_delete "$WSS"
ws_delete "$WSW"
ws_delete "$WSM"
req POST /v1/store/gc && [ "$CODE" = 200 ] || fail "store gc: $CODE $(cat "$BODY")"
out ws.load_end "$(loadavg)"
say "load $(loadavg)"
exit "$FAILED"
