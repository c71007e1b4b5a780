#!/usr/bin/env bash
# NBD serving throughput against nbdkit: one 1 GiB AES-256-XTS LUKS1 volume on tmpfs,
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
#
# Then both cores: sectorcrypt read with 1 and 2 connections (and the cores the
# server and nbdcopy keep busy, which say whether one connection already uses the
# machine), 4 KiB random reads and writes at queue depth 32 with fio's nbd engine (IOPS
# and the server's CPU time per request; sectorcrypt and raw nbdkit alternately in each
# round, the ratio per round and its median; `scripts/deps.sh bench` installs fio; target:
# random reads >= 0.95x raw nbdkit), and the FUSE mount's sequential
# read (dd of the whole disk in 4 MiB O_DIRECT reads, which the kernel sends as 1 MiB
# pieces at once) against the NBD read of the same volume (needs /dev/fuse and
# fusermount3). Targets: 2 connections >= 1.7x one (printed with one request in flight per
# connection and with REQUESTS); FUSE >= 0.8x NBD.
set -euo pipefail
cd "$(dirname "$0")/.."

SIZE=${SIZE:-1G}
ROUNDS=${ROUNDS:-5}
DIR=${DIR:-/dev/shm}
CONNECTIONS=${CONNECTIONS:-4}
REQUESTS=${REQUESTS:-64}

bash scripts/deps.sh bench
for tool in nbdkit nbdcopy qemu-img; do
    command -v "$tool" >/dev/null || { echo "bench/nbd.sh needs $tool (scripts/deps.sh)"; exit 1; }
done
cargo build --release -q -p sectorcrypt
cli=$(bash scripts/target-dir.sh)/release/sectorcrypt

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

# Both cores: 1 and 2 connections, each with one request in flight (what the server does
# with a second connection: run it beside the first, or behind it) and with $REQUESTS (where
# one connection may already keep every core busy), interleaved in the same rounds.
echo
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
sc_pid=${pids[0]}
declare -A conn
for r in $(seq "$ROUNDS"); do
    for q in 1 "$REQUESTS"; do
        for c in 1 2; do
            t0=$(date +%s.%N)
            c0=$(cpu_ticks "$sc_pid")
            /usr/bin/time -f '%U %S' -o "$work/copy.cpu" \
                nbdcopy --connections $c --threads $c --requests "$q" "$(uri sc)" null:
            t1=$(date +%s.%N)
            c1=$(cpu_ticks "$sc_pid")
            conn[$q.$c]+="$(awk -v b="$size_bytes" -v a="$t0" -v z="$t1" 'BEGIN {printf "%.4f", b/(z-a)/1e9}') "
            # Cores busy: the server's CPU time and nbdcopy's, over the wall time.
            conn[cpu$q.$c]+="$(awk -v t="$((c1 - c0))" -v a="$t0" -v z="$t1" '{
                printf "%.2f", (t / 100 + $1 + $2) / (z - a) }' "$work/copy.cpu") "
        done
    done
done
for q in 1 "$REQUESTS"; do
    for c in 1 2; do
        printf 'sectorcrypt read, %d connection(s) x %2d requests: %6.2f GB/s, server + nbdcopy busy %s cores  (runs: %s)\n' \
            "$c" "$q" "$(median <<<"${conn[$q.$c]}")" "$(median <<<"${conn[cpu$q.$c]}")" "${conn[$q.$c]}"
    done
    ratios=$(paste -d' ' <(tr ' ' '\n' <<<"${conn[$q.2]}" | grep .) <(tr ' ' '\n' <<<"${conn[$q.1]}" | grep .) |
        awk '{printf "%.3f ", $1 / $2}')
    printf '2 connections / 1 at %d requests each: %.2fx (median of the per-round ratios; target >= 1.70)\n' \
        "$q" "$(median <<<"$ratios")"
done
echo "(this machine has $(nproc) cores, shared by the server and the client: where one connection"
echo " keeps them busy, a second has none left)"

