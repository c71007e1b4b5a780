#!/usr/bin/env bash
# Reading a 1 GiB LUKS2 volume (aes-xts-plain64, 512-bit key, 4096-byte sectors) through
# libsectorcrypt from C (sectorcrypt_pread in 1 MiB and 4 KiB requests) beside
# `sectorcrypt read` of the same volume to /dev/null, three rounds each, release builds.
# The image is sparse (its ciphertext is zeros, in the page cache): the figures are the
# engine and the binding, not the disk.
#
#   bash crates/capi/bench/pread.sh [DIR]    (DIR: scratch folder, default a new one in /tmp)
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
dir=${1:-$(mktemp -d /tmp/capi-bench.XXXXXX)}
mkdir -p "$dir"
cd "$root"
bash scripts/install-lib.sh "$dir/prefix" >/dev/null
cargo build --release -q -p sectorcrypt
export PKG_CONFIG_PATH=$dir/prefix/lib/pkgconfig
cc -O2 -std=c11 -Wall -Wextra -Werror crates/capi/bench/pread.c \
    $(pkg-config --cflags --libs sectorcrypt) -Wl,-rpath,"$dir/prefix/lib" -o "$dir/pread"
img=$dir/bench.img
rm -f "$img"
truncate -s $((1024 + 16))M "$img"
printf 'bench passphrase' >"$dir/pass"
cryptsetup luksFormat -q --type luks2 --cipher aes-xts-plain64 --key-size 512 \
    --sector-size 4096 --pbkdf pbkdf2 --pbkdf-force-iterations 1000 \
    --key-file "$dir/pass" "$img"
cat "$img" >/dev/null   # the page cache holds the image before the first round
for round in 1 2 3; do
    echo "round $round"
    "$dir/pread" "$img" "$dir/pass" $((1 << 20))
    "$dir/pread" "$img" "$dir/pass" 4096
    start=$(date +%s.%N)
    target/release/sectorcrypt read "$img" --key-file "$dir/pass" >/dev/null
    end=$(date +%s.%N)
    echo "sectorcrypt read: $(echo "$start $end" | awk '{printf "%.2f GB/s (%.3f s, open and close included)", 1073741824 / ($2 - $1) / 1e9, $2 - $1}')"
done
rm -f "$img"
