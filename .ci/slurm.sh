#!/usr/bin/env bash
# CI: the Slurm installations the Slurm suite (tests/slurm) runs against.
#
# 1. Debian 12's Slurm 22.05 with slurmrestd, munge and the JWT plugin: the whole set is installed
#    when ANY part is missing (a host with slurmctld but no JWT plugin cannot run the suite).
# 2. Slurm 24.11 built from Debian 13's source release into a prefix cached outside the checkout
#    (default $HOME/.cache/chronus-slurm/<version>), reused once an install there has completed.
#    --enable-multiple-slurmd lets several slurmd daemons share one host name.
#
# Prints the 24.11 prefix, and only that, on stdout (everything else goes to stderr), so `.ci/run`
# can hand it to CHRONUS_TEST_SLURM. Idempotent: a second run installs and builds nothing.
set -euo pipefail
exec 3>&1 1>&2  # stdout is for the prefix alone

CACHE_ROOT="${CHRONUS_SLURM_CACHE:-$HOME/.cache/chronus-slurm}"
DEBIAN_SET=(slurm-wlm slurmrestd munge slurm-wlm-jwt-plugin)
BUILD_DEPS=(dpkg-dev build-essential libjwt-dev libhttp-parser-dev libyaml-dev libjson-c-dev
            libmunge-dev)
TRIXIE_SRC=/etc/apt/sources.list.d/chronus-trixie-src.sources

missing() {  # the packages of "$@" that are not installed
    local p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$' \
            || echo "$p"
    done
}

install_missing() {
    local todo
    todo=$(missing "$@")
    if [ -n "$todo" ]; then
        apt-get update -q
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@"
    fi
}

install_missing "${DEBIAN_SET[@]}"

# Reuse any cached 24.11 build (complete: its install finished and left the stamp).
for prefix in "$CACHE_ROOT"/24.11.*; do
    if [ -f "$prefix/.chronus-built" ] && [ -x "$prefix/sbin/slurmctld" ]; then
        echo "$prefix" >&3
        exit 0
    fi
done

install_missing "${BUILD_DEPS[@]}"
if ! [ -f "$TRIXIE_SRC" ]; then
    cat >"$TRIXIE_SRC" <<'EOF'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: trixie
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
fi
apt-get update -q
work="$CACHE_ROOT/src"
mkdir -p "$work"
cd "$work"
# The .dsc of a security update may 404; the orig tarball is all the build needs.
apt-get source --download-only slurm-wlm || true
tarball=$(ls -1 slurm-wlm_24.11.*.orig.tar.* 2>/dev/null | sort -V | tail -1)
if [ -z "$tarball" ]; then
    echo ".ci/slurm.sh: no slurm-wlm 24.11 orig tarball from Debian 13's source release" >&2
    exit 1
fi
version=$(basename "$tarball" | sed -E 's/^slurm-wlm_([0-9.]+)\.orig.*/\1/')
prefix="$CACHE_ROOT/$version"
rm -rf build
mkdir build
tar -xf "$tarball" -C build
srcdir=$(find build -maxdepth 1 -mindepth 1 -type d | head -1)
cd "$srcdir"
./configure --prefix="$prefix" --enable-multiple-slurmd --enable-slurmrestd \
    --with-jwt --with-http-parser --with-yaml --with-json >configure.log
nice -n 10 make -j"$(nproc)" >make.log 2>&1 || { tail -40 make.log >&2; exit 1; }
nice -n 10 make install >install.log 2>&1 || { tail -40 install.log >&2; exit 1; }
touch "$prefix/.chronus-built"
cd "$work" && rm -rf build
echo "$prefix" >&3
