#!/usr/bin/env bash
# One gateway, many volumes: `sectorcrypt serve --config` with $VOLUMES small LUKS2 volumes
# (PBKDF2, 1000 iterations, on tmpfs), measured three ways:
#   spread   $CLIENTS fio clients (the nbd engine, one connection each, 4 KiB random
#            reads, queue depth 1) spread over every export, client i on export i % VOLUMES
#   one      the same clients on one export
#            the aggregate ratio spread/one: the target is >= 0.9
#   rss      VmRSS of a gateway with $VOLUMES idle exports and of one with 1, after their
#            start; the difference per export added (target: under 2 MiB)
#   mixed    CLIENTS - 8 clients on one export beside 8 on another: their per-client
#            rates (the cores are shared per connection, not per export)
#   first    8 exports whose upstreams stall (nbdkit's pause filter, a read in flight on
#            each) and 64 idle connections, then a new client's connect and first 4 KiB
#            read, $ROUNDS times (target: 100 ms)
#
#   bash bench/gateway.sh                                   # 64 volumes, 128 clients
#   VOLUMES=8 CLIENTS=16 RUNTIME=3 ROUNDS=1 bash bench/gateway.sh   # a smoke run
#
# Rounds alternate spread and one; medians of $ROUNDS. Needs fio, nbdkit, python3-libnbd.
set -euo pipefail
cd "$(dirname "$0")/.."

VOLUMES=${VOLUMES:-64}
CLIENTS=${CLIENTS:-128}
RUNTIME=${RUNTIME:-15}
ROUNDS=${ROUNDS:-3}
# shellcheck source=bench/lib.sh
source bench/lib.sh
scratch /dev/shm/sectorcrypt-gateway-bench.XXXXXX

nice -n 10 cargo build --release -q -p sectorcrypt
cli=$(bash scripts/target-dir.sh)/release/sectorcrypt
printf 'bench pass' > "$work/key"
py=/usr/bin/python3

echo "gateway bench: $VOLUMES volumes, $CLIENTS clients, ${RUNTIME} s runs, $ROUNDS rounds"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"
echo "cpu flags: $(grep -m1 flags /proc/cpuinfo | tr ' ' '\n' | grep -E '^(aes|vaes|avx2|avx512f|sha_ni)$' | tr '\n' ' ')"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"

# At least 9: the stall run uses v1..v8 behind nbdkit and v0 served directly.
for i in $(seq 0 $((VOLUMES > 9 ? VOLUMES - 1 : 8))); do
    "$cli" format "$work/v$i.img" --type luks2 --size 32M --key-file "$work/key" \
        --pbkdf pbkdf2 --pbkdf-force-iterations 1000 --batch >/dev/null
done

# config FILE N: a gateway of the first N volumes.
config() {
    {
        echo "max_connections = $((CLIENTS + 96))"
        for i in $(seq 0 $(($2 - 1))); do
            printf '[[export]]\nname = "v%d"\nimage = "%s"\nkey_file = "%s"\n' \
                "$i" "$work/v$i.img" "$work/key"
        done
    } > "$1"
}

# gateway SOCKET CONFIG: starts a gateway, its pid in $gw.
gateway() {
    rm -f "$1"
    nice -n 0 "$cli" serve --config "$2" --socket "$1" 2>>"$work/gw.log" &
    gw=$!
    pids+=("$gw")
    wait_sock "$1"
}

rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }

# fio_iops SOCKET MODE: the aggregate read IOPS of $CLIENTS clients; MODE spread (client i
# on export i % VOLUMES, 15 MiB of each), small (the same, 15 MiB / VOLUMES of each: the
# working set of one export) or one (every client on export 0, 15 MiB).
fio_iops() {
    local sock=$1 mode=$2 job=$work/job.fio i e size=15360k
    [ "$mode" = small ] && size=$((15360 / VOLUMES / 4 * 4))k
    {
        printf '[global]\nioengine=nbd\nrw=randread\nbs=4k\niodepth=1\nthread=1\n'
        printf 'time_based=1\nruntime=%s\nramp_time=1\nsize=%s\ngroup_reporting=1\n' "$RUNTIME" "$size"
        for i in $(seq 0 $((CLIENTS - 1))); do
            if [ "$mode" = one ]; then e=0; else e=$((i % VOLUMES)); fi
            printf '[c%d]\nuri=nbd+unix:///v%d?socket=%s\n' "$i" "$e" "$sock"
        done
    } > "$job"
    fio --output-format=json --output="$work/fio.json" "$job" >/dev/null 2>&1
    "$py" -c 'import json,sys; t = open(sys.argv[1]).read(); print("%.0f" % sum(j["read"]["iops"] for j in json.loads(t[t.index("{"):])["jobs"]))' "$work/fio.json"
}

# --- throughput: spread over every export, against all on one ---
config "$work/all.toml" "$VOLUMES"
gateway "$work/gw.sock" "$work/all.toml"
sleep 0.5
rss_all=$(rss_kib "$gw")
declare -a spread_iops one_iops small_iops
for r in $(seq "$ROUNDS"); do
    if ((r % 2)); then order="spread one small"; else order="small one spread"; fi
    for m in $order; do
        v=$(fio_iops "$work/gw.sock" "$m")
        case $m in
        spread) spread_iops+=("$v") ;;
        one) one_iops+=("$v") ;;
        small) small_iops+=("$v") ;;
        esac
    done
    awk -v a="${spread_iops[-1]}" -v b="${one_iops[-1]}" -v c="${small_iops[-1]}" -v r="$r" \
        -v l="$(cut -d' ' -f1 /proc/loadavg)" 'BEGIN {printf "round %d: spread %d IOPS, one export %d, spread over one export'"'"'s working set %d; ratios %.3f, %.3f (load %s)\n", r, a, b, c, a/b, c/b, l}'
