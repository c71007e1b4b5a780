#!/usr/bin/env bash
# Load and crash under load: several NBD clients against `sectorcrypt serve` for a given
# time, each doing random reads and writes of 4 KiB to 1 MiB over its own region with every
# read verified, FLUSHes and FUA writes now and then (bench/soak_client.py, libnbd's python
# bindings, the ones nbdsh uses). Midway the server is killed with SIGKILL and restarted;
# each client then checks that every write acknowledged before its last completed FLUSH
# (or written with FUA) reads back intact, and reports whether acknowledged writes after it
# survived too. At the end every client reads its whole region back.
#
#   bash bench/soak.sh [SECONDS]            # default 60 (scripts/test.sh runs this)
#   CLIENTS=4 SIZE=128M KILLS=1 DIR=/dev/shm bash bench/soak.sh 300
#   CORRUPT_AFTER_KILL=1 bash bench/soak.sh 20   # the check's own test: must fail
#   REENCRYPT=1 bash bench/soak.sh 20       # the server re-keys the volume meanwhile
#                                           # (serve --reencrypt, 512 KiB hotzones), is
#                                           # killed in the middle of it and resumes it
#   REENCRYPT=encrypt bash bench/soak.sh 20 # the same for an encryption in place of a
#                                           # plain image with a detached header
#                                           # (reencrypt --encrypt --init-only first)
#
# With REENCRYPT=1 (512 MiB by default, 512 KiB hotzones) the first kill comes once every
# client has connected (the server's log tells), the restarted server recovers and resumes it, and at the end the
# re-encryption must have finished: no requirement left, a new volume key, and the
# clients' final read-back of their regions (the data) intact.
#
# Prints operations, bytes, errors (must be 0) and the recovery check per kill; exits
# non-zero on any error or lost write. Why not fio: its nbd engine and verify= check what
# it wrote, but cannot say which writes a FLUSH covered across a server killed under it.
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_TOTAL=${1:-60}
CLIENTS=${CLIENTS:-4}
REENCRYPT=${REENCRYPT:-0}
case "$REENCRYPT" in 0 | 1 | encrypt) ;; *) echo "REENCRYPT is 0, 1 or encrypt"; exit 1 ;; esac
# Under a re-encryption the volume is larger, so that the kill comes in its middle.
if [ "$REENCRYPT" != 0 ]; then SIZE=${SIZE:-512M}; else SIZE=${SIZE:-128M}; fi
KILLS=${KILLS:-1}
DIR=${DIR:-/dev/shm}

# The system python3, which has libnbd's bindings (an interpreter earlier on PATH may not).
py=""
for p in /usr/bin/python3 python3; do
    if "$p" -c 'import nbd' 2>/dev/null; then py=$p; break; fi
done
[ -n "$py" ] || { echo "bench/soak.sh needs libnbd's python bindings (scripts/deps.sh)"; exit 1; }
command -v cryptsetup >/dev/null || { echo "bench/soak.sh needs cryptsetup (scripts/deps.sh)"; exit 1; }
cargo build --release -q -p sectorcrypt
cli=$(bash scripts/target-dir.sh)/release/sectorcrypt

