#!/usr/bin/env bash
# Runs every check: formatting, clippy, all tests (every backend this CPU has), and a
# benchmark smoke run. Installs missing Debian packages first.
set -euo pipefail
cd "$(dirname "$0")/.."
# SECTORCRYPT_STRICT=1 (set by .ci/run): a test that would skip for a missing tool or service
# fails instead, and so does a missing optional package group here.
strict() { [ "${SECTORCRYPT_STRICT:-}" = 1 ]; }
# Says what will not be tested for want of packages; under SECTORCRYPT_STRICT=1 stops here.
missing() {
    if strict; then
        echo "SECTORCRYPT_STRICT=1: $1" >&2
        exit 1
    fi
    echo "$1" >&2
}
bash scripts/deps.sh
# rsvg-convert: the `bench --svg` tests render the chart (they skip, saying so, without it).
bash scripts/deps.sh docs || missing "librsvg2-bin missing: the chart is not rendered"

cargo fmt --all -- --check
# The bench's peer libraries are a workspace of their own (crates/peer).
cargo fmt --manifest-path crates/peer/Cargo.toml -- --check
# Module imports point one way inside every crate (no cycle between top-level modules).
for src in crates/*/src; do bash scripts/module-deps.sh "$src" > /dev/null || {
    bash scripts/module-deps.sh "$src"
    exit 1
}; done
# ... and between the files of every crate (scripts/file-deps.sh: two files of one module
# that import each other, too; its named exceptions are printed, and fail nothing).
bash scripts/file-deps.sh
# Ceph RBD: the `rbd` feature links librbd-dev (scripts/deps.sh ceph); its tests start a
# single-node cluster (scripts/ceph.sh) and skip with the printed reason where it cannot
# (fail, under SECTORCRYPT_STRICT=1).
bash scripts/deps.sh ceph || missing "ceph packages missing: the rbd tests skip"
features=()
if dpkg-query -W -f='${Status}' librbd-dev 2>/dev/null | grep -q "install ok installed"; then
    features=(--features sectorcrypt/rbd,sectorcrypt-capi/rbd)
else
    missing "librbd-dev is not installed: the rbd feature and its tests are left out"
fi
cargo clippy --workspace --all-targets "${features[@]}" -- -D warnings
# The API documentation builds without a warning (broken or private links).
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --workspace "${features[@]}"
# The bench's peers (OpenSSL 4 built from source, AWS-LC), next to the binaries: the bench
# tests and the bench smoke below compare every AES case with them (a missing one fails
# under SECTORCRYPT_STRICT=1). From a fresh clone: under 4 minutes of CPU (8 minutes wall
# on a 2-core machine loaded by other builds); then nothing to do.
bash scripts/bench-peers.sh --build-only
# (The fuzz targets' corpora and regression inputs are replayed by the tests of
# sectorcrypt-fuzz.)
cargo test --workspace "${features[@]}" 2>&1
# The Python package: its wheel built by maturin into a venv, then its pytest tests.
bash crates/python/run-tests.sh
# A short fuzzing smoke of every target (stable toolchain; scripts/fuzz.sh installs
# cargo-fuzz when missing). Long runs: scripts/fuzz.sh all 600.
bash scripts/fuzz.sh all 20
# Load and a SIGKILL of the server under it: nothing acknowledged before a FLUSH is lost.
bash bench/soak.sh 60
# The same under an online re-encryption (serve --reencrypt) killed midway, and under an
# online encryption in place of a plain image (detached header).
REENCRYPT=1 bash bench/soak.sh 20
REENCRYPT=encrypt bash bench/soak.sh 20
cargo run --release -q -p sectorcrypt -- bench --quick