done
ms=$(echo "${spread_iops[@]}" | median)
mo=$(echo "${one_iops[@]}" | median)
mm=$(echo "${small_iops[@]}" | median)
echo "4 KiB random reads, $CLIENTS clients: over $VOLUMES exports $ms IOPS (same working set as one export: $mm), on one export $mo IOPS (medians)"
awk -v a="$ms" -v b="$mo" -v c="$mm" 'BEGIN {printf "aggregate ratio spread/one: %.3f (target >= 0.9); with one export'"'"'s working set: %.3f\n", a/b, c/b}'

# --- sharing: one busy export beside a small one ---
# CLIENTS - 8 clients on v0 and 8 on v1, in two groups: the per-client rates of the two
# exports, equal when the cores are shared per connection.
job=$work/mixed.fio
{
    printf '[global]\nioengine=nbd\nrw=randread\nbs=4k\niodepth=1\nthread=1\n'
    printf 'time_based=1\nruntime=%s\nramp_time=1\nsize=15m\ngroup_reporting=1\n' "$RUNTIME"
    for i in $(seq 0 $((CLIENTS - 9))); do
        printf '[busy%d]\nuri=nbd+unix:///v0?socket=%s\n' "$i" "$work/gw.sock"
    done
    for i in $(seq 0 7); do
        if [ "$i" = 0 ]; then printf '[small%d]\nnew_group\n' "$i"; else printf '[small%d]\n' "$i"; fi
        printf 'uri=nbd+unix:///v1?socket=%s\n' "$work/gw.sock"
    done
} > "$job"
fio --output-format=json --output="$work/mixed.json" "$job" >/dev/null 2>&1
"$py" - "$work/mixed.json" "$((CLIENTS - 8))" <<'EOF'
import json, sys
t = open(sys.argv[1]).read()
busy, small = json.loads(t[t.index('{'):])['jobs'][:2]
n = int(sys.argv[2])
b, s = busy['read']['iops'] / n, small['read']['iops'] / 8
print('one export with %d clients beside one with 8: %.0f and %.0f IOPS per client '
      '(small/busy %.2f; 1.0: shared per connection)' % (n, b, s, s / b))
EOF
kill "$gw"
wait "$gw" 2>/dev/null || true

# --- memory per idle export ---
config "$work/one.toml" 1
gateway "$work/one.sock" "$work/one.toml"
sleep 0.5
rss_one=$(rss_kib "$gw")
kill "$gw"
wait "$gw" 2>/dev/null || true
echo "RSS after start: $rss_all KiB with $VOLUMES idle exports, $rss_one KiB with 1"
awk -v a="$rss_all" -v b="$rss_one" -v n="$VOLUMES" \
    'BEGIN {printf "RSS per idle export: %.0f KiB ((%d - %d) / %d; target under 2048)\n", (a-b)/(n-1), a, b, n-1}'

# --- a new client's first read beside stalled exports and idle connections ---
cfg=$work/stall.toml
echo "max_connections = 128" > "$cfg"
for i in $(seq 0 7); do
    nbdkit -f --exit-with-parent -U "$work/up$i.sock" --filter=pause \
        file "$work/v$((i + 1)).img" "pause-control=$work/ctl$i" &
    pids+=($!)
    wait_sock "$work/up$i.sock"
    printf '[[export]]\nname = "s%d"\nimage = "nbd+unix:///?socket=%s"\nkey_file = "%s"\n' \
        "$i" "$work/up$i.sock" "$work/key" >> "$cfg"
done
printf '[[export]]\nname = "h0"\nimage = "%s"\nkey_file = "%s"\n' "$work/v0.img" "$work/key" >> "$cfg"
gateway "$work/stall.sock" "$cfg"
"$py" - "$work" <<'EOF'
import nbd, os, socket, statistics, subprocess, sys, time
work = sys.argv[1]
sock = work + '/stall.sock'
rounds = int(os.environ.get('ROUNDS', '3'))
ctls = []
for i in range(8):
    c = socket.socket(socket.AF_UNIX)
    c.connect('%s/ctl%d' % (work, i))
    c.sendall(b'p')
    assert c.recv(1) == b'P'
    ctls.append(c)
stalled = []
for i in range(8):
    h = nbd.NBD()
    h.connect_uri('nbd+unix:///s%d?socket=%s' % (i, sock))
    b = nbd.Buffer(4096)
    stalled.append((h, h.aio_pread(b, 0), b))
idle = []
for i in range(64):
    h = nbd.NBD()
    h.connect_uri('nbd+unix:///h0?socket=' + sock)
    idle.append(h)
time.sleep(0.5)
for h, c, b in stalled:
    h.poll(0)
    assert not h.aio_command_completed(c), 'a read on a paused upstream completed'
took = []
for r in range(max(rounds, 5)):
    t0 = time.monotonic()
    h = nbd.NBD()
    h.connect_uri('nbd+unix:///h0?socket=' + sock)
    h.pread(4096, (r * 4096) % (1 << 20))
    took.append((time.monotonic() - t0) * 1000)
    h.shutdown()
print('first 4 KiB read of a new client, 8 exports stalled, 64 idle connections: '
      'median %.2f ms, max %.2f ms over %d (target 100 ms)'
      % (statistics.median(took), max(took), len(took)))
for c in ctls:
    c.sendall(b'r')
    assert c.recv(1) == b'R'
EOF
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
