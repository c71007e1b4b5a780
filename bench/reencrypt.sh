#!/usr/bin/env bash
# Offline re-key of a LUKS2 volume (AES-256-XTS, 4096-byte sectors) on tmpfs: sectorcrypt
# against `cryptsetup reencrypt --force-offline-reencrypt` in the same run, for each
# resilience, and the floor sectorcrypt is held to: a `sectorcrypt read` plus a
# `sectorcrypt write` of the same volume (the re-key target is at most 1.5x that with
# checksum resilience).
#
#   bash bench/reencrypt.sh                 # 1 GiB, 3 rounds, files on /dev/shm
#   SIZE=256M ROUNDS=5 DIR=/dev/shm bash bench/reencrypt.sh
#
# Each round runs every case once, in turn (interleaved), on a fresh copy of one volume;
# the figures are medians of the rounds, wall time in seconds. The KDF of the new keyslots
# is PBKDF2 with 1000 iterations in both tools, so that key derivation is not what is
# measured; cryptsetup gets its default hotzone (sectorcrypt's is the same).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh

SIZE=${SIZE:-1G}
ROUNDS=${ROUNDS:-3}
DIR=${DIR:-/dev/shm}
command -v cryptsetup >/dev/null || { echo "cryptsetup is not installed (scripts/deps.sh)"; exit 1; }

cargo build --release -q -p sectorcrypt
cli=$(bash scripts/target-dir.sh)/release/sectorcrypt
scratch "$DIR/sectorcrypt-reencrypt-bench.XXXXXX"

data=$(numfmt --from=iec "$SIZE")
printf 'correct horse' >"$work/pass"
fast=(--pbkdf pbkdf2 --pbkdf-force-iterations 1000)
"$cli" format "$work/base.img" --size $((data + (16 << 20))) --key-file "$work/pass" -q "${fast[@]}" >/dev/null
head -c "$data" /dev/urandom >"$work/plain"
"$cli" write "$work/base.img" --key-file "$work/pass" --input "$work/plain" >/dev/null
cs=(cryptsetup -q --key-file "$work/pass" --disable-locks --disable-keyring)

seconds() { # command...: wall seconds
    local t0 t1
    t0=$(date +%s.%N)
    "$@" >/dev/null
    t1=$(date +%s.%N)
    awk -v a="$t0" -v z="$t1" 'BEGIN {printf "%.3f", z-a}'
}

declare -A t
cases=(read+write)
for r in none checksum journal; do cases+=("sectorcrypt $r" "cryptsetup $r"); done
for round in $(seq "$ROUNDS"); do
    cp "$work/base.img" "$work/v.img"
    a=$(seconds "$cli" read "$work/v.img" --key-file "$work/pass" --output "$work/out")
    b=$(seconds "$cli" write "$work/v.img" --key-file "$work/pass" --input "$work/out")
    t[read+write]+="$(awk -v a="$a" -v b="$b" 'BEGIN {print a+b}') "
    rm -f "$work/out"
    for r in none checksum journal; do
        cp "$work/base.img" "$work/v.img"
        t[sectorcrypt $r]+="$(seconds "$cli" reencrypt "$work/v.img" --key-file "$work/pass" \
            --resilience "$r" "${fast[@]}") "
        cmp <("$cli" read "$work/v.img" --key-file "$work/pass") "$work/plain" \
            || { echo "sectorcrypt $r: the data changed"; exit 1; }
        cp "$work/base.img" "$work/v.img"
        t[cryptsetup $r]+="$(seconds "${cs[@]}" reencrypt --force-offline-reencrypt \
            --resilience "$r" "${fast[@]}" "$work/v.img") "
    done
done

floor=$(median <<<"${t[read+write]}")
echo "== re-key of $SIZE on $DIR, medians of $ROUNDS rounds (wall seconds)"
printf '%-22s %7.3f s\n' "read + write" "$floor"
for r in none checksum journal; do
    s=$(median <<<"${t[sectorcrypt $r]}")
    c=$(median <<<"${t[cryptsetup $r]}")
    printf '%-22s %7.3f s  %5.2fx read+write   cryptsetup %7.3f s  (%.2fx faster)\n' \
        "sectorcrypt $r" "$s" "$(awk -v a="$s" -v b="$floor" 'BEGIN {print a/b}')" "$c" \
        "$(awk -v a="$s" -v b="$c" 'BEGIN {print b/a}')"
done
