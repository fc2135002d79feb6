#!/bin/sh
# Installs the Debian packages abx needs to build, test and benchmark, if any
# are missing, and the npm packages of the E2B compatibility tests (the real
# e2b SDK, pinned by tests/e2b/package-lock.json). Debian packages and npm
# only; nothing is downloaded any other way.
set -eu

PKGS="gcc make pkg-config meson ninja-build libmicrohttpd-dev libjansson-dev libmnl-dev libnftables-dev libnftnl-dev
libcmocka-dev libcurl4-openssl-dev libseccomp-dev libcap-ng-dev libssl-dev clang
libclang-rt-14-dev clang-format nodejs npm curl iproute2 procps util-linux
python3 bubblewrap hyperfine wrk libsqlite3-dev libpq-dev postgresql libyaml-dev libldns-dev btrfs-progs
zlib1g-dev python3-pip python3-numpy python3-pandas python3-scipy python3-matplotlib
bash coreutils git python-is-python3 ncurses-bin sudo"
# The last line is what E2B users expect inside a base sandbox (it shows the
# host's /usr): bash, coreutils, git, python, tput, sudo (curl is above).

cd "$(dirname "$0")/.."

# npm ci when the lockfile changed since the last install.
e2b_sdk() {
    if [ ! -f tests/e2b/node_modules/.package-lock.json ] ||
        [ tests/e2b/package-lock.json -nt tests/e2b/node_modules/.package-lock.json ]; then
        echo "deps: npm ci in tests/e2b (the E2B SDK)"
        (cd tests/e2b && npm ci --no-audit --no-fund --loglevel=error)
    fi
}

missing=""
for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done
# Node.js may come from elsewhere on the image; only ask apt when there is none.
if command -v node >/dev/null 2>&1; then
    missing=$(echo "$missing" | tr ' ' '\n' | grep -v -x -e nodejs -e npm | tr '\n' ' ')
fi
missing=$(echo "$missing" | xargs)
if [ -z "$missing" ]; then
    e2b_sdk
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "deps: missing Debian packages: $missing" >&2
    echo "deps: run 'sudo make deps' (or install them) and try again" >&2
    exit 1
fi
echo "deps: installing $missing"
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y --no-install-recommends $missing; then
    apt-get update
    apt-get install -y --no-install-recommends $missing
fi
e2b_sdk
