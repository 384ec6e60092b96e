#!/usr/bin/env bash
# Installs Debian's Nsight Systems (non-free `nsight-systems`, 2022.4.2 on bookworm) into a cache
# folder, without touching /etc/apt or the system: the CI's nsys for CPU-only (OS-runtime) tracing.
#
#   scripts/install_nsys.sh            # prints the path of the nsys it installed (or found cached)
#
# Idempotent: a complete install is reused. Cache: ${TRACER_CACHE:-~/.cache/dl-tracer}/nsys
# (tracer/measure/tracing/nsys.py looks there). Mirror: the first Debian mirror in /etc/apt/sources.list*,
# or $NSYS_DEB_MIRROR. Suite: $NSYS_DEB_SUITE, else the system's codename.
set -euo pipefail

CACHE="${TRACER_CACHE:-$HOME/.cache/dl-tracer}/nsys"
ROOT="$CACHE/root"
APT="$CACHE/apt"
DONE="$CACHE/.installed"
PACKAGES=(nsight-systems nsight-systems-target libssh-4)

find_nsys() {
    local f
    for f in "$ROOT"/usr/lib/nsight-systems/host-linux-x64/nsys "$ROOT"/usr/lib/nsight-systems/bin/nsys; do
        if [[ -x "$f" ]]; then echo "$f"; return 0; fi
    done
    return 1
}

if [[ -f "$DONE" ]] && nsys_bin=$(find_nsys) && "$nsys_bin" --version >/dev/null 2>&1; then
    echo "$nsys_bin"
    exit 0
fi

for tool in apt-get dpkg-deb; do
    command -v "$tool" >/dev/null || { echo "install_nsys: $tool is missing (this script needs Debian or Ubuntu)" >&2; exit 1; }
done

mirror="${NSYS_DEB_MIRROR:-}"
if [[ -z "$mirror" ]]; then
    # deb822 (`URIs: ...`) or one-line (`deb URI suite ...`) sources; the first plain Debian archive wins.
    mirror=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list 2>/dev/null \
        | sed -nE -e 's/^URIs:[[:space:]]*//p' -e 's/^deb[[:space:]]+(\[[^]]*\][[:space:]]+)?([^[:space:]]+).*/\2/p' \
        | tr ' ' '\n' | grep -E '/debian/?$' | head -n1 || true)
    if [[ -z "$mirror" ]]; then
        echo "install_nsys: no Debian archive found in /etc/apt/sources.list*: set NSYS_DEB_MIRROR=<archive URL> and run again" >&2
        exit 2
    fi
fi
suite="${NSYS_DEB_SUITE:-$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")}"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
signed=""
[[ -f "$keyring" ]] && signed="[signed-by=$keyring] "

mkdir -p "$APT/lists/partial" "$APT/cache/archives/partial" "$APT/sources.list.d" "$APT/debs"
echo "deb ${signed}${mirror%/} $suite main non-free" >"$APT/sources.list"
apt_opts=(
    -o "Dir::Etc::SourceList=$APT/sources.list"
    -o "Dir::Etc::SourceParts=$APT/sources.list.d"
    -o "Dir::State::Lists=$APT/lists"
    -o "Dir::Cache=$APT/cache"
    -o "Debug::NoLocking=1"
    -o "APT::Sandbox::User=$(id -un)"
)
echo "install_nsys: fetching ${PACKAGES[*]} from $mirror $suite non-free into $CACHE" >&2
apt-get "${apt_opts[@]}" -qq update >&2
(cd "$APT/debs" && rm -f ./*.deb && apt-get "${apt_opts[@]}" -qq download "${PACKAGES[@]}" >&2)

rm -rf "$ROOT.tmp"
mkdir -p "$ROOT.tmp"
for deb in "$APT"/debs/*.deb; do
    dpkg-deb -x "$deb" "$ROOT.tmp"
done
# nsys looks for its importer beside its own libraries' folder; Debian's split layout lacks this link.
link_dir="$ROOT.tmp/usr/lib/x86_64-linux-gnu/nsight-systems"
mkdir -p "$link_dir"
ln -sfn ../../nsight-systems/host-linux-x64 "$link_dir/host-linux-x64"
rm -rf "$ROOT"
mv "$ROOT.tmp" "$ROOT"
rm -f "$APT"/debs/*.deb

nsys_bin=$(find_nsys) || { echo "install_nsys: no nsys binary under $ROOT" >&2; exit 1; }
"$nsys_bin" --version >&2
date -u +%FT%TZ >"$DONE"
echo "$nsys_bin"
