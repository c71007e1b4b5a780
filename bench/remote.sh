#!/usr/bin/env bash
# Volumes on NBD exports: `sectorcrypt serve nbd+unix://...` (the encrypting proxy) against
# nbdkit forwarding the same upstream, with and without nbdkit's luks filter.
#
#   bash bench/remote.sh              # 1 GiB, medians of 3, interleaved
#   SIZE=256M RUNS=5 bash bench/remote.sh
#   SIZE=64M RUNS=1 bash bench/remote.sh   # a smoke run
#
# Upstreams are `nbdkit memory` on Unix sockets: one holding a LUKS2 volume (made by
# `sectorcrypt format` on the export: its size comes from the export) and one holding a
# LUKS1 volume (for nbdkit's luks filter, which reads LUKS1 only). Targets, each read
# into `null:` and written from `nbdkit pattern` with nbdcopy (4 connections), rates in
# MB/s of plaintext:
#   proxy      sectorcrypt serve over the LUKS2 upstream (decrypts, encrypts)
#   forward    nbdkit nbd (+ the offset filter: the data area) over the same upstream, no
#              crypto: the ceiling of a proxy
#   luks       nbdkit nbd --filter=luks over the LUKS1 upstream
#   proxy+d    / forward+d: the same with --filter=delay rdelay=1ms wdelay=1ms upstream
# Targets: proxy >= 0.9x forward (reads), >= 0.85x (writes), >= 3x luks; with the
# delay, proxy >= 0.9x forward. Then the fault run: the upstream with --filter=error
# error-rate=1% under the proxy, the whole volume read in 256 KiB requests (python3-libnbd):
# every failed request reported (EIO), 0 wrong bytes among the others.
set -euo pipefail
cd "$(dirname "$0")/.."

SIZE=${SIZE:-1G}
RUNS=${RUNS:-3}
bytes=$(numfmt --from=iec "$SIZE")
# shellcheck source=bench/lib.sh
source bench/lib.sh
scratch /tmp/sectorcrypt-remote-bench.XXXXXX

cargo build --release -q -p sectorcrypt
cli=$(bash scripts/target-dir.sh)/release/sectorcrypt
printf 'bench pass' > "$work/key"

# Starts a daemon and waits for its socket; remembers its pid for the cleanup.
start() { # socket, command...
    local sock=$1
    shift
    rm -f "$sock"
    "$@" &
    pids+=($!)
    for _ in $(seq 500); do [ -S "$sock" ] && return 0; sleep 0.02; done
    echo "no socket $sock from: $*" >&2
    return 1
}
stop_last() {
    local p=${pids[-1]}
    kill "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
    unset 'pids[-1]'
}
uri() { echo "nbd+unix:///?socket=$1"; }
nbdkit_at() { # socket, args...
    local sock=$1
    shift
    start "$sock" nbdkit -f -U "$sock" "$@"
}

# Upstreams: LUKS2 (16 MiB header) and LUKS1 (2 MiB header), both SIZE of data.
luks2_bytes=$((bytes + (16 << 20)))
luks1_bytes=$((bytes + (2 << 20)))
fast=(--pbkdf pbkdf2 --pbkdf-force-iterations 1000 --key-file "$work/key" --batch)
mem2() { nbdkit_at "$work/up2.sock" "$@" memory "$luks2_bytes"; }
mem1() { nbdkit_at "$work/up1.sock" "$@" memory "$luks1_bytes"; }
mem2
$cli format "$(uri "$work/up2.sock")" --type luks2 --sector-size 4096 "${fast[@]}" >/dev/null
mem1
$cli format "$(uri "$work/up1.sock")" --type luks1 "${fast[@]}" >/dev/null

copy_time() { # nbdcopy arguments (source, destination): its seconds
    local t0 t1
    t0=$(date +%s.%N)
    nbdcopy --connections 4 --flush -- "$@" || { echo "nbdcopy $* failed" >&2; exit 1; }
    t1=$(date +%s.%N)
    echo "$t1 - $t0" | bc -l
}
mbps() { echo "$bytes / $1 / 1000000" | bc -l; }

declare -A samples
measure() { # name, uri of the plaintext export
    local r w
    r=$(copy_time "$2" null:) || exit 1
    w=$(copy_time [ nbdkit pattern "$bytes" ] "$2") || exit 1
    samples[$1.read]+="$(mbps "$r") "
    samples[$1.write]+="$(mbps "$w") "
}