work=$(mktemp -d "$DIR/sectorcrypt-soak.XXXXXX")
server=""
clients=()
cleanup() {
    [ -n "$server" ] && kill -9 "$server" 2>/dev/null || true
    for p in "${clients[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

printf 'soak passphrase' >"$work/pass"
fast=(--pbkdf pbkdf2 --pbkdf-force-iterations 1000)
# The header: in the image, or (an encryption in place) a file of its own.
header=()
if [ "$REENCRYPT" = encrypt ]; then
    truncate -s "$SIZE" "$work/disk.img"
    "$cli" reencrypt "$work/disk.img" --encrypt --header "$work/disk.hdr" --init-only \
        --key-file "$work/pass" "${fast[@]}" >/dev/null
    header=(--header "$work/disk.hdr")
else
    truncate -s "$(($(numfmt --from=iec "$SIZE") + (16 << 20)))" "$work/disk.img"
    cryptsetup luksFormat --type luks2 --batch-mode --key-file "$work/pass" "${fast[@]}" \
        "$work/disk.img"
fi
sock=$work/nbd.sock
echo 0 >"$work/kills"

serve_args=("${header[@]}")
[ "$REENCRYPT" != 0 ] && serve_args+=(--reencrypt --hotzone-size 512K)
if [ "$REENCRYPT" = 1 ]; then
    cryptsetup luksDump -q --dump-volume-key --volume-key-file "$work/vk.before" \
        --key-file "$work/pass" "$work/disk.img" >/dev/null
fi
start_server() {
    "$cli" serve "$work/disk.img" --key-file "$work/pass" --socket "$sock" "${serve_args[@]}" \
        2>>"$work/server.log" &
    server=$!
    for _ in $(seq 400); do [ -S "$sock" ] && return 0; sleep 0.05; done
    echo "the server did not come up"; cat "$work/server.log"; exit 1
}

start_server
for i in $(seq 0 $((CLIENTS - 1))); do
    "$py" bench/soak_client.py "nbd+unix:///?socket=$sock" "$i" "$CLIENTS" "$SECONDS_TOTAL" \
        "$work" >"$work/client-$i.json" 2>"$work/client-$i.err" &
    clients+=($!)
done

# The kills, evenly spread (one, by default, in the middle).
for k in $(seq 1 "$KILLS"); do
    if [ "$REENCRYPT" != 0 ] && [ "$k" = 1 ]; then
        # Killed once every client has connected (the server logs each connection's
        # transmission phase) and read its region once (the clients' first step, which
        # expects no kill), while the re-encryption runs.
        for _ in $(seq 3000); do
            [ "$(grep -c ': transmission' "$work/server.log")" -ge "$CLIENTS" ] && break
            sleep 0.01
        done
        sleep 1.5
        grep -q "re-encrypted while served" "$work/server.log" &&
            { echo "the re-encryption ended before the kill (make SIZE larger)"; exit 1; }
        echo "killing the server during its re-encryption: $(grep -o 're-encryption at [0-9]*%' \
            "$work/server.log" | tail -1 || true)"
    else
        sleep "$(awk "BEGIN { print $SECONDS_TOTAL / ($KILLS + 1) }")"
    fi
    echo "$k" >"$work/kills"
    kill -9 "$server"
    wait "$server" 2>/dev/null || true
    echo "killed the server (SIGKILL) at kill $k; restarting"
    rm -f "$sock"
    if [ "${CORRUPT_AFTER_KILL:-0}" = 1 ]; then
        # One sector of client 0's region (the data starts at 16 MiB) loses its contents.
        dd if=/dev/urandom of="$work/disk.img" bs=4096 seek=$(((16 << 20) / 4096 + 3)) count=1 \
            conv=notrunc status=none
    fi
    start_server
done

failed=0
for i in "${!clients[@]}"; do
    wait "${clients[$i]}" || { echo "client $i failed:"; cat "$work/client-$i.err"; failed=1; }
done
if [ "$REENCRYPT" != 0 ]; then
    for _ in $(seq 600); do
        grep -q "re-encrypted while served" "$work/server.log" && break
        sleep 0.1
    done
    grep -q "re-encrypted while served" "$work/server.log" ||
        { echo "the re-encryption did not finish:"; tail -5 "$work/server.log"; failed=1; }
fi
kill "$server"
wait "$server" || { echo "the server did not shut down cleanly"; failed=1; }
server=""
if [ "$REENCRYPT" = encrypt ]; then
    cryptsetup luksDump "$work/disk.hdr" | grep -q Requirements &&
        { echo "re-encryption metadata left in the header"; failed=1; }
    echo "encryption in place: finished while served, across the kill"
elif [ "$REENCRYPT" = 1 ]; then
    cryptsetup luksDump "$work/disk.img" | grep -q Requirements &&
        { echo "re-encryption metadata left in the header"; failed=1; }
    cryptsetup luksDump -q --dump-volume-key --volume-key-file "$work/vk.after" \
        --key-file "$work/pass" "$work/disk.img" >/dev/null
    cmp -s "$work/vk.before" "$work/vk.after" && { echo "the volume key did not change"; failed=1; }
    echo "re-encryption: finished while served, across the kill; new volume key"
fi
cryptsetup open --test-passphrase --key-file "$work/pass" "${header[@]}" "$work/disk.img" ||
    { echo "cryptsetup no longer opens the volume"; failed=1; }

"$py" - "$work" "$CLIENTS" "$SECONDS_TOTAL" "$KILLS" <<'PY' || failed=1
import json, sys
work, clients, secs, kills = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
runs = []
for i in range(clients):
    text = open(f"{work}/client-{i}.json").read().strip()
    if not text:
        print(f"client {i}: no report"); sys.exit(1)
    runs.append(json.loads(text))
tot = lambda k: sum(r[k] for r in runs)
ops = tot("reads") + tot("writes") + tot("flushes")
print(f"soak: {clients} clients, {secs:.0f} s, {kills} SIGKILL(s) of the server")
print(f"operations {ops} (reads {tot('reads')}, writes {tot('writes')} of which FUA "
      f"{tot('fua_writes')}, flushes {tot('flushes')}); "
      f"bytes read {tot('bytes_read')}, written {tot('bytes_written')}; errors {tot('errors')}")
bad = tot("errors") > 0
for r in runs:
    for m in r["error_messages"]:
        print(f"  client {r['client']}: {m}")
    if r["kills_survived"] != kills:
        print(f"  client {r['client']}: survived {r['kills_survived']} of {kills} kills"); bad = True
    for c in r["recovery"]:
        print(f"  client {r['client']} kill {c['kill']}: {c['sectors']} sectors checked, "
              f"{c['written_since_flush']} written since the last FLUSH; FLUSH rule "
              f"violations {c['flush_rule_violations']}; acknowledged writes lost "
              f"{c['acknowledged_lost']}")
print("recovery check: " + ("FAILED" if bad else "passed (nothing acknowledged before a FLUSH or with FUA was lost)"))
sys.exit(1 if bad else 0)
PY
exit "$failed"
