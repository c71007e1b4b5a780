#!/usr/bin/env bash
# The Python package's read speed against the command line's (the target: reading 1 GiB
# through `Volume.readinto` into a preallocated buffer at >= 0.8x `sectorcrypt read`).
#
#   bash bench/python.sh                 # 1 GiB, 3 runs each, the volume on /dev/shm
#   SIZE=256M RUNS=5 DIR=/dev/shm bash bench/python.sh
#
# Both release builds (the wheel by maturin, installed into the venv of `scripts/deps.sh
# python`). One LUKS2 volume (aes-xts-plain64, 512-bit key, 4096-byte sectors) is made by
# `sectorcrypt format` and filled by `sectorcrypt write`; then, alternating, RUNS times:
# - `sectorcrypt read IMG > /dev/null`, timed end to end (start, unlock, read, exit);
# - in one Python process: `sectorcrypt.open`, then `Volume.readinto` of the whole volume
#   into a bytearray allocated (and touched) beforehand, timed around the readinto; and the
#   same with the open included.
# Prints GB/s medians and the ratios. The machine is shared: compare within one run.
set -euo pipefail
cd "$(dirname "$0")/.."

source bench/lib.sh
scratch "${DIR:-/dev/shm}/sectorcrypt-python-bench.XXXXXX"
SIZE=${SIZE:-1G}
RUNS=${RUNS:-3}

cargo build --release -q -p sectorcrypt
SECTORCRYPT_PYTEST=0 bash crates/python/run-tests.sh --release > /dev/null
cli=$(bash scripts/target-dir.sh)/release/sectorcrypt
py=target/venv/bin/python
size_bytes=$(numfmt --from=iec "$SIZE")
img=$work/vol.img
key=$work/key
printf 'bench passphrase' > "$key"
"$cli" format "$img" --size $((size_bytes + 16 * 1048576)) --sector-size 4096 \
    --pbkdf pbkdf2 --pbkdf-force-iterations 1000 --key-file "$key" --batch > /dev/null
head -c "$size_bytes" /dev/zero | "$cli" write "$img" --key-file "$key"

gbps() { awk -v b="$size_bytes" -v s="$1" 'BEGIN {printf "%.3f", b / s / 1e9}'; }

cli_runs="" py_runs="" py_open_runs=""
for r in $(seq "$RUNS"); do
    t0=$(date +%s.%N)
    "$cli" read "$img" --key-file "$key" > /dev/null
    t1=$(date +%s.%N)
    cli_runs+="$(gbps "$(awk -v a="$t0" -v z="$t1" 'BEGIN {print z - a}')") "
    read -r read_s open_s < <("$py" - "$img" "$key" "$size_bytes" <<'PY'
import sys, time
import sectorcrypt
img, key, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
buf = bytearray(n)
buf[::4096] = b"\1" * len(range(0, n, 4096))  # pages touched before the clock starts
t0 = time.perf_counter()
with sectorcrypt.open(img, key_file=key) as vol:
    t1 = time.perf_counter()
    got = vol.readinto(buf)
    t2 = time.perf_counter()
assert got == n, (got, n)
print(t2 - t1, t2 - t0)
PY
    )
    py_runs+="$(gbps "$read_s") "
    py_open_runs+="$(gbps "$open_s") "
done
c=$(median <<<"$cli_runs")
p=$(median <<<"$py_runs")
po=$(median <<<"$py_open_runs")
echo "reading $SIZE (aes-xts-plain64, 512-bit key, 4096-byte sectors) from ${DIR:-/dev/shm}, medians of $RUNS:"
printf '  %-46s %7s GB/s   (runs: %s)\n' "sectorcrypt read > /dev/null" "$c" "$cli_runs"
printf '  %-46s %7s GB/s   (runs: %s)\n' "python Volume.readinto (bytearray)" "$p" "$py_runs"
printf '  %-46s %7s GB/s   (runs: %s)\n' "python open + Volume.readinto" "$po" "$py_open_runs"
awk -v p="$p" -v po="$po" -v c="$c" \
    'BEGIN {printf "ratio python/cli: readinto %.2fx, open + readinto %.2fx (target >= 0.8x)\n", p / c, po / c}'
