#!/usr/bin/env bash
# Sector engine throughput against `qemu-img convert -O luks` (the speed target: a 1 GiB
# write into a new AES-256-XTS volume on tmpfs at least 10x qemu-img's).
#
#   bash bench/volume.sh            # 1 GiB, 3 runs each, files on /dev/shm
#   SIZE=256M RUNS=5 DIR=/dev/shm bash bench/volume.sh
#
# Prints, as medians of RUNS runs (release build):
# - the engine (crates/volume/examples/volume_bench.rs: Volume over a one-key Layout,
#   aes-xts-plain64 with a 512-bit key, 512-byte sectors, 8 MiB requests from memory into a
#   new sparse file) with 1 and 2 threads and the default (all cores): write and read GB/s,
#   and GB per CPU-second (steadier than wall time on a shared machine);
# - the same requests as bare pread/pwrite on the file (no engine, no crypto): the ceiling;
# - plaintext from a file on the same tmpfs into the volume and back into a new file, with
#   the file I/O alternating with the engine (seq) or overlapped by write_from/read_to (pipe);
# - 256 KiB requests from 4 concurrent callers, engine and bare (an NBD server's pattern;
#   the NBD target is reads at >= 0.9x nbdkit serving the bare file);
# - `sectorcrypt write` of the same plaintext file into a new LUKS2 volume, when the CLI
#   has the volume commands (format/write), timed end to end;
# - `qemu-img convert -O luks` (aes-256-xts-plain64, LUKS1) of the same plaintext file;
# - the ratios. The machine is shared: compare ratios within one run.
set -euo pipefail
cd "$(dirname "$0")/.."

SIZE=${SIZE:-1G}
RUNS=${RUNS:-3}
DIR=${DIR:-/dev/shm}
work=$(mktemp -d "$DIR/sectorcrypt-volume-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT

cargo build --release -q -p sectorcrypt-volume --example volume_bench
cargo build --release -q -p sectorcrypt
tdir=$(bash scripts/target-dir.sh)
bench=$tdir/release/examples/volume_bench
cli=$tdir/release/sectorcrypt

median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
bytes() { numfmt --from=iec "$SIZE"; }
size_bytes=$(bytes)

declare -A write read
field() { sed "s/.*\"$1\":\([0-9.]*\).*/\1/" <<<"$2"; }
run() { # name, volume_bench flags...
    local name=$1 out
    shift
    out=$("$bench" --file "$work/engine.img" --size "$SIZE" --runs "$RUNS" --json "$@")
    write[$name]=$(field write_gbps "$out")
    read[$name]=$(field read_gbps "$out")
    printf '%-34s write %6.2f GB/s (%5.2f per cpu-s)   read %6.2f GB/s (%5.2f per cpu-s)\n' \
        "$name" "${write[$name]}" "$(field write_gb_per_cpu_s "$out")" \
        "${read[$name]}" "$(field read_gb_per_cpu_s "$out")"
}
echo "== engine: 8 MiB requests from one caller (the CLI's pattern)"
run "engine threads=1" --threads 1
run "engine threads=2" --threads 2
run "engine threads=default" 
run "raw pread/pwrite (no crypto)" --raw
echo "== plaintext from a file into the volume, and back into a new file (sectorcrypt write/read)"
run "files, alternating (seq)" --files seq
run "files, write_from/read_to (pipe)" --files pipe
echo "== 256 KiB requests from 4 callers (an NBD server's pattern)"
run "engine 4 callers x 256K" --callers 4 --request 256K
run "raw 4 callers x 256K" --raw --callers 4 --request 256K
awk -v ew="${write[engine 4 callers x 256K]}" -v rw="${write[raw 4 callers x 256K]}" \
    -v er="${read[engine 4 callers x 256K]}" -v rr="${read[raw 4 callers x 256K]}" \
    'BEGIN {printf "engine / raw with 4 callers x 256K: write %.2fx, read %.2fx\n", ew/rw, er/rr}'

# Plaintext source for the end-to-end tools.
head -c "$size_bytes" /dev/urandom >"$work/plain.raw"

# sectorcrypt write (end to end, when the CLI has the volume commands).
cli_gbps=""
printf 'benchmark passphrase' >"$work/key"
if "$cli" write --help >/dev/null 2>&1 && "$cli" format --help >/dev/null 2>&1; then
    samples=()
    for _ in $(seq "$RUNS"); do
        rm -f "$work/cli.img"
        # --size is the image: 16 MiB of LUKS2 metadata and keyslots, then SIZE of data.
        if ! "$cli" format "$work/cli.img" --size $((size_bytes + 16777216)) --type luks2 --cipher aes-xts-plain64 \
            --key-size 512 --pbkdf pbkdf2 --pbkdf-force-iterations 1000 \
            --key-file "$work/key" --batch >/dev/null 2>"$work/err"; then
            echo "sectorcrypt format failed: $(cat "$work/err")"; samples=(); break
        fi
        start=$(date +%s.%N)
        if ! "$cli" write "$work/cli.img" --input "$work/plain.raw" --key-file "$work/key" \
            --batch >/dev/null 2>"$work/err"; then
            echo "sectorcrypt write failed: $(cat "$work/err")"; samples=(); break
        fi
        end=$(date +%s.%N)
        samples+=("$(awk -v b="$size_bytes" -v s="$start" -v e="$end" 'BEGIN {print b/(e-s)/1e9}')")
    done
    if [ "${#samples[@]}" -gt 0 ]; then
        cli_gbps=$(printf '%s\n' "${samples[@]}" | median)
        printf 'sectorcrypt write (luks2, end to end)  %6.2f GB/s\n' "$cli_gbps"
    fi
else
    echo "sectorcrypt write: skipped (this build has no format/write commands yet)"
fi

# qemu-img convert -O luks.
if command -v qemu-img >/dev/null; then
    samples=()
    for _ in $(seq "$RUNS"); do
        rm -f "$work/qemu.img"
        start=$(date +%s.%N)
        qemu-img convert -f raw -O luks --object secret,id=sec0,data=x \
            -o key-secret=sec0,iter-time=10,cipher-alg=aes-256,cipher-mode=xts,ivgen-alg=plain64 \
            "$work/plain.raw" "$work/qemu.img"
        end=$(date +%s.%N)
        samples+=("$(awk -v b="$size_bytes" -v s="$start" -v e="$end" 'BEGIN {print b/(e-s)/1e9}')")
    done
    qemu=$(printf '%s\n' "${samples[@]}" | median)
    printf 'qemu-img convert -O luks               %6.3f GB/s\n' "$qemu"
    for t in "engine threads=1" "engine threads=2" "engine threads=default" \
        "files, alternating (seq)" "files, write_from/read_to (pipe)"; do
        awk -v a="${write[$t]}" -v q="$qemu" -v t="$t" \
            'BEGIN {printf "ratio write (%s) / qemu-img: %.1fx\n", t, a/q}'
    done
    if [ -n "$cli_gbps" ]; then
        awk -v a="$cli_gbps" -v q="$qemu" \
            'BEGIN {printf "ratio sectorcrypt write / qemu-img: %.1fx (target >= 10x)\n", a/q}'
    fi
else
    echo "qemu-img: skipped (not installed; scripts/deps.sh installs qemu-utils)"
fi
