#!/usr/bin/env bash
# Installs libsectorcrypt under PREFIX:
#   lib/libsectorcrypt.so.N.M.P     the shared library (N: the ABI major of its SONAME,
#                                   M.P: the minor and patch of the workspace version)
#   lib/libsectorcrypt.so.N         -> libsectorcrypt.so.N.M.P (the SONAME: programs need it)
#   lib/libsectorcrypt.so           -> libsectorcrypt.so.N (what `cc -lsectorcrypt` finds)
#   lib/libsectorcrypt.a, include/sectorcrypt.h, lib/pkgconfig/sectorcrypt.pc
#
#   scripts/install-lib.sh PREFIX
#
# builds the library in release mode first, with `cargo rustc ... -- --print
# native-static-libs`, which also names the system libraries the static library needs (the
# pc file's Libs.private: -lpthread, -ldl, -lm and the like, and with the `rbd` feature
# -lrbd and -lrados). SECTORCRYPT_FEATURES=rbd builds the library with `rbd:` images
# (librbd-dev and librados-dev installed: scripts/deps.sh ceph). With SECTORCRYPT_PREBUILT=DIR it installs the libraries already
# in DIR instead (the tests pass target/debug) and takes Libs.private from
# SECTORCRYPT_LIBS_PRIVATE.
#
# N is read from the library itself (`readelf -d`, binutils): crates/capi/build.rs sets the
# SONAME. Installing over an older install works: every file and link is put in place by a
# rename (a running program keeps the library it mapped), an older install's plain
# lib/libsectorcrypt.so becomes the link, and other releases of the same ABI
# (lib/libsectorcrypt.so.N.*) are removed, since ldconfig would point the SONAME at the
# newest of them; libraries of other ABIs stay for the programs linked to them. Where
# PREFIX/lib is in the loader's default path (/usr/local/lib), run `ldconfig` afterwards.
set -euo pipefail
if [ $# -ne 1 ]; then
    echo "usage: scripts/install-lib.sh PREFIX" >&2
    exit 2
fi
prefix=$(realpath -m "$1")
root=$(cd "$(dirname "$0")/.." && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

if [ -n "${SECTORCRYPT_PREBUILT:-}" ]; then
    from=$SECTORCRYPT_PREBUILT
    libs_private=${SECTORCRYPT_LIBS_PRIVATE:?with SECTORCRYPT_PREBUILT, set SECTORCRYPT_LIBS_PRIVATE (the system libraries of the static library)}
else
    cd "$root"
    log=$scratch/log
    features=()
    if [ -n "${SECTORCRYPT_FEATURES:-}" ]; then
        features=(--features "$SECTORCRYPT_FEATURES")
    fi
    cargo rustc --release -p sectorcrypt-capi --lib "${features[@]}" -- \
        --print native-static-libs 2>"$log" || {
        cat "$log" >&2
        exit 1
    }
    libs_private=$(sed -n 's/^note: native-static-libs: //p' "$log" | tail -n 1)
    if [ -z "$libs_private" ]; then
        echo "cargo rustc printed no native-static-libs line" >&2
        exit 1
    fi
    target=$(cargo metadata --format-version 1 --no-deps |
        sed 's/.*"target_directory":"\([^"]*\)".*/\1/')
    from=$target/release
fi

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/Cargo.toml" | head -n 1)
if ! [[ $version =~ ^[0-9]+\.([0-9]+)\.([0-9]+) ]]; then
    echo "no workspace version in $root/Cargo.toml (found '$version')" >&2
    exit 1
fi
minor_patch=${BASH_REMATCH[1]}.${BASH_REMATCH[2]}
if ! command -v readelf >/dev/null; then
    echo "readelf (binutils) is needed to read the library's SONAME" >&2
    exit 1
fi
soname=$(readelf -d "$from/libsectorcrypt.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]$/\1/p')
if ! [[ $soname =~ ^libsectorcrypt\.so\.([0-9]+)$ ]]; then
    echo "$from/libsectorcrypt.so has no SONAME libsectorcrypt.so.N (found '$soname')" >&2
    exit 1
fi
real=$soname.$minor_patch
lib=$prefix/lib

# put MODE SRC DEST: SRC's copy becomes DEST by a rename in DEST's folder.
put() {
    local tmp
    tmp=$(mktemp "$(dirname "$3")/.install.XXXXXX")
    if ! install -m "$1" "$2" "$tmp" || ! mv -fT "$tmp" "$3"; then
        rm -f "$tmp"
        echo "cannot install $3" >&2
        exit 1
    fi
}
# link TARGET NAME: lib/NAME becomes a symbolic link to TARGET by a rename.
link() {
    local tmp=$lib/.install.$2.$$
    if ! ln -sfn "$1" "$tmp" || ! mv -fT "$tmp" "$lib/$2"; then
        rm -f "$tmp"
        echo "cannot link $lib/$2 to $1" >&2
        exit 1
    fi
}

install -d "$lib/pkgconfig" "$prefix/include"
put 755 "$from/libsectorcrypt.so" "$lib/$real"
link "$real" "$soname"
link "$soname" libsectorcrypt.so
for old in "$lib/$soname".*; do
    if [ "$old" != "$lib/$real" ] && { [ -e "$old" ] || [ -L "$old" ]; }; then
        rm -f "$old"
    fi
done
put 644 "$from/libsectorcrypt.a" "$lib/libsectorcrypt.a"
put 644 "$root/crates/capi/include/sectorcrypt.h" "$prefix/include/sectorcrypt.h"
sed -e "s|@PREFIX@|$prefix|" -e "s|@VERSION@|$version|" -e "s|@LIBS_PRIVATE@|$libs_private|" \
    "$root/crates/capi/sectorcrypt.pc.in" >"$scratch/sectorcrypt.pc"
put 644 "$scratch/sectorcrypt.pc" "$lib/pkgconfig/sectorcrypt.pc"
echo "installed libsectorcrypt $version ($real, SONAME $soname) under $prefix"
