#!/usr/bin/env bash
# Remakes the committed seed corpora (fuzz/corpus/TARGET/) from independent tools: LUKS
# images made by cryptsetup (LUKS1 and LUKS2: PBKDF2 and Argon2 keyslots, several metadata
# and keyslot-area sizes, a detached header, tokens, labels) and qemu-img (LUKS1), and the
# bytes real NBD clients (nbdinfo, qemu-io, nbdcopy, nbdsh) send to `sectorcrypt serve`.
# Run by `scripts/fuzz.sh seeds`; the corpora stay small (header regions with their
# trailing zeros cut, whole keyslot material for one image of each version).
#
# Every image uses the passphrase `fuzz` (sectorcrypt_fuzz::PASSPHRASE) and the cheapest
# KDF costs the tools accept, so the fuzz targets can unlock them.
set -euo pipefail
cd "$(dirname "$0")/.."
corpus=fuzz/corpus
# shellcheck source=bench/lib.sh
source bench/lib.sh
scratch "${TMPDIR:-/tmp}/sectorcrypt.XXXXXX"
for t in luks1 luks2 nbd cipher_spec cli_values; do
    rm -rf "${corpus:?}/$t"
    mkdir -p "$corpus/$t"
done
printf fuzz >"$work/pass"

# cut FILE BYTES OUT: the first BYTES of FILE, trailing zeros removed (at least 4096 kept).
cut_seed() {
    python3 - "$@" <<'PY'
import sys
src, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
data = open(src, "rb").read(n).rstrip(b"\0")
data += b"\0" * max(0, 4096 - len(data))
open(out, "wb").write(data)
PY
}

fast=(--batch-mode --key-file "$work/pass")
pbkdf2=(--pbkdf pbkdf2 --pbkdf-force-iterations 1000)
argon=(--pbkdf-memory 32 --pbkdf-parallel 1 --pbkdf-force-iterations 4)

# LUKS1: NAME CUT_BYTES cryptsetup-options...
luks1() {
    local name=$1 n=$2
    shift 2
    truncate -s 4M "$work/$name"
    cryptsetup luksFormat --type luks1 "${fast[@]}" --pbkdf-force-iterations 1000 "$@" "$work/$name"
    cut_seed "$work/$name" "$n" "$corpus/luks1/$name"
}
luks1 cryptsetup-xts-plain64-256 4096 --cipher aes-xts-plain64 --key-size 256
luks1 cryptsetup-xts-plain64-512-sha512 4096 --cipher aes-xts-plain64 --key-size 512 --hash sha512
luks1 cryptsetup-cbc-plain-256-sha1 4096 --cipher aes-cbc-plain --key-size 256 --hash sha1
# Whole keyslot material (128-bit key: 64000 bytes at 4096): opens with the passphrase.
luks1 cryptsetup-cbc-essiv-128-unlocks 69632 --cipher aes-cbc-essiv:sha256 --key-size 128
truncate -s 4M "$work/two"
cryptsetup luksFormat --type luks1 "${fast[@]}" --pbkdf-force-iterations 1000 "$work/two"
cryptsetup luksAddKey "${fast[@]}" --pbkdf-force-iterations 1000 --key-slot 5 "$work/two" "$work/pass"
cut_seed "$work/two" 4096 "$corpus/luks1/cryptsetup-two-keyslots"
qemu-img create -q -f luks --object "secret,id=s0,file=$work/pass" \
    -o key-secret=s0,iter-time=1,cipher-alg=aes-256,cipher-mode=xts,ivgen-alg=plain64 \
    "$work/qemu.img" 1M
cut_seed "$work/qemu.img" 4096 "$corpus/luks1/qemu-img-xts-256"
qemu-img create -q -f luks --object "secret,id=s0,file=$work/pass" \
    -o key-secret=s0,iter-time=1,cipher-alg=aes-128,cipher-mode=cbc,ivgen-alg=essiv,ivgen-hash-alg=sha256,hash-alg=sha1 \
    "$work/qemu-cbc.img" 1M
cut_seed "$work/qemu-cbc.img" 4096 "$corpus/luks1/qemu-img-cbc-essiv-128"

# LUKS2: NAME CUT_BYTES cryptsetup-options...
luks2() {
    local name=$1 n=$2
    shift 2
    truncate -s 24M "$work/$name"
    cryptsetup luksFormat --type luks2 "${fast[@]}" "$@" "$work/$name"
    cut_seed "$work/$name" "$n" "$corpus/luks2/$name"
}
luks2 cryptsetup-pbkdf2-xts-512 32768 "${pbkdf2[@]}"
luks2 cryptsetup-argon2id 32768 --pbkdf argon2id "${argon[@]}"
luks2 cryptsetup-argon2i-sector512-label 32768 --pbkdf argon2i "${argon[@]}" --sector-size 512 \
    --label fuzz-label --subsystem fuzz-subsystem
