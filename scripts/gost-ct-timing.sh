#!/bin/sh
# Constant-time check by timing for the GOST backends valgrind cannot run (avx512; see
# scripts/gost-ct-cachegrind.sh for the others): the probe
# (crates/crypto/examples/gost_ct_timing.rs) times GOST 28147-89 CNT with key meshing, ECB,
# CBC decryption and Magma CTR on 4 KiB for a fixed key and data against random ones,
# interleaved in a random order, and fails when Welch's t between the two classes exceeds
# 10 in absolute value (dudect's threshold for a leak). A statistical check: run it on a
# quiet machine; each backend takes a few seconds.
#
# Usage: scripts/gost-ct-timing.sh [SAMPLES]   (default 20000 per class)
set -eu
cd "$(dirname "$0")/.."
cargo build --release -p sectorcrypt-crypto --example gost_ct_timing >/dev/null 2>&1
status=0
for backend in avx512 avx2; do
    "$(bash scripts/target-dir.sh)/release/examples/gost_ct_timing" "$backend" "${1:-20000}" || status=1
done
exit $status