# The targets, each started, measured and stopped in turn, RUNS rounds interleaved.
serve_logged() { exec "$cli" serve "$@" 2>>"$work/proxy.log"; }
proxy_up() { # upstream socket
    start "$work/proxy.sock" serve_logged "$(uri "$1")" --socket "$work/proxy.sock" \
        --key-file "$work/key" || { cat "$work/proxy.log" >&2; exit 1; }
}
# The forwarding nbdkit serves the upstream's data area only (the offset filter), so its
# writes leave the LUKS2 header alone and both move the same bytes.
forward_up() {
    nbdkit_at "$work/fwd.sock" --filter=offset nbd socket="$1" offset=$((16 << 20)) range="$bytes"
}
luks_up() { nbdkit_at "$work/luks.sock" --filter=luks nbd socket="$1" passphrase="bench pass"; }

for round in $(seq "$RUNS"); do
    echo "round $round of $RUNS" >&2
    proxy_up "$work/up2.sock"; measure proxy "$(uri "$work/proxy.sock")"; stop_last
    forward_up "$work/up2.sock"; measure forward "$(uri "$work/fwd.sock")"; stop_last
    luks_up "$work/up1.sock"; measure luks "$(uri "$work/luks.sock")"; stop_last
done

# The same LUKS2 upstream behind a 1 ms delay on every request: a delaying nbdkit in
# front of it (nbdkit nbd --filter=delay), so the data stays where it is.
nbdkit_at "$work/slow.sock" --filter=delay nbd socket="$work/up2.sock" rdelay=1ms wdelay=1ms
for round in $(seq "$RUNS"); do
    echo "delay round $round of $RUNS" >&2
    proxy_up "$work/slow.sock"; measure proxy+d "$(uri "$work/proxy.sock")"; stop_last
    forward_up "$work/slow.sock"; measure forward+d "$(uri "$work/fwd.sock")"; stop_last
done
stop_last

med() { tr ' ' '\n' <<<"${samples[$1]}" | grep . | median; }
printf '\n%-10s %12s %12s   (MB/s of plaintext, medians of %s, %s)\n' target read write "$RUNS" "$SIZE"
for t in proxy forward luks proxy+d forward+d; do
    printf '%-10s %12.0f %12.0f   all: read %s / write %s\n' "$t" "$(med $t.read)" \
        "$(med $t.write)" "$(printf '%.0f ' ${samples[$t.read]})" \
        "$(printf '%.0f ' ${samples[$t.write]})"
done
ratio() { echo "$(med "$1") / $(med "$2")" | bc -l; }
echo
printf 'proxy/forward   read %.2fx (target >= 0.90)   write %.2fx (target >= 0.85)\n' \
    "$(ratio proxy.read forward.read)" "$(ratio proxy.write forward.write)"
printf 'proxy/luks      read %.2fx (target >= 3)      write %.2fx (target >= 3)\n' \
    "$(ratio proxy.read luks.read)" "$(ratio proxy.write luks.write)"
printf 'with 1 ms delay read %.2fx (target >= 0.90)   write %.2fx (target >= 0.90)\n' \
    "$(ratio proxy+d.read forward+d.read)" "$(ratio proxy+d.write forward+d.write)"

# Faults: known plaintext through the proxy, then 1% of upstream requests fail.
echo >&2
proxy_up "$work/up2.sock"
nbdcopy --connections 4 --flush -- [ nbdkit pattern "$bytes" ] "$(uri "$work/proxy.sock")"
stop_last
nbdkit_at "$work/err.sock" --log=null --filter=error nbd socket="$work/up2.sock" error=EIO \
    error-rate=1%
proxy_up "$work/err.sock"
/usr/bin/python3 - "$(uri "$work/proxy.sock")" "$bytes" <<'PY'
import sys, nbd
uri, size = sys.argv[1], int(sys.argv[2])
h = nbd.NBD()
h.connect_uri(uri)
step = 256 << 10
failed = wrong = good = 0
for off in range(0, size, step):
    n = min(step, size - off)
    try:
        got = h.pread(n, off)
    except nbd.Error as e:
        failed += 1  # reported: the request failed, with the upstream's error
        if "EIO" not in str(e):
            print(f"request at {off}: unexpected error {e}")
        continue
    # nbdkit's pattern plugin: each 8-byte word is its own offset, big-endian.
    want = b"".join((off + i).to_bytes(8, "big") for i in range(0, n, 8))
    if got != want:
        wrong += sum(a != b for a, b in zip(got, want))
    else:
        good += 1
print(f"fault run: {size // step} requests of 256 KiB through the proxy, upstream error-rate=1%: "
      f"{failed} failed with EIO (reported), {good} correct, {wrong} wrong bytes")
sys.exit(1 if wrong else 0)
PY
