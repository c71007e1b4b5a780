#!/usr/bin/env bash
# Builds the bench's peer libraries (crates/peer, release, a workspace of its own) and runs
# `sectorcrypt bench` with them:
#
# - libsectorcrypt_peer_openssl4.so: the newest OpenSSL release, compiled from source by the
#   `openssl-src` crate (minutes, once; cargo keeps it);
# - libsectorcrypt_peer_awslc.so: AWS-LC, compiled from source by `aws-lc-sys`.
#
# Both go next to the sectorcrypt binaries (target/release and target/debug), where the
# bench finds them (SECTORCRYPT_PEER_OPENSSL4 / SECTORCRYPT_PEER_AWSLC name other paths).
#
#   bash scripts/bench-peers.sh                                # build, then the whole bench
#   bash scripts/bench-peers.sh --filter aes-256 --json        # arguments go to the bench
#   bash scripts/bench-peers.sh --build-only                   # build and install only
set -euo pipefail
cd "$(dirname "$0")/.."
build_only=false
if [ "${1:-}" = "--build-only" ]; then
    build_only=true
    shift
fi
tdir=$(bash scripts/target-dir.sh)
manifest=crates/peer/Cargo.toml
peer_tdir=$(cargo metadata --manifest-path "$manifest" --format-version 1 --no-deps |
    sed 's/.*"target_directory":"\([^"]*\)".*/\1/')
mkdir -p "$tdir/release" "$tdir/debug"
# One build per peer: the library's features select the implementation it wraps.
for peer in openssl4:openssl4 aws-lc:awslc; do
    feature=${peer%%:*}
    file=libsectorcrypt_peer_${peer##*:}.so
    nice -n 10 cargo build --release --locked --manifest-path "$manifest" --features "$feature"
    for dir in release debug; do
        # A copy, replaced whole: a running bench keeps the library it mapped.
        cp "$peer_tdir/release/libsectorcrypt_peer.so" "$tdir/$dir/$file.tmp"
        mv "$tdir/$dir/$file.tmp" "$tdir/$dir/$file"
    done
    echo "bench-peers: $tdir/release/$file"
done
if ! $build_only; then
    nice -n 10 cargo build --release -p sectorcrypt
    "$tdir/release/sectorcrypt" bench "$@"
fi
