#!/bin/sh
# Constant-time check for the GOST backends with cachegrind: the probe
# (crates/crypto/examples/gost_ct_probe.rs) runs CNT, CFB, CBC decryption and the MAC with
# key meshing, Magma CTR, MGM and the Magma MAC on 8 KiB with a key, IV and data derived
# from a seed. For each backend, three seeds must give identical instruction counts, data
# reads and writes and L1 misses; any secret-dependent branch, loop count or table index
# would change them. Exit 1 on a difference, 0 otherwise (and when valgrind is absent,
# with a printed reason). valgrind (3.19 here) does not run AVX-512 code and hides it from
# CPUID, so the avx512 backend is skipped with that reason; scripts/gost-ct-disasm.sh
# and scripts/gost-ct-timing.sh cover it.
set -eu
cd "$(dirname "$0")/.."
if ! command -v valgrind >/dev/null 2>&1; then
    echo "skipped: valgrind is not installed" >&2
    exit 0
fi
cargo build --release -p sectorcrypt-crypto --example gost_ct_probe >/dev/null 2>&1
probe=$(bash scripts/target-dir.sh)/release/examples/gost_ct_probe
status=0
for backend in soft avx2 avx512; do
    if ! "$probe" 1 "$backend" >/dev/null 2>&1; then
        echo "skipped $backend: not usable on this cpu"
        continue
    fi
    if ! valgrind --tool=none "$probe" 1 "$backend" >/dev/null 2>&1; then
        echo "skipped $backend: valgrind cannot run it (its CPU model has no AVX-512)"
        continue
    fi
    first=""
    for seed in 1 2 3; do
        counts=$(valgrind --tool=cachegrind --cache-sim=yes --cachegrind-out-file=/dev/null \
            "$probe" "$seed" "$backend" 2>&1 >/dev/null |
            grep -E 'I *refs|D *refs|D1 *misses' | sed 's/^==[0-9]*== *//' | tr -s ' ' | tr '\n' ';')
        echo "$backend seed $seed: $counts"
        if [ -z "$first" ]; then
            first=$counts
        elif [ "$counts" != "$first" ]; then
            echo "DIFFERENT counts for $backend: not constant time" >&2
            status=1
        fi
    done
done
exit $status
