#!/usr/bin/env bash
# CI: the Slurm installations the Slurm suite (tests/slurm) runs against.
#
# 1. Debian 12's Slurm 22.05 with slurmrestd, munge and the JWT plugin: the whole set is installed
#    when ANY part is missing (a host with slurmctld but no JWT plugin cannot run the suite).
# 2. Slurm 24.11 built from Debian 13's (trixie) source release, and
# 3. Slurm 26.05 built from Debian sid's source release, each into a prefix cached outside the
#    checkout and reused once an install there has completed: 24.11 under $HOME/.cache/
#    chronus-slurm/<version>, 26.05 under /var/cache/chronus-slurm/<version>, since from 25.05 on
#    the test cluster runs slurmctld and slurmrestd as unprivileged accounts (slurmrestd refuses
#    root), which cannot read root's home. --enable-multiple-slurmd lets several slurmd daemons
#    share one host name.
#
# The two builds are independent: trixie's deb-src is a system apt source (only trixie, and the
# download names it: slurm-wlm/trixie), sid's lives in a private apt configuration under the
# cache, so the system's apt never sees sid and neither download can pick the other's release.
#
# Prints the built prefixes, one a line, 24.11's then 26.05's, and nothing else on stdout
# (everything else goes to stderr), so `.ci/run` can hand each to CHRONUS_TEST_SLURM.
# Idempotent: a second run installs, downloads and builds nothing.
set -euo pipefail
shopt -s inherit_errexit  # a failure inside $(build ...) ends the script too
exec 3>&1 1>&2  # stdout is for the prefixes alone

CACHE_ROOT="${CHRONUS_SLURM_CACHE:-$HOME/.cache/chronus-slurm}"  # sources, apt state, 24.11
SHARED_ROOT="${CHRONUS_SLURM_SHARED_CACHE:-/var/cache/chronus-slurm}"  # 26.05: readable by all
DEBIAN_SET=(slurm-wlm slurmrestd munge slurm-wlm-jwt-plugin)
BUILD_DEPS=(dpkg-dev build-essential libjwt-dev libhttp-parser-dev libyaml-dev libjson-c-dev
            libmunge-dev)
TRIXIE_SRC=/etc/apt/sources.list.d/chronus-trixie-src.sources
SID_APT="$CACHE_ROOT/apt-sid"  # sid's deb-src, lists and cache: apt's own state is untouched

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

cached() {  # a completed build of series $2 under $1 (its install finished and left the stamp)
    local prefix
    for prefix in "$1/$2".*; do
        if [ -f "$prefix/.chronus-built" ] && [ -x "$prefix/sbin/slurmctld" ]; then
            echo "$prefix"
            return 0
        fi
    done
    return 1
}

trixie_source() {  # download Debian 13's slurm-wlm source into the current directory
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
    # The .dsc of a security update may 404; the orig tarball is all the build needs.
    apt-get source --download-only slurm-wlm/trixie || true
}

sid_source() {  # download Debian sid's slurm-wlm source into the current directory
    local opts=(-o Dir::Etc::sourcelist=/dev/null -o "Dir::Etc::sourceparts=$SID_APT/sources"
                -o "Dir::State::Lists=$SID_APT/lists" -o "Dir::Cache=$SID_APT/cache")
    mkdir -p "$SID_APT/sources" "$SID_APT/lists/partial" "$SID_APT/cache/archives/partial"
    cat >"$SID_APT/sources/sid-src.sources" <<'EOF'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: sid
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    apt-get "${opts[@]}" update -q
    apt-get "${opts[@]}" source --download-only slurm-wlm/sid || true
}

newest_tarball() {  # the newest slurm-wlm orig tarball of release series $1 here, if any
    ls -1 slurm-wlm_"$1".*.orig.tar.* 2>/dev/null | sort -V | tail -1 || true
}

# build SERIES ROOT FETCH CONFIGURE-FLAGS...: the cached build of SERIES (e.g. 24.11) under ROOT,
# or one made there from the orig tarball in $CACHE_ROOT/src or, without one, the one FETCH
# downloads. Prints its prefix on stdout (run it in $(...)), everything else on stderr.
build() {
    local series=$1 root=$2 fetch=$3 prefix tarball version srcdir
    shift 3
    if prefix=$(cached "$root" "$series"); then
        echo "$prefix"
        return 0
    fi
    install_missing "${BUILD_DEPS[@]}" >&2
    install -d -m 0755 "$root"
    mkdir -p "$CACHE_ROOT/src"
    cd "$CACHE_ROOT/src"
    tarball=$(newest_tarball "$series")
    if [ -z "$tarball" ]; then
        "$fetch" >&2
        tarball=$(newest_tarball "$series")
    fi
    if [ -z "$tarball" ]; then
        echo ".ci/slurm.sh: no slurm-wlm $series orig tarball from Debian ($fetch)" >&2
        return 1
    fi
    version=$(basename "$tarball" | sed -E 's/^slurm-wlm_([0-9.]+)\.orig.*/\1/')
    prefix="$root/$version"
    rm -rf "build-$series"
    mkdir "build-$series"
    tar -xf "$tarball" -C "build-$series"
    srcdir=$(find "build-$series" -maxdepth 1 -mindepth 1 -type d | head -1)
    cd "$srcdir"
    echo ".ci/slurm.sh: building Slurm $version into $prefix" >&2
    ./configure --prefix="$prefix" --enable-multiple-slurmd --enable-slurmrestd \
        --with-jwt --with-yaml --with-json "$@" >configure.log 2>&1 \
        || { tail -40 configure.log >&2; return 1; }
    nice -n 10 make -j"$(nproc)" >make.log 2>&1 || { tail -40 make.log >&2; return 1; }
    nice -n 10 make install >install.log 2>&1 || { tail -40 install.log >&2; return 1; }
    touch "$prefix/.chronus-built"
    cd "$CACHE_ROOT/src" && rm -rf "build-$series"
    echo "$prefix"
}

install_missing "${DEBIAN_SET[@]}"
# 24.11's configure calls libhttp_parser --with-http-parser, 26.05's --with-libhttp-parser (it
# also knows llhttp, which Debian 12 lacks); an option configure does not know is only a warning,
# so each gets its own spelling, and configure fails if it cannot find the library.
slurm_2411=$(build 24.11 "$CACHE_ROOT" trixie_source --with-http-parser)
slurm_2605=$(build 26.05 "$SHARED_ROOT" sid_source --with-libhttp-parser)
printf '%s\n' "$slurm_2411" "$slurm_2605" >&3
