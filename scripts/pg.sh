#!/bin/bash
# pg.sh - a throwaway PostgreSQL server for tests.
#
#   scripts/pg.sh start DIR   initialises a cluster in DIR, starts it on
#                             127.0.0.1 on a free port with a database "abx",
#                             and prints postgres://postgres@127.0.0.1:PORT/abx
#   scripts/pg.sh stop DIR    stops it and removes DIR
#
# For tests only: authentication is "trust", so any local user can connect as
# the superuser. Nothing is installed or changed outside DIR: the socket lives
# in DIR (or there is none when DIR's path is too long for one), logs in DIR.
#
# Needs the Debian "postgresql" package (PostgreSQL 15; PG_BINDIR=/path/bin
# picks another build). The server refuses to run as root, so as root it runs
# as the "postgres" user the package creates and DIR is owned by that user.
#
# Idempotent: start on a running DIR prints its URL again; start on a DIR left
# behind by a crash or reboot starts afresh; stop on a missing DIR does
# nothing. A failed start leaves nothing behind. DIR must not exist, be empty,
# or be one this script made (it holds a .abx-pg marker): nothing else is
# ever deleted.
set -euo pipefail

# The caller's libpq settings must not redirect our tools to another server.
unset PGHOST PGHOSTADDR PGPORT PGUSER PGDATABASE PGSERVICE PGSERVICEFILE PGOPTIONS \
    PGPASSWORD PGPASSFILE PGSSLMODE PGDATA PGTZ PGCLIENTENCODING PGCONNECT_TIMEOUT

MARKER=.abx-pg
DBNAME=abx

die() {
    echo "pg.sh: $*" >&2
    exit 1
}

usage() {
    echo "usage: $0 start DIR | stop DIR" >&2
    exit 2
}

