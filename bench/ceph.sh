#!/usr/bin/env bash
# Ceph RBD throughput against qemu's rbd driver, on a single-node cluster of our own
# (scripts/ceph.sh: one mon, one memstore OSD, both sharing the machine's cores with the
# client): one LUKS2 volume of 1 GiB of data (aes-xts-plain64, 512-bit key, 4096-byte
# sectors, a pbkdf2 keyslot of 1000 iterations, so that unlocking is no part of the figures)
# in an RBD image of 4 MiB objects, formatted by `sectorcrypt
# format --rbd-object-size`, imported with `rbd import`. Sequential read and write, 2 MiB
# requests, DEPTH in flight (qemu: up to 16), every leg in process on librbd:
#
#   sectorcrypt   sectorcrypt's engine over its RBD store (crates/rbd, example rbd_seq)
#   qemu raw      qemu's rbd driver on the same image's data area, no decryption
#                 (qemu-img convert to/from a null device / a tmpfs file, -m 16 -W): the
#                 block layer qemu-nbd serves raw, without the NBD hop
#   qemu luks2    the same with librbd's own encryption (encrypt.format=luks2)
#   store         sectorcrypt's RBD store without the engine: what the store reaches
#
# Then the same over NBD (nbdcopy through Unix sockets, 4 connections x 16 requests):
# `sectorcrypt serve rbd:rbd/bench:conf=...` (the binary built with the `rbd` feature) against qemu-nbd serving the same image's data area raw and with
# librbd's luks2 (qemu from `scripts/ceph.sh qemu`). The NBD legs are skipped, with the
# reason, only when `sectorcrypt serve` does not start.
#
# After WARMUP untimed rounds (1), rounds interleave the legs; medians of ROUNDS are printed
# with two ratios, sectorcrypt / qemu raw (target >= 0.9) and sectorcrypt / qemu luks2
# (>= 1), in process and over NBD.
#
#   bash bench/ceph.sh                     # 1 GiB, 5 rounds, depth 16 (needs ~3 GiB RAM)
#   SIZE=256M ROUNDS=3 DEPTH=8 WARMUP=0 bash bench/ceph.sh
set -euo pipefail
cd "$(dirname "$0")/.."

SIZE=${SIZE:-1G}
# Five rounds: a single leg of a round now and then runs at a third of its usual rate (the
# OSD's first touch of memory, a lock hand-over), whichever server it meets; with three
# rounds one such leg moves a median.
ROUNDS=${ROUNDS:-5}
WARMUP=${WARMUP:-1}
DEPTH=${DEPTH:-16}
REQ=$((2 << 20))

