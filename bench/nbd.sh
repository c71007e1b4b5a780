#!/usr/bin/env bash
# NBD serving throughput (issue 7's targets): one 1 GiB AES-256-XTS LUKS1 volume on tmpfs,
# made by qemu-img, served by `sectorcrypt serve` and by nbdkit's luks filter; a GELI
# provider of 1 GiB of data (AES-XTS-256, 4096-byte sectors, made by `sectorcrypt format
# --type geli`) served by `sectorcrypt serve`; a raw 1 GiB file served by nbdkit's file
# plugin (no encryption: the ceiling). Each is read and written with nbdcopy over a Unix
# socket, interleaved in rounds; medians are printed with the ratios.
#
#   bash bench/nbd.sh                    # 1 GiB, 5 rounds, /dev/shm
#   SIZE=256M ROUNDS=3 CONNECTIONS=4 bash bench/nbd.sh
#
# Targets: sectorcrypt read >= 0.9x raw nbdkit and >= 2.5x nbdkit luks; write >= 0.85x raw
# and >= 2.5x luks; GELI read >= 0.9x raw nbdkit. The machine may be shared: compare the
# ratios of one run.
set -euo pipefail
cd "$(dirname "$0")/.."

SIZE=${SIZE:-1G}
ROUNDS=${ROUNDS:-5}
DIR=${DIR:-/dev/shm}
CONNECTIONS=${CONNECTIONS:-4}
REQUESTS=${REQUESTS:-64}

for tool in nbdkit nbdcopy qemu-img; do
    command -v "$tool" >/dev/null || { echo "bench/nbd.sh needs $tool (scripts/deps.sh)"; exit 1; }
done
cargo build --release -q -p sectorcrypt
cli=$PWD/target/release/sectorcrypt

# shellcheck source=bench/lib.sh
source bench/lib.sh
scratch "$DIR/sectorcrypt-nbd-bench.XXXXXX"

size_bytes=$(numfmt --from=iec "$SIZE")
printf 'benchmark passphrase' >"$work/pass"
qemu-img create -q -f luks --object "secret,id=s0,file=$work/pass" \
    -o key-secret=s0,iter-time=10,cipher-alg=aes-256,cipher-mode=xts,ivgen-alg=plain64 \
    "$work/luks.img" "$size_bytes"
# GELI keeps its metadata in the provider's last sector: one 4096-byte sector more.
"$cli" format "$work/geli.img" --type geli --size "$((size_bytes + 4096))" --cipher aes-xts \
    --key-size 256 --sector-size 4096 --key-file "$work/pass" --pbkdf-force-iterations 0 -q
truncate -s "$size_bytes" "$work/raw.img"
head -c "$size_bytes" /dev/urandom >"$work/plain.bin"
# Fill both so reads see allocated data everywhere.
dd if="$work/plain.bin" of="$work/raw.img" bs=4M conv=notrunc status=none

"$cli" serve "$work/luks.img" --key-file "$work/pass" --socket "$work/sc.sock" 2>"$work/sc.log" &
pids+=($!)
"$cli" serve "$work/geli.img" --key-file "$work/pass" --socket "$work/geli.sock" \
    2>"$work/geli.log" &
pids+=($!)
nbdkit -f -U "$work/luks.sock" --filter=luks file "file=$work/luks.img" \
    "passphrase=+$work/pass" 2>"$work/luks.log" &
pids+=($!)
nbdkit -f -U "$work/raw.sock" file "file=$work/raw.img" 2>"$work/raw.log" &
pids+=($!)
for s in sc geli luks raw; do wait_sock "$work/$s.sock"; done
uri() { echo "nbd+unix:///?socket=$work/$1.sock"; }

# The first write through sectorcrypt fills the volume; check it reads back byte-exact
# through nbdkit's luks filter (an independent decryptor) before timing anything.
nbdcopy --connections "$CONNECTIONS" --flush "$work/plain.bin" "$(uri sc)"
nbdcopy "$(uri luks)" - | cmp - "$work/plain.bin" >/dev/null ||
    { echo "nbdkit's luks filter reads something else than was written"; exit 1; }
echo "check: plaintext written through sectorcrypt reads back byte-exact through nbdkit luks"
# No independent GELI decryptor here (the GRUB tests check the format): the GELI volume is
# filled through sectorcrypt and read back through it.
nbdcopy --connections "$CONNECTIONS" --flush "$work/plain.bin" "$(uri geli)"
nbdcopy "$(uri geli)" - | cmp - "$work/plain.bin" >/dev/null ||
    { echo "the GELI volume reads something else than was written"; exit 1; }
echo "check: plaintext written through sectorcrypt geli reads back byte-exact"

rounds sc geli luks raw

declare -A med
printf '%-24s %10s %10s   (GB/s, median of %s rounds, %s connections, nbdcopy %s)\n' \
    "" read write "$ROUNDS" "$CONNECTIONS" "$(nbdcopy --version | head -1 | awk '{print $2}')"
for s in sc geli luks raw; do
    for op in read write; do med[$s $op]=$(median <<<"${samples[$s $op]}"); done
    name=$s
    [ "$s" = sc ] && name="sectorcrypt serve (luks1)"
    [ "$s" = geli ] && name="sectorcrypt serve (geli)"
    [ "$s" = luks ] && name="nbdkit --filter=luks"
    [ "$s" = raw ] && name="nbdkit file (raw)"
    printf '%-26s %8.2f %10.2f     runs: read %s| write %s\n' "$name" "${med[$s read]}" \
        "${med[$s write]}" "${samples[$s read]}" "${samples[$s write]}"
done
# Ratios per round (the three servers ran next to each other in time), then their medians:
# steadier than ratios of medians when the machine's load changes between rounds.
ratio() { # a-key b-key
    for r in $(seq "$ROUNDS"); do
        awk -v a="${one[$1 $r]}" -v b="${one[$2 $r]}" 'BEGIN {printf "%.3f ", a/b}'
    done
}
declare -A rat
for pair in "sc read:raw read" "sc write:raw write" "sc read:luks read" "sc write:luks write" \
    "geli read:raw read" "geli write:raw write"; do
    rs=$(ratio "${pair%%:*}" "${pair##*:}")
    rat[$pair]=$(median <<<"$rs")
    printf 'per-round %-22s %s\n' "${pair/:/ \/ }:" "$rs"
done
awk -v a="${rat[sc read:raw read]}" -v b="${rat[sc write:raw write]}" \
    -v c="${rat[sc read:luks read]}" -v d="${rat[sc write:luks write]}" \
    -v g="${rat[geli read:raw read]}" -v w="${rat[geli write:raw write]}" 'BEGIN {
    printf "sectorcrypt / raw nbdkit : read %.2fx (target >= 0.90)  write %.2fx (target >= 0.85)\n", a, b
    printf "sectorcrypt / nbdkit luks: read %.2fx (target >= 2.50)  write %.2fx (target >= 2.50)\n", c, d
    printf "sectorcrypt geli / raw   : read %.2fx (target >= 0.90)  write %.2fx\n", g, w
    print ((a >= 0.9 && b >= 0.85 && c >= 2.5 && d >= 2.5 && g >= 0.9) ? "targets: met" : "targets: NOT met")
    print "(medians of the per-round ratios)"
}'