find_bindir() {
    if [ -n "${PG_BINDIR:-}" ]; then
        [ -x "$PG_BINDIR/initdb" ] || die "PG_BINDIR='$PG_BINDIR' has no initdb"
        echo "$PG_BINDIR"
        return
    fi
    if [ -x /usr/lib/postgresql/15/bin/initdb ]; then
        echo /usr/lib/postgresql/15/bin
        return
    fi
    local d
    d=$(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
    if [ -x "$d/initdb" ]; then
        echo "$d"
        return
    fi
    die "PostgreSQL server programs not found: install the Debian 'postgresql' package"
}

# Runs a command as the user the server runs as, with a neutral cwd and HOME.
as_pg() {
    if [ "$(id -u)" -eq 0 ]; then
        if command -v runuser >/dev/null 2>&1; then
            (cd / && runuser -u postgres -- env HOME="$dir" "$@")
        else
            (cd / && setpriv --reuid=postgres --regid=postgres --init-groups \
                env HOME="$dir" "$@")
        fi
    else
        (cd / && env HOME="$dir" "$@")
    fi
}

# Whether pid is a live process. A zombie is not: PID 1 in a container may
# never reap a server that died, and pg_ctl status would take it for alive.
alive() {
    local st
    [[ "$1" =~ ^[0-9]+$ ]] || return 1
    st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d ' ' -f 1) || return 1
    [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

postmaster_pid() {
    head -n 1 "$dir/data/postmaster.pid" 2>/dev/null || true
}

# Whether DIR's server is up and answering (postmaster.pid line 4: the port).
running() {
    local port
    [ -f "$dir/data/postmaster.pid" ] && alive "$(postmaster_pid)" || return 1
    port=$(sed -n 4p "$dir/data/postmaster.pid")
    [[ "$port" =~ ^[0-9]+$ ]] || return 1
    as_pg "$bindir/pg_isready" -q -h 127.0.0.1 -p "$port" -t 5 >/dev/null 2>&1
}

# Listening TCP ports (hex), from /proc: no ss or netstat on a minimal system.
busy_ports() {
    cat /proc/net/tcp /proc/net/tcp6 2>/dev/null |
        awk 'NR > 1 && $4 == "0A" { split($2, a, ":"); print a[2] }'
}

pick_port() {
    local busy p hex
    busy=$(busy_ports || true)
    for _ in $(seq 1 200); do
        p=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
        hex=$(printf '%04X' "$p")
        if ! grep -qx "$hex" <<<"$busy"; then
            echo "$p"
            return
        fi
    done
    die "no free TCP port found"
}

# Stops the server (fast, then immediate, then the postmaster by its pid).
stop_server() {
    local pid
    pid=$(postmaster_pid)
    alive "$pid" || return 0
    as_pg "$bindir/pg_ctl" -D "$dir/data" -m fast -w -t 30 -s stop >/dev/null 2>&1 && return 0
    as_pg "$bindir/pg_ctl" -D "$dir/data" -m immediate -w -t 30 -s stop >/dev/null 2>&1 &&
        return 0
    kill -KILL "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do
        alive "$pid" || return 0
        sleep 0.1
    done
    return 1
}

# Empties (created_dir=0) or removes (1) DIR after a failed start.
cleanup_failed_start() {
    local rc=$?
    [ "$rc" -eq 0 ] && return 0
    stop_server || true
    if [ "$created_dir" -eq 1 ]; then
        rm -rf -- "$dir"
    else
        find "$dir" -mindepth 1 -delete 2>/dev/null || true
    fi
    exit "$rc"
}

cmd_start() {
    if [ -f "$dir/$MARKER" ]; then
        if running && [ -s "$dir/url" ]; then
            cat "$dir/url"
            return 0
        fi
        echo "pg.sh: '$dir' holds a server that is not running; starting afresh" >&2
        stop_server || true
        rm -rf -- "$dir"
    fi

    created_dir=0
    if [ -e "$dir" ]; then
        [ -d "$dir" ] || die "'$dir' exists and is not a directory"
        [ -z "$(ls -A -- "$dir")" ] || die "'$dir' is not empty and was not made by pg.sh"
    else
        mkdir -p -- "$dir" || die "cannot create '$dir'"
        created_dir=1
    fi
    trap cleanup_failed_start EXIT
    touch "$dir/$MARKER"
    chmod 700 "$dir"
    if [ "$(id -u)" -eq 0 ]; then
        getent passwd postgres >/dev/null ||
            die "no 'postgres' user: install the Debian 'postgresql' package"
        chown postgres: "$dir" "$dir/$MARKER"
        as_pg test -w "$dir" ||
            die "user 'postgres' cannot write '$dir' (is a parent directory private?)"
    fi

    if ! as_pg "$bindir/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --locale=C \
        --no-sync --no-instructions >"$dir/initdb.log" 2>&1; then
        cat "$dir/initdb.log" >&2
        die "initdb failed"
    fi
    echo "include 'abx.conf'" >>"$dir/data/postgresql.conf"

    # The socket goes in DIR, unless its path would pass the 107-byte limit.
    local sock="$dir" port="" log="$dir/server.log"
    if [ $((${#dir} + 22)) -gt 107 ]; then
        sock=""
    fi
    for _ in $(seq 1 10); do
        port=$(pick_port)
        {
            echo "listen_addresses = '127.0.0.1'"
            echo "port = $port"
            echo "unix_socket_directories = '${sock//\'/\'\'}'"
            echo "max_connections = 200"
            echo "shared_buffers = 32MB"
        } >"$dir/data/abx.conf"
        : >"$log"
        if [ "$(id -u)" -eq 0 ]; then
            chown postgres: "$dir/data/abx.conf" "$log"
        fi
        if as_pg "$bindir/pg_ctl" -D "$dir/data" -l "$log" -w -t 60 -s start >/dev/null 2>&1
        then
            break
        fi
        # Someone took the port between the check and the bind: try another.
        if grep -q -e 'could not bind' -e 'Address already in use' "$log"; then
            stop_server || true
            port=""
            continue
        fi
        tail -n 20 "$log" >&2
        die "the server did not start (log: $log)"
    done
    [ -n "$port" ] || die "no free port found for the server"

    if ! as_pg "$bindir/createdb" -h 127.0.0.1 -p "$port" -U postgres "$DBNAME" \
        >>"$log" 2>&1; then
        tail -n 20 "$log" >&2
        die "cannot create the database '$DBNAME'"
    fi
    local url="postgres://postgres@127.0.0.1:$port/$DBNAME"
    echo "$url" >"$dir/url"
    trap - EXIT
    echo "$url"
}

cmd_stop() {
    [ -e "$dir" ] || return 0
    [ -f "$dir/$MARKER" ] || die "'$dir' was not made by pg.sh; not removing it"
    stop_server || die "the server in '$dir' does not stop"
    rm -rf -- "$dir"
}

[ $# -eq 2 ] || usage
[ -n "$2" ] || usage
dir=$(realpath -m -- "$2")
[ "$dir" != / ] || die "refusing to use '/'"
created_dir=0
bindir=$(find_bindir)

case "$1" in
start) cmd_start ;;
stop) cmd_stop ;;
*) usage ;;
esac
