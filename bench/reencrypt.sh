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
# Then online: the volume served (`serve`), read whole by nbdcopy (4 connections) without a
# re-encryption, then served with --reencrypt and read whole again and again until the
# re-encryption has finished: the client's throughput during it against without it (the
# target is at least 0.5x), and how long the online re-encryption took.
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

if ! command -v nbdcopy >/dev/null; then
    echo "online: nbdcopy is not installed (scripts/deps.sh)"
    exit 1
fi
sock=$work/nbd.sock
uri="nbd+unix:///?socket=$sock"
serve() { # extra serve flags...
    rm -f "$sock" "$work/serve.log"
    "$cli" serve "$work/v.img" --key-file "$work/pass" --socket "$sock" "$@" 2>"$work/serve.log" &
    pids+=($!)
    wait_sock "$sock"
}
stop() {
    kill "${pids[-1]}"
    wait "${pids[-1]}" 2>/dev/null || true
}
read_gbps() {
    local t0 t1
    t0=$(date +%s.%N)
    nbdcopy --connections 4 "$uri" null:
    t1=$(date +%s.%N)
    awk -v b="$data" -v a="$t0" -v z="$t1" 'BEGIN {printf "%.3f", b/(z-a)/1e9}'
}
declare -A online
for round in $(seq "$ROUNDS"); do
    cp "$work/base.img" "$work/v.img"
    serve
    online[plain]+="$(read_gbps) "
    stop
    serve --reencrypt --resilience checksum
    t0=$(date +%s.%N)
    while ! grep -q "re-encrypted while served" "$work/serve.log"; do
        g=$(read_gbps)
        grep -q "re-encrypted while served" "$work/serve.log" && break
        online[during]+="$g "
    done
    t1=$(date +%s.%N)
    online[took]+="$(awk -v a="$t0" -v z="$t1" 'BEGIN {printf "%.3f", z-a}') "
    stop
    cmp <("$cli" read "$work/v.img" --key-file "$work/pass") "$work/plain" \
        || { echo "online: the data changed"; exit 1; }
done
p=$(median <<<"${online[plain]}")
d=$(median <<<"${online[during]:-0}")
echo "== online (serve --reencrypt, checksum, 4 MiB hotzones), nbdcopy reads of the whole volume"
printf '%-22s %7.3f GB/s\n' "served, no re-encryption" "$p"
printf '%-22s %7.3f GB/s  %5.2fx   (%d reads; the re-encryption took %.2f s, reads included)\n' \
    "during re-encryption" "$d" "$(awk -v a="$d" -v b="$p" 'BEGIN {print a/b}')" \
    "$(wc -w <<<"${online[during]:-}")" "$(median <<<"${online[took]}")"
