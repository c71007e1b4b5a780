#!/usr/bin/env bash
# Installs libsectorcrypt under PREFIX: lib/libsectorcrypt.so, lib/libsectorcrypt.a,
# include/sectorcrypt.h and lib/pkgconfig/sectorcrypt.pc.
#
#   scripts/install-lib.sh PREFIX
#
# builds the library in release mode first, with `cargo rustc ... -- --print
# native-static-libs`, which also names the system libraries the static library needs (the
# pc file's Libs.private). With SECTORCRYPT_PREBUILT=DIR it installs the libraries already
# in DIR instead (the tests pass target/debug) and takes Libs.private from
# SECTORCRYPT_LIBS_PRIVATE.
set -euo pipefail
if [ $# -ne 1 ]; then
    echo "usage: scripts/install-lib.sh PREFIX" >&2
    exit 2
fi
prefix=$(realpath -m "$1")
root=$(cd "$(dirname "$0")/.." && pwd)

if [ -n "${SECTORCRYPT_PREBUILT:-}" ]; then
    from=$SECTORCRYPT_PREBUILT
    libs_private=${SECTORCRYPT_LIBS_PRIVATE:?with SECTORCRYPT_PREBUILT, set SECTORCRYPT_LIBS_PRIVATE (the system libraries of the static library)}
else
    cd "$root"
    log=$(mktemp)
    trap 'rm -f "$log"' EXIT
    cargo rustc --release -p sectorcrypt-capi --lib -- --print native-static-libs 2>"$log" || {
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
install -d "$prefix/lib/pkgconfig" "$prefix/include"
install -m 755 "$from/libsectorcrypt.so" "$prefix/lib/"
install -m 644 "$from/libsectorcrypt.a" "$prefix/lib/"
install -m 644 "$root/crates/capi/include/sectorcrypt.h" "$prefix/include/"
sed -e "s|@PREFIX@|$prefix|" -e "s|@VERSION@|$version|" -e "s|@LIBS_PRIVATE@|$libs_private|" \
    "$root/crates/capi/sectorcrypt.pc.in" >"$prefix/lib/pkgconfig/sectorcrypt.pc"
echo "installed libsectorcrypt $version under $prefix"