luks2 cryptsetup-metadata-64k 131072 "${pbkdf2[@]}" --luks2-metadata-size 64k --luks2-keyslots-size 1m
# Larger metadata: the primary copy only (the secondary sits past what the corpus keeps).
luks2 cryptsetup-metadata-1m-primary 1048576 "${pbkdf2[@]}" --luks2-metadata-size 1m
luks2 cryptsetup-metadata-4m-primary 4194304 "${pbkdf2[@]}" --luks2-metadata-size 4m
# Whole keyslot material (128-bit key: 64000 bytes at 32768): opens with the passphrase.
luks2 cryptsetup-cbc-essiv-128-unlocks 98304 "${pbkdf2[@]}" --cipher aes-cbc-essiv:sha256 --key-size 128
truncate -s 24M "$work/l2two"
cryptsetup luksFormat --type luks2 "${fast[@]}" "${pbkdf2[@]}" "$work/l2two"
cryptsetup luksAddKey "${fast[@]}" --pbkdf argon2id "${argon[@]}" --key-slot 7 "$work/l2two" "$work/pass"
cat >"$work/token.json" <<'JSON'
{"type":"fuzz-token","keyslots":["0"],"note":"seed"}
JSON
cryptsetup token import --json-file "$work/token.json" --token-id 3 "$work/l2two"
cut_seed "$work/l2two" 32768 "$corpus/luks2/cryptsetup-two-keyslots-token"
# A detached header: data segment at offset 0.
truncate -s 16M "$work/hdr"
truncate -s 4M "$work/data"
cryptsetup luksFormat --type luks2 "${fast[@]}" "${pbkdf2[@]}" --header "$work/hdr" "$work/data"
cut_seed "$work/hdr" 32768 "$corpus/luks2/cryptsetup-detached-header"

# librbd's layered-clone magic (Ceph's src/librbd/crypto/luks/Magic.cc): RBDL at 0, LDBR
# for the LUKS2 secondary copy, the checksums left as computed over LUKS / SKUL.
rbd_clone() { # SOURCE-SEED OUT
    python3 - "$1" "$2" <<'PY'
import sys
d = bytearray(open(sys.argv[1], "rb").read())
if d[6:8] == b"\0\2":
    size = int.from_bytes(d[8:16], "big")
    d[size:size + 4] = b"LDBR"
d[0:4] = b"RBDL"
open(sys.argv[2], "wb").write(d)
PY
}
for v in luks1 luks2; do
    rbd_clone "$corpus/$v/cryptsetup-cbc-essiv-128-unlocks" "$corpus/$v/rbd-clone-magic-unlocks"
done

# NBD: what real clients send to `sectorcrypt serve` of a 1 MiB LUKS1 volume (512-byte
# sectors), the export the nbd target's memory stands for.
cargo build --release -q -p sectorcrypt
qemu-img create -q -f luks --object "secret,id=s0,file=$work/pass" \
    -o key-secret=s0,iter-time=1 "$work/nbd.img" 1M
target/release/sectorcrypt serve "$work/nbd.img" --key-file "$work/pass" --socket "$work/srv.sock" \
    --export-name fuzz --allow-discards 2>/dev/null &
pids+=($!)
python3 fuzz/nbd-capture.py "$work/cap.sock" "$work/srv.sock" "$corpus/nbd" client &
pids+=($!)
for _ in $(seq 200); do [ -S "$work/srv.sock" ] && [ -S "$work/cap.sock" ] && break; sleep 0.05; done
uri="nbd+unix:///fuzz?socket=$work/cap.sock"
nbdinfo "$uri" >/dev/null
nbdinfo --list "nbd+unix://?socket=$work/cap.sock" >/dev/null
qemu-io -f raw "$uri" -c 'write -P 0x5a 4096 8192' -c 'read -P 0x5a 4096 8192' -c 'flush' \
    -c 'write -z 0 1024' -c 'write -f -P 7 512 512' -c 'discard 65536 4096' >/dev/null
nbdcopy "$uri" null:
# nbdsh runs the python3 on PATH: put the system one (with libnbd's bindings) first.
PATH="/usr/bin:$PATH" nbdsh -u "$uri" -c 'h.pwrite(b"\x11" * 4096, 8192, nbd.CMD_FLAG_FUA)' -c 'h.zero(4096, 12288)' \
    -c 'h.trim(4096, 16384)' -c 'h.flush()' -c 'h.pread(512, 8192)'
sleep 0.5

# Cipher strings: every known one with a key choice, flags, sector size, first IV and data;
# and names that are almost right.
python3 - "$corpus/cipher_spec" <<'PY'
import os, struct, sys
out = sys.argv[1]
names = ["aes-xts-plain64", "aes-xts-plain", "aes-cbc-plain64", "aes-cbc-plain",
         "aes-cbc-essiv:sha256", "aes-ecb"]
for i, name in enumerate(names):
    for j, (size, flags, first) in enumerate([(512, 0, 0), (4096, 1, 2**64 - 3), (16, 3, 2**32 - 1)]):
        body = bytes([j, flags]) + bytes(range(64)) + struct.pack("<HQ", size - 1, first)
        body += bytes((k * 7 + i) % 256 for k in range(min(2 * size, 4096) + (5 if flags & 2 else 0)))
        open(os.path.join(out, f"{name.replace(':', '_')}-{j}"), "wb").write(name.encode() + b"\n" + body)
for bad in ["aes-xts-plain64 ", "AES-XTS-PLAIN64", "aes-cbc-essiv:sha1", "aes", ""]:
    open(os.path.join(out, "bad-" + (bad.strip().replace(":", "_") or "empty")), "wb").write(bad.encode() + b"\n")
PY

# CLI values: sizes, hex, key files (first byte: 0 size, 1 hex, 2 key file).
python3 - "$corpus/cli_values" <<'PY'
import os, sys
out = sys.argv[1]
seeds = {
    "size-1G": b"\x001G", "size-256MiB": b"\x00 256MiB ", "size-4096": b"\x004096",
    "size-16tb": b"\x0016tb", "size-overflow": b"\x0099999999999T", "size-bad-unit": b"\x001X",
    "hex-spaced": b"\x0100 ff\n10\t aB", "hex-odd": b"\x01abc", "hex-junk": b"\x010g",
    "keyfile-pieces": b"\x02\x03\x01\x02\x05secret key bytes\n", "keyfile-empty": b"\x02\x00",
}
for name, data in seeds.items():
    open(os.path.join(out, name), "wb").write(data)
PY
du -sh "$corpus"/*