work=$(mktemp -d /tmp/sectorcrypt-ceph-bench.XXXXXX)
cluster=$work/cluster
cleanup() {
    bash scripts/ceph.sh stop "$cluster" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

started=$(bash scripts/ceph.sh start "$cluster") || { echo "bench/ceph.sh: $started"; exit 1; }
qemu=$(bash scripts/ceph.sh qemu) || { echo "bench/ceph.sh: no qemu rbd driver: $qemu"; exit 1; }
export CEPH_CONF=$cluster/ceph.conf
cargo build --release -q -p sectorcrypt --features rbd
cargo build --release -q -p sectorcrypt-rbd --features librbd --example rbd_seq
tdir=$(bash scripts/target-dir.sh)
cli=$tdir/release/sectorcrypt
seq_tool=$tdir/release/examples/rbd_seq

data=$(numfmt --from=iec "$SIZE")
header=$((16 << 20))
printf 'benchmark passphrase' >"$work/pass"
"$cli" format "$work/v.img" --size $((data + header)) --rbd-object-size 4M --sector-size 4096 \
    --pbkdf pbkdf2 --pbkdf-force-iterations 1000 --key-file "$work/pass" -q >/dev/null
rbd import --no-progress --object-size 4M "$work/v.img" rbd/bench
rm -f "$work/v.img"
spec="rbd:rbd/bench:conf=$CEPH_CONF"
opts="driver=rbd,pool=rbd,image=bench,conf=$CEPH_CONF,user=admin"
luks="$opts,encrypt.format=luks2,encrypt.key-secret=sec0"
raw="driver=raw,offset=$header,size=$data,file.driver=rbd,file.pool=rbd,file.image=bench"
raw+=",file.conf=$CEPH_CONF,file.user=admin"
head -c "$data" /dev/urandom >"$work/src"
file="driver=raw,file.driver=file,file.filename=$work/src"
null="driver=null-co,size=$data"

# Every object written once, so that reads find data everywhere.
"$seq_tool" write "$spec" --pass "$work/pass" --depth "$DEPTH" >/dev/null

# Each leg is timed as a whole process (connecting and opening included, for both).
timed() { # COMMAND... -> MB/s
    local t0 t1
    t0=$(date +%s.%N)
    "$@" >/dev/null
    t1=$(date +%s.%N)
    echo "$data $t0 $t1" | awk '{printf "%.1f", $1 / ($3 - $2) / 1e6}'
}
qemu_convert() { # SOURCE-OPTS TARGET-OPTS -> MB/s
    timed "$qemu/bin/qemu-img" convert -n -m 16 -W -S 0 -t none -T none \
        --object "secret,id=sec0,file=$work/pass" --image-opts "$1" --target-image-opts "$2"
}
ours() { # MODE [ARGS] -> MB/s
    timed "$seq_tool" "$1" "$spec" --depth "$DEPTH" --size "$REQ" --bytes "$data" "${@:2}"
}

# NBD servers: qemu-nbd (pid files where scripts/ceph.sh stop finds them), sectorcrypt.
wait_sock() {
    for _ in $(seq 300); do [ -S "$1" ] && return 0; sleep 0.05; done
    return 1
}
nbd_legs=()
for leg in raw luks; do
    src=$raw
    [ $leg = luks ] && src=$luks
    "$qemu/bin/qemu-nbd" --fork --persistent --shared=8 --cache=none -k "$work/$leg.sock" \
        --pid-file "$cluster/run/qemu-nbd-$leg.pid" \
        --object "secret,id=sec0,file=$work/pass" --image-opts "$src"
    wait_sock "$work/$leg.sock"
done
"$cli" serve "$spec" --socket "$work/sc.sock" --key-file "$work/pass" 2>"$work/sc.log" &
echo $! >"$cluster/run/qemu-sectorcrypt.pid"
if wait_sock "$work/sc.sock"; then
    nbd_legs=(nbd_sc_read nbd_raw_read nbd_luks_read nbd_sc_write nbd_raw_write nbd_luks_write)
else
    echo "NBD legs skipped: sectorcrypt serve $spec: $(tail -1 "$work/sc.log")"
fi
# Writing needs the image's exclusive lock, which librbd hands from client to client on
# request; the NBD servers stay open between legs, so the leg after another server's
# writes would time that hand-over too. One small untimed write takes the lock first (the
# same for every server; the copy overwrites it).
take_lock() { # URI
    /usr/bin/python3 -c 'import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
h.pwrite(bytes(65536), 0)
h.flush()
h.shutdown()' "$1"
}
nbd() { # LEG-SOCKET read|write -> MB/s
    local uri="nbd+unix:///?socket=$work/$1.sock"
    if [ "$2" = read ]; then
        timed nbdcopy --connections 4 --requests 16 "$uri" null:
    else
        take_lock "$uri"
        timed nbdcopy --connections 4 --requests 16 "$work/src" "$uri"
    fi
}

declare -A r
legs=(sc_read raw_read luks_read store_read sc_write raw_write luks_write store_write
    "${nbd_legs[@]}")
# One measurement of leg LEG, appended to r[LEG].
measure() {
    local v
    case $1 in
    sc_read) v=$(ours read --pass "$work/pass") ;;
    raw_read) v=$(qemu_convert "$raw" "$null") ;;
    luks_read) v=$(qemu_convert "$luks" "$null") ;;
    store_read) v=$(ours raw-read --offset "$header") ;;
    sc_write) v=$(ours write --pass "$work/pass") ;;
    raw_write) v=$(qemu_convert "$file" "$raw") ;;
    luks_write) v=$(qemu_convert "$file" "$luks") ;;
    store_write) v=$(ours raw-write --offset "$header") ;;
    nbd_*_read | nbd_*_write)
        local leg=${1#nbd_}
        v=$(nbd "${leg%_*}" "${leg##*_}")
        ;;
    esac
    r[$1]+="$v "
}
# Each round starts at another leg of each kind (reads, then writes), so that no leg is
# always the one after the writes of the round before.
rotate() { # I LEGS... -> the legs from index I mod their count on
    local i=$1
    shift
    local n=$# k
    for ((k = 0; k < n; k++)); do
        local j=$(((i + k) % n + 1))
        printf '%s\n' "${!j}"
    done
}
# Untimed rounds first: the store's first rewrites of every object run at a third to
# half of its later speed (the OSD growing its memory, the lock and object map moving
# between clients), whichever leg meets them; every leg runs WARMUP times before the timed
# rounds so that no leg's median carries them.
for ((i = 1; i <= WARMUP; i++)); do
    for l in "${legs[@]}"; do measure "$l"; done
