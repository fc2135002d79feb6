#!/bin/sh
# Installs the Debian packages abx needs to build, test and benchmark, if any
# are missing. Debian packages only; nothing is downloaded any other way.
set -eu

PKGS="gcc make pkg-config meson ninja-build libmicrohttpd-dev libjansson-dev
libcmocka-dev libcurl4-openssl-dev libseccomp-dev libssl-dev clang
libclang-rt-14-dev clang-format nodejs npm curl iproute2 procps util-linux
python3 bubblewrap hyperfine wrk libsqlite3-dev libpq-dev postgresql libyaml-dev
zlib1g-dev python3-pip python3-numpy python3-pandas python3-scipy python3-matplotlib"

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
[ -z "$missing" ] && exit 0

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