if command -v fio >/dev/null; then
    # 4 KiB random reads, then random writes, at queue depth 32 for 5 s each, sectorcrypt
    # and raw nbdkit alternately (the order swapped every round), with the server's CPU
    # time per request (user + system, from /proc: steadier than IOPS on a loaded machine).
    iops() { # uri rw: IOPS of 4 KiB random I/O at queue depth 32 for 5 s
        fio --ioengine=nbd --uri="$1" --rw="$2" --bs=4k --iodepth=32 --size="$size_bytes" \
            --runtime=5 --time_based --name="$2" --output-format=terse --terse-version=3 \
            2>/dev/null | awk -F';' -v rw="$2" 'NF > 40 {print (rw == "randwrite") ? $49 : $8}'
    }
    declare -A io iocpu
    server_pid() { if [ "$1" = sc ]; then echo "$sc_pid"; else echo "${pids[3]}"; fi; }
    for r in $(seq "$ROUNDS"); do
        order="sc raw"
        [ $((r % 2)) = 0 ] && order="raw sc"
        for rw in randread randwrite; do
            for s in $order; do
                p=$(server_pid "$s")
                c0=$(cpu_ticks "$p")
                n=$(iops "$(uri "$s")" "$rw")
                c1=$(cpu_ticks "$p")
                io[$s $rw]+="$n "
                one[io $s $rw $r]=$n
                iocpu[$s $rw]+="$(awk -v t="$((c1 - c0))" -v n="$n" 'BEGIN {printf "%.2f", t * 1e4 / (n * 5)}') "
            done
        done
    done
    printf '4 KiB random read, QD32 (fio nbd): sectorcrypt %s IOPS, raw nbdkit %s IOPS (medians)\n' \
        "$(median <<<"${io[sc randread]}")" "$(median <<<"${io[raw randread]}")"
    printf '4 KiB random write, QD32 (fio nbd): sectorcrypt %s IOPS, raw nbdkit %s IOPS (medians)\n' \
        "$(median <<<"${io[sc randwrite]}")" "$(median <<<"${io[raw randwrite]}")"
    for rw in randread randwrite; do
        rs=""
        for r in $(seq "$ROUNDS"); do
            rs+="$(awk -v a="${one[io sc $rw $r]}" -v b="${one[io raw $rw $r]}" 'BEGIN {printf "%.3f", a/b}') "
        done
        rat[io $rw]=$(median <<<"$rs")
        printf '%-10s sectorcrypt / raw nbdkit IOPS per round: %s| server CPU us per request: sectorcrypt %s, nbdkit %s (medians)\n' \
            "$rw" "$rs" "$(median <<<"${iocpu[sc $rw]}")" "$(median <<<"${iocpu[raw $rw]}")"
    done
    awk -v a="${rat[io randread]}" -v b="${rat[io randwrite]}" 'BEGIN {
        printf "4 KiB QD32 sectorcrypt / raw nbdkit: randread %.2fx (target >= 0.95)  randwrite %.2fx\n", a, b
        print ((a >= 0.95) ? "IOPS target: met" : "IOPS target: NOT met")
    }'
else
    echo "4 KiB random read IOPS: skipped, fio is not installed (scripts/deps.sh bench)"
fi

if [ -e /dev/fuse ] && command -v fusermount3 >/dev/null; then
    # The volume is mounted once its NBD server is gone (one user at a time).
    kill "$sc_pid"
    wait "$sc_pid" 2>/dev/null || true
    mkdir "$work/mnt"
    "$cli" mount "$work/luks.img" "$work/mnt" --key-file "$work/pass" 2>"$work/mount.log"
    fuse=""
    for r in $(seq "$ROUNDS"); do
        t0=$(date +%s.%N)
        dd if="$work/mnt/disk" of=/dev/null bs=4M iflag=direct status=none
        t1=$(date +%s.%N)
        fuse+="$(awk -v b="$size_bytes" -v a="$t0" -v z="$t1" 'BEGIN {printf "%.4f", b/(z-a)/1e9}') "
    done
    "$cli" umount "$work/mnt"
    f=$(median <<<"$fuse")
    nbd=${med[sc read]}
    printf 'FUSE dd read (4 MiB, direct I/O): %.2f GB/s (runs: %s)\n' "$f" "$fuse"
    awk -v f="$f" -v n="$nbd" -v o="$(median <<<"${conn[$REQUESTS.1]}")" -v k="$CONNECTIONS" 'BEGIN {
        printf "FUSE / NBD read: %.2fx against %s connections (target >= 0.80), %.2fx against 1\n", f/n, k, f/o }'
else
    echo "FUSE read: skipped, no /dev/fuse or fusermount3"
fi