done
for l in "${legs[@]}"; do r[$l]=""; done
for ((i = 1; i <= ROUNDS; i++)); do
    for kind in read write; do
        kind_legs=()
        for l in "${legs[@]}"; do [[ $l == *_$kind ]] && kind_legs+=("$l"); done
        while read -r l; do measure "$l"; done < <(rotate "$i" "${kind_legs[@]}")
    done
    line="round $i:"
    for l in "${legs[@]}"; do
        v=${r[$l]% }
        line+=" $l=${v##* }"
    done
    echo "$line"
done

median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
declare -A m
for l in "${legs[@]}"; do m[$l]=$(echo "${r[$l]}" | median); done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
# The median of the per-round ratios of legs A and B (the rounds share their conditions).
round_ratio() { # A B
    paste -d' ' <(echo "${r[$1]}" | tr ' ' '\n' | grep .) <(echo "${r[$2]}" | tr ' ' '\n' | grep .) |
        awk '{printf "%.2f\n", $1 / $2}' | median
}

echo
echo "RBD, $SIZE sequential, 2 MiB requests, depth $DEPTH, medians of $ROUNDS (MB/s):"
printf '%-6s %12s %12s %12s %12s %10s %10s\n' "" sectorcrypt "qemu raw" "qemu luks2" store \
    "sc/raw" "sc/luks2"
for op in read write; do
    printf '%-6s %12s %12s %12s %12s %10s %10s\n' "$op" "${m[sc_$op]}" "${m[raw_$op]}" \
        "${m[luks_$op]}" "${m[store_$op]}" "$(ratio "${m[sc_$op]}" "${m[raw_$op]}")x" \
        "$(ratio "${m[sc_$op]}" "${m[luks_$op]}")x"
done
if [ ${#nbd_legs[@]} -gt 0 ]; then
    echo "over NBD (nbdcopy, 4 connections x 16 requests):"
    for op in read write; do
        printf '%-6s %12s %12s %12s %12s %10s %10s\n' "$op" "${m[nbd_sc_$op]}" \
            "${m[nbd_raw_$op]}" "${m[nbd_luks_$op]}" "-" \
            "$(ratio "${m[nbd_sc_$op]}" "${m[nbd_raw_$op]}")x" \
            "$(ratio "${m[nbd_sc_$op]}" "${m[nbd_luks_$op]}")x"
    done
fi
echo "medians of per-round ratios:" \
    "read sc/raw $(round_ratio sc_read raw_read)x, sc/luks2 $(round_ratio sc_read luks_read)x;" \
    "write sc/raw $(round_ratio sc_write raw_write)x, sc/luks2 $(round_ratio sc_write luks_write)x"
if [ ${#nbd_legs[@]} -gt 0 ]; then
    echo "over NBD, medians of per-round ratios:" \
        "read sc/raw $(round_ratio nbd_sc_read nbd_raw_read)x," \
        "sc/luks2 $(round_ratio nbd_sc_read nbd_luks_read)x;" \
        "write sc/raw $(round_ratio nbd_sc_write nbd_raw_write)x," \
        "sc/luks2 $(round_ratio nbd_sc_write nbd_luks_write)x"
fi
echo "targets: sc/raw >= 0.90x, sc/luks2 >= 1.00x (the OSD runs on the same cores)"
