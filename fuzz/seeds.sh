#!/usr/bin/env bash
# Remakes the committed seed corpora (fuzz/corpus/TARGET/) from independent tools: LUKS
# images made by cryptsetup (LUKS1 and LUKS2: PBKDF2 and Argon2 keyslots, several metadata
# and keyslot-area sizes, a detached header, tokens, labels) and qemu-img (LUKS1), and the
# bytes real NBD clients (nbdinfo, qemu-io, nbdcopy, nbdsh) send to `sectorcrypt serve`;
# GELI metadata made by FreeBSD (the images of crates/cli/tests/data/geli/, John the
# Ripper's $geli$ vectors) and by `sectorcrypt geli init` in the variants no public
# FreeBSD image has; what nbdkit and qemu-nbd send to the NBD client; NBD URIs (libnbd's
# tests, the NBD project's doc/uri.md); rbd: specs; TLS certificate directories made by
# openssl; BitLocker metadata cut from cryptsetup's Windows-made images; FileVault 2
# metadata cut from cryptsetup's test image; VeraCrypt and TrueCrypt headers decrypted from
# cryptsetup's test images. Run by `scripts/fuzz.sh seeds`; the corpora stay small (header regions with
# their trailing zeros cut, whole keyslot material for one image of each version).
#
#   bash fuzz/seeds.sh [TARGET...]     # the named targets' corpora only (default: all)
#
# Every LUKS image uses the passphrase `fuzz` (sectorcrypt_fuzz::PASSPHRASE), every GELI
# provider `password` (sectorcrypt_fuzz::GELI_PASSPHRASE, that of the FreeBSD images), and
# the cheapest KDF costs the tools accept, so the fuzz targets can unlock them.
set -euo pipefail
cd "$(dirname "$0")/.."
corpus=fuzz/corpus
all=(luks1 luks2 nbd cipher_spec cli_values geli nbd_client nbd_uri rbd_spec pem bitlk fvault2 tcrypt)
only=("$@")
[ "${#only[@]}" -gt 0 ] || only=("${all[@]}")
for t in "${only[@]}"; do
    [[ " ${all[*]} " == *" $t "* ]] || { echo "unknown target $t (${all[*]})"; exit 2; }
done
want() { [[ " ${only[*]} " == *" $1 "* ]]; }
# shellcheck source=bench/lib.sh
source bench/lib.sh
scratch "${TMPDIR:-/tmp}/sectorcrypt.XXXXXX"
for t in "${only[@]}"; do
    rm -rf "${corpus:?}/$t"
    mkdir -p "$corpus/$t"
done
printf fuzz >"$work/pass"
# The cargo target directory (CARGO_TARGET_DIR, or the workspace's target/).
target_dir=$(bash scripts/target-dir.sh)

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

# LUKS options for cryptsetup.
fast=(--batch-mode --key-file "$work/pass")
pbkdf2=(--pbkdf pbkdf2 --pbkdf-force-iterations 1000)
argon=(--pbkdf-memory 32 --pbkdf-parallel 1 --pbkdf-force-iterations 4)

if want luks1; then
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
fi

if want luks2; then
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
fi

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
    want "$v" || continue
    rbd_clone "$corpus/$v/cryptsetup-cbc-essiv-128-unlocks" "$corpus/$v/rbd-clone-magic-unlocks"
done

if want nbd; then
    # NBD: what real clients send to `sectorcrypt serve` of a 1 MiB LUKS1 volume (512-byte
    # sectors), the export the nbd target's memory stands for.
    cargo build --release -q -p sectorcrypt
    qemu-img create -q -f luks --object "secret,id=s0,file=$work/pass" \
        -o key-secret=s0,iter-time=1 "$work/nbd.img" 1M
    "$target_dir/release/sectorcrypt" serve "$work/nbd.img" --key-file "$work/pass" --socket "$work/srv.sock" \
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
fi

if want cipher_spec; then
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
fi

if want cli_values; then
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
fi

# GELI: the end of a provider, its metadata sector last (the geli target's input).
if want geli; then
    # Made by FreeBSD's geli: the metadata sectors of the images the GELI tests use
    # (crates/cli/tests/data/geli/SOURCES.md; passphrase `password`).
    for img in crates/cli/tests/data/geli/*.img.xz; do
        xz -dc "$img" | tail -c 512 >"$corpus/geli/freebsd-$(basename "$img" .img.xz)"
    done
    # John the Ripper's $geli$ vectors: the key fields of FreeBSD-made metadata (version,
    # algorithm, key length, slots, PBKDF2 iterations, salt, master-key slots) in metadata
    # of a 1 MiB provider of 512-byte sectors, no flags (what the vectors do not hold).
    # Their passphrases are not the seeds' own: the slots are tried, and fail.
    python3 - crates/cli/tests/data/geli/john_vectors.json "$corpus/geli" <<'PY'
import hashlib, json, os, struct, sys
for i, v in enumerate(json.load(open(sys.argv[1]))):
    f = v["hash"].split("$")[2:]
    version, ealgo, keylen, aalgo, keys, iterations = (int(x) for x in f[1:7])
    salt, mkeys = bytes.fromhex(f[7]), bytes.fromhex(f[8])
    assert len(salt) == 64 and len(mkeys) == 384
    md = b"GEOM::ELI".ljust(16, b"\0") + struct.pack("<IIHHH", version, 0, ealgo, keylen, aalgo)
    md += struct.pack("<QIBi", 1 << 20, 512, keys, iterations) + salt + mkeys
    md += hashlib.md5(md).digest()
    name = f"john-{i}-v{version}-keylen{keylen}-iterations{iterations}"
    open(os.path.join(sys.argv[2], name), "wb").write(md.ljust(512, b"\0"))
PY
    # Made by `sectorcrypt geli init`, in the variants no public FreeBSD image has.
    cargo build -q -p sectorcrypt
    printf password >"$work/geli-pass"
    printf 'fuzz keyfile\n' >"$work/geli-keyfile" # sectorcrypt_fuzz::GELI_KEYFILE
    geli_init() { # NAME geli-init-options...
        local name=$1
        shift
        rm -f "$work/geli.img"
        truncate -s 1M "$work/geli.img"
        "$target_dir/debug/sectorcrypt" geli init -B none "$@" "$work/geli.img" >/dev/null
        tail -c 512 "$work/geli.img" >"$corpus/geli/sectorcrypt-$name"
    }
    pass=(-J "$work/geli-pass")
    geli_init aes-xts-256-pbkdf2-300 "${pass[@]}" -l 256 -i 300
    geli_init aes-cbc-192 "${pass[@]}" -e AES-CBC -l 192 -i 0
    geli_init keyfile-only -P -K "$work/geli-keyfile"
    geli_init keyfile-and-passphrase "${pass[@]}" -K "$work/geli-keyfile" -i 0
    geli_init sector-4096 "${pass[@]}" -s 4096 -i 0
    geli_init auth-hmac-sha256 "${pass[@]}" -a HMAC/SHA256 -i 0
    geli_init auth-null-hmac-sha1 "${pass[@]}" -e NULL -a HMAC/SHA1 -i 0
    geli_init flags-bdgTR "${pass[@]}" -b -d -g -T -R -i 0
    for v in 1 2 3 4 5 6; do
        geli_init "version-$v" "${pass[@]}" -V "$v" -i 0
    done
    # Version 0 (no md_aalgo: the fields after it two bytes earlier) from the version-1
    # provider, and a provider of 4096-byte sectors (its metadata at the start of its
    # last 4 KiB) from the sector-4096 one; the MD5 recomputed.
    python3 - "$corpus/geli" <<'PY'
import hashlib, os, sys
d = sys.argv[1]
v1 = open(os.path.join(d, "sectorcrypt-version-1"), "rb").read()
v0 = bytearray(v1[:16]) + (0).to_bytes(4, "little") + v1[20:28] + v1[30:495]
v0 += hashlib.md5(v0).digest()
open(os.path.join(d, "sectorcrypt-version-0"), "wb").write(bytes(v0).ljust(512, b"\0"))
s4k = open(os.path.join(d, "sectorcrypt-sector-4096"), "rb").read()
open(os.path.join(d, "sectorcrypt-provider-4096"), "wb").write(s4k.ljust(4096, b"\0"))
PY
fi

# The NBD client: what nbdkit and qemu-nbd send to the nbd_client target's session
# (examples/nbd_client_session.rs), recorded by nbd-capture.py in `replies` mode.
if want nbd_client; then
    cargo build -q -p sectorcrypt-fuzz --example nbd_client_session
    session="$target_dir/debug/examples/nbd_client_session"
    # capture NAME SERVER-COMMAND...: the command serves on $work/up.sock ({sock} in it).
    capture() {
        local name=$1 server proxy
        shift
        rm -f "$work/up.sock" "$work/cap.sock"
        "${@//\{sock\}/$work/up.sock}" 2>/dev/null &
        server=$!
        pids+=("$server")
        wait_sock "$work/up.sock"
        python3 fuzz/nbd-capture.py "$work/cap.sock" "$work/up.sock" "$work" "$name" replies &
        proxy=$!
        pids+=("$proxy")
        wait_sock "$work/cap.sock"
        echo "$name: $("$session" "$scheme+unix:///fuzz?socket=$work/cap.sock$query")"
        sleep 0.3
        kill "$proxy" "$server" 2>/dev/null || true
        wait "$proxy" "$server" 2>/dev/null || true
        mv "$work/$name-1" "$corpus/nbd_client/$name"
    }
    scheme=nbd query=
    nbdkit=(nbdkit -f -U {sock})
    capture nbdkit-memory "${nbdkit[@]}" memory 1M
    capture nbdkit-memory-simple-replies "${nbdkit[@]}" --no-sr memory 1M
    capture nbdkit-memory-read-only "${nbdkit[@]}" -r memory 1M
    capture nbdkit-memory-1000-bytes "${nbdkit[@]}" memory 1000
    capture nbdkit-blocksize-policy "${nbdkit[@]}" --filter=blocksize-policy memory 1M \
        blocksize-minimum=512 blocksize-preferred=4096 blocksize-maximum=8192
    capture nbdkit-blocksize-policy-4096 "${nbdkit[@]}" --filter=blocksize-policy memory 1M \
        blocksize-minimum=4096 blocksize-preferred=65536 blocksize-maximum=65536
    capture nbdkit-error-eio-enospc "${nbdkit[@]}" --filter=error memory 1M \
        error-pread=EIO error-pread-rate=100% error-pwrite=ENOSPC error-pwrite-rate=100%
    capture nbdkit-error-eio-simple-replies "${nbdkit[@]}" --no-sr --filter=error memory 1M \
        error=EIO error-rate=100%
    capture nbdkit-full "${nbdkit[@]}" full 1M
    capture nbdkit-pattern "${nbdkit[@]}" pattern 1M
    capture nbdkit-data-sparse "${nbdkit[@]}" data '1 2 3 @65536 4 5 6' size=1M
    capture nbdkit-no-zero-single-conn "${nbdkit[@]}" --filter=nozero --filter=multi-conn \
        memory 1M multi-conn-mode=disable
    # A plugin of reads and writes only: no flush, FUA, trim or zeroes to send.
    capture nbdkit-eval-read-write "${nbdkit[@]}" eval get_size='echo 1048576' \
        pread='dd if=/dev/zero count=$3 iflag=count_bytes status=none' pwrite='cat >/dev/null'
    # qemu-nbd: a raw file with data at 4 KiB and holes elsewhere (read replies of
    # OFFSET_DATA and OFFSET_HOLE chunks), read-only, a qcow2 image, an unknown export.
    truncate -s 1M "$work/nbd-client.raw"
    printf 'qemu-nbd seed data' | dd of="$work/nbd-client.raw" bs=1 seek=4096 conv=notrunc 2>/dev/null
    qemu-img create -q -f qcow2 "$work/nbd-client.qcow2" 1M
    qemu=(qemu-nbd -k {sock} -x fuzz)
    capture qemu-nbd-raw "${qemu[@]}" -f raw --discard=unmap "$work/nbd-client.raw"
    capture qemu-nbd-raw-read-only "${qemu[@]}" -f raw -r "$work/nbd-client.raw"
    capture qemu-nbd-qcow2 "${qemu[@]}" -f qcow2 --discard=unmap --detect-zeroes=unmap \
        "$work/nbd-client.qcow2"
    capture qemu-nbd-unknown-export qemu-nbd -k {sock} -x other -f raw "$work/nbd-client.raw"
    # TLS (nbds+unix://, the certificate unchecked: sectorcrypt_fuzz::TLS_QUERY), marked by
    # the top bit of the first record's wait: nbdkit without TLS refuses NBD_OPT_STARTTLS;
    # with it, the TLS records it sent do not replay (the client's random differs) and the
    # handshake fails on them.
    scheme=nbds query='&tls-verify-peer=false&tls-certificates=/nonexistent/sectorcrypt-fuzz'
    mkdir -p "$work/nbd-pki"
    (
        cd "$work/nbd-pki"
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
            -keyout server-key.pem -out server-cert.pem -subj /CN=localhost -days 3650 2>/dev/null
        cp server-cert.pem ca-cert.pem
    )
    capture nbdkit-starttls-refused "${nbdkit[@]}" memory 1M
    capture nbdkit-tls-required "${nbdkit[@]}" --tls=require \
        --tls-certificates="$work/nbd-pki" memory 1M
    for f in nbdkit-starttls-refused nbdkit-tls-required; do
        python3 -c 'import sys; d = bytearray(open(sys.argv[1], "rb").read()); d[0] |= 0x80
open(sys.argv[1], "wb").write(d)' "$corpus/nbd_client/$f"
    done
fi

# NBD URIs: libnbd's tests (tests/Makefile.am, tests/connect-*.c, info/*.sh,
# copy/copy-tls.sh, tests/connect-uri-nbd-vsock.sh) and the forms of the NBD project's
# doc/uri.md (every scheme, IPv6 literals, percent-encoding, the query parameters).
if want nbd_uri; then
    python3 - "$corpus/nbd_uri" <<'PY'
import os, sys
uris = {
    # libnbd's tests.
    "libnbd-tcp-port": "nbd://localhost:10810/",
    "libnbd-tcp-127": "nbd://127.0.0.1:10810/",
    "libnbd-tcp6": "nbd://[::1]:10810/",
    "libnbd-unix": "nbd+unix:///?socket=/tmp/unixsock",
    "libnbd-unix-no-slash": "nbd+unix://?socket=/tmp/sock",
    "libnbd-unix-export": "nbd+unix:///hello?socket=/tmp/sock",
    "libnbd-tls-certificates": "nbds://localhost:10811/?tls-certificates=pki",
    "libnbd-tls-unix-user": "nbds+unix://alice@/?tls-certificates=pki&socket=/tmp/sock",
    "libnbd-tls-psk": "nbds://alice@localhost:10812/?tls-psk-file=keys.psk",
    "libnbd-tls-psk-unix": "nbds+unix://alice@/?tls-psk-file=keys.psk&socket=/tmp/sock",
    "libnbd-tls-unix-certificates": "nbds+unix:///?socket=/tmp/sock&tls-certificates=/tmp/pki",
    "libnbd-vsock": "nbd+vsock://1:10809",
    "libnbd-export-percent": "nbd+unix:///%25%25?socket=/tmp/sock",
    "libnbd-export-space": "nbd+unix:///hello%20world?socket=/tmp/sock",
    "libnbd-export-plus": "nbd+unix:///hello+world?socket=/tmp/sock",
    "libnbd-export-utf8": "nbd+unix:///%E3%83%AA%E3%82%BD%E3%83%BC%E3%82%B9?socket=/tmp/sock",
    "libnbd-localhost": "nbd://localhost",
    "libnbd-example": "nbd://example.com",
    "libnbd-unix-one-slash": "nbd+unix:/?socket=/tmp/sock",
    # The NBD URI specification's forms.
    "spec-export": "nbd://example.com/disk",
    "spec-export-empty": "nbd://example.com/",
    "spec-export-slash": "nbd://example.com//disk",
    "spec-tcp-scheme": "nbd+tcp://example.com:10809/disk",
    "spec-tls-tcp-scheme": "nbds+tcp://example.com/disk",
    "spec-ipv4-port": "nbd://192.0.2.1:10809/export",
    "spec-ipv6": "nbd://[2001:db8::1]/export",
    "spec-ipv6-port": "nbds://[2001:db8::1]:10810/export?tls-verify-peer=false",
    "spec-ipv6-zone": "nbd://[fe80::1%25eth0]:10809/",
    "spec-unix-abstract": "nbd+unix:///export?socket=%00abstract",
    "spec-tls-unix": "nbds+unix:///export?socket=/run/nbd.sock&tls-certificates=/etc/pki/libnbd",
    "spec-tls-type-x509": "nbds://h/e?tls-type=x509&tls-hostname=server.example.com",
    "spec-tls-type-psk": "nbds://alice@h/e?tls-type=psk&tls-psk-file=/tmp/keys.psk",
    "spec-tls-verify-peer": "nbds://h/e?tls-verify-peer=true&tls-verify-peer=0",
    "spec-vsock-tls": "nbds+vsock://2:10809/export",
    "spec-percent-host": "nbd://ex%61mple.com/a%2Fb%3Fc",
    "spec-fragment": "nbd://h/e#frag",
    "spec-userinfo": "nbd://user:pass@h:1/e",
    "spec-unknown-query": "nbd://h/e?tls-priority=NORMAL",
    "spec-empty-query": "nbd://h/e?&&",
}
for name, uri in uris.items():
    open(os.path.join(sys.argv[1], name), "w").write(uri)
PY
fi

# rbd: specs in every form the parser takes (qemu's block/rbd.c syntax).
if want rbd_spec; then
    python3 - "$corpus/rbd_spec" <<'PY'
import os, sys
specs = {
    "pool-image": "rbd:rbd/img",
    "pool-image-snap": "rbd:pool/img@snap1",
    "namespace": "rbd:pool/ns/img",
    "namespace-snap-options": "rbd:pool/ns/img@snap1:conf=/etc/ceph/ceph.conf:id=alice:mon_host=1.2.3.4",
    "conf": "rbd:pool/image:conf=/etc/ceph/ceph.conf",
    "id": "rbd:pool/image:id=admin",
    "key-secret": "rbd:pool/image:id=admin:key=AQBhc2Rmc2RmYXNkZmFzZGZhc2RmYXNkZmFzZA==",
    "keyring": "rbd:pool/image:keyring=/etc/ceph/ceph.client.admin.keyring",
    "mon-host-escaped": r"rbd:p/img:mon_host=[v2\:127.0.0.1\:3300/0,v1\:127.0.0.1\:6789/0]",
    "escapes": r"rbd:p/we\@ird\:name:id=u:conf=/a\\b",
    "escaped-slash": r"rbd:p/a\/b",
    "escaped-equals": r"rbd:p/img:opt\=x=y",
    "trailing-backslash": "rbd:p/img\\",
    "timeout-option": "rbd:pool/img:rados_osd_op_timeout=30:rados_mon_op_timeout=30",
    "unicode": "rbd:p\u00f8ol/\u00efmage@sn\u00e4p",
    "bad-no-pool": "rbd:img",
    "bad-no-prefix": "nbd:p/img",
    "bad-empty-pool": "rbd:/img",
    "bad-empty-image": "rbd:p/",
    "bad-empty-snap": "rbd:p/img@",
    "bad-option-no-value": "rbd:p/img:conf",
    "bad-option-no-name": "rbd:p/img:=x",
    "bad-empty-namespace": "rbd:p//img",
    "bad-key-then-junk": "rbd:p/img:key=AQSECRET:oops",
}
for name, spec in specs.items():
    open(os.path.join(sys.argv[1], name), "w").write(spec)
PY
fi

# TLS certificate directories (the pem target's input: a byte of which files exist and
# of the server's setup, then the files separated by NULs), made with openssl as the
# nbdkit and libnbd manuals make them.
if want pem; then
    (
        cd "$work"
        o() { openssl "$@" 2>/dev/null; }
        printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >san.ext
        printf 'basicConstraints=critical,CA:TRUE\nkeyUsage=keyCertSign,cRLSign\n' >ca.ext
        o req -x509 -newkey rsa:2048 -nodes -keyout ca-key.pem -out ca-cert.pem \
            -subj /CN=fuzz-ca -days 3650
        o req -newkey rsa:2048 -nodes -keyout inter-key.pem -out inter.csr -subj /CN=fuzz-intermediate
        o x509 -req -in inter.csr -CA ca-cert.pem -CAkey ca-key.pem -CAcreateserial \
            -extfile ca.ext -out inter-cert.pem -days 3650
        # sign NAME CN SIGNER KEY-ALGORITHM...: NAME-key.pem and NAME-cert.pem.
        sign() {
            local name=$1 cn=$2 signer=$3
            shift 3
            o genpkey "$@" -out "$name-key.pem"
            o req -new -key "$name-key.pem" -out "$name.csr" -subj "/CN=$cn"
            o x509 -req -in "$name.csr" -CA "$signer-cert.pem" -CAkey "$signer-key.pem" \
                -CAcreateserial -extfile san.ext -out "$name-cert.pem" -days 3650
        }
        sign server-rsa localhost ca -algorithm RSA -pkeyopt rsa_keygen_bits:2048
        sign server-ec localhost ca -algorithm EC -pkeyopt ec_paramgen_curve:P-256
        sign server-ed25519 localhost ca -algorithm ED25519
        sign server-inter localhost inter -algorithm EC -pkeyopt ec_paramgen_curve:P-384
        sign client-ec fuzz-client ca -algorithm EC -pkeyopt ec_paramgen_curve:P-256
        o ec -in server-ec-key.pem -out server-ec-key.sec1.pem
        o rsa -in server-rsa-key.pem -traditional -out server-rsa-key.pkcs1.pem
        o pkcs8 -topk8 -in server-ec-key.pem -v2 aes-256-cbc -passout pass:fuzz \
            -out server-ec-key.encrypted.pem
        cat server-inter-cert.pem inter-cert.pem >server-inter-chain.pem
    )
    python3 - "$work" "$corpus/pem" <<'PY'
import os, sys
w, out = sys.argv[1:3]
def f(name):
    return open(os.path.join(w, name), "rb").read()
# ca-cert.pem, server-cert.pem, server-key.pem, client-cert.pem, client-key.pem (None:
# absent); the server verifies clients; TLS is required.
dirs = {
    "rsa-server": ([None, f("server-rsa-cert.pem"), f("server-rsa-key.pem"), None, None], 0, 0),
    "rsa-pkcs1-key": ([f("ca-cert.pem"), f("server-rsa-cert.pem"), f("server-rsa-key.pkcs1.pem"), None, None], 0, 1),
    "ec-server-verify-peer": ([f("ca-cert.pem"), f("server-ec-cert.pem"), f("server-ec-key.pem"), None, None], 1, 1),
    "ec-sec1-key": ([f("ca-cert.pem"), f("server-ec-cert.pem"), f("server-ec-key.sec1.pem"), None, None], 0, 0),
    "ed25519-server": ([f("ca-cert.pem"), f("server-ed25519-cert.pem"), f("server-ed25519-key.pem"), None, None], 0, 1),
    "chain-with-intermediate": ([f("ca-cert.pem"), f("server-inter-chain.pem"), f("server-inter-key.pem"), None, None], 1, 0),
    "client-and-server": ([f("ca-cert.pem"), f("server-ec-cert.pem"), f("server-ec-key.pem"), f("client-ec-cert.pem"), f("client-ec-key.pem")], 1, 1),
    "client-only": ([f("ca-cert.pem"), None, None, f("client-ec-cert.pem"), f("client-ec-key.pem")], 0, 0),
    "mismatched-key": ([f("ca-cert.pem"), f("server-rsa-cert.pem"), f("server-ec-key.pem"), None, None], 0, 0),
    "encrypted-key": ([f("ca-cert.pem"), f("server-ec-cert.pem"), f("server-ec-key.encrypted.pem"), None, None], 0, 0),
    "certificate-as-key": ([f("ca-cert.pem"), f("server-ec-cert.pem"), f("server-ec-cert.pem"), None, None], 0, 0),
    "key-as-ca": ([f("server-ec-key.pem"), f("server-ec-cert.pem"), f("server-ec-key.pem"), None, None], 1, 0),
    "client-key-missing": ([f("ca-cert.pem"), None, None, f("client-ec-cert.pem"), None], 0, 0),
    "empty-files": ([b"", b"", b"", None, None], 1, 1),
}
for name, (files, verify, required) in dirs.items():
    flags = verify << 5 | required << 6
    parts = []
    for i, content in enumerate(files):
        if content is not None:
            flags |= 1 << i
            parts.append(content)
    open(os.path.join(out, name), "wb").write(bytes([flags]) + b"\0".join(parts))
PY
fi

# BitLocker: cryptsetup's Windows-made images (crates/volume/tests/data/bitlk/), each cut
# to its volume header and its three FVE blocks (with their validation) moved next to it,
# one every 4096 bytes (each block with the 88 bytes of validation after it), the header's and the blocks' offsets rewritten and the CRC-32s
# recomputed. The SHA-256 sealed under each VMK then no longer matches: a clear key opens
# its VMK and stops at the validation.
if want bitlk; then
    tar -xJf crates/volume/tests/data/bitlk/bitlk-images.tar.xz -C "$work"
    python3 - "$work/bitlk-images" "$corpus/bitlk" <<'PY'
import glob, os, struct, sys, zlib
src, out = sys.argv[1], sys.argv[2]
for img in sorted(glob.glob(os.path.join(src, "*.img"))):
    with open(img, "rb") as f:
        head = bytearray(f.read(512))
        at = 424 if head[3:11] == b"MSWIN4.1" else 160
        offs = struct.unpack_from("<3Q", head, at + 16)
        blocks = []
        for o in offs:
            f.seek(o)
            b = bytearray(f.read(65536))  # an FVE area
            n = struct.unpack_from("<H", b, 8)[0] << 4
            blocks.append(b[: n + 88])
    step = -(-max(len(b) for b in blocks) // 4096) * 4096
    new = [step, 2 * step, 3 * step]
    struct.pack_into("<3Q", head, at + 16, *new)
    seed = bytearray(head) + bytearray(4 * step - 512)
    for o, b in zip(new, blocks):
        n = struct.unpack_from("<H", b, 8)[0] << 4
        struct.pack_into("<3Q", b, 32, *new)
        struct.pack_into("<I", b, n + 4, zlib.crc32(bytes(b[:n])))
        seed[o : o + len(b)] = b
    name = os.path.basename(img)[: -len(".img")]
    open(os.path.join(out, name), "wb").write(bytes(seed).rstrip(b"\0"))
PY
fi

# FileVault 2: cryptsetup's test image (crates/volume/tests/data/fvault2/), cut to its
# volume header (at 0), its disk label (at 4096, the volume groups descriptor after it)
# and its encrypted metadata blocks of the three types read, decrypted, from 16384 (the fuzz
# harness checksums and encrypts them again); the KEK is unwrapped with the image's
# passphrase and wrapped again under "fuzz" with one PBKDF2 iteration, so that the
# harness opens the seed. A second seed keeps only the 0x0019 block (the others missing).
if want fvault2; then
    tar -xJf crates/volume/tests/data/fvault2/fvault2-images.tar.xz -C "$work"
    python3 - "$work/fvault2-images/small" "$corpus/fvault2" <<'PY'
import base64, hashlib, os, re, struct, sys
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.keywrap import aes_key_unwrap, aes_key_wrap
img, out = sys.argv[1], sys.argv[2]
B = 8192
with open(img, "rb") as f:
    head = bytearray(f.read(512))
    bs = struct.unpack_from("<I", head, 96)[0]
    label_at = struct.unpack_from("<Q", head, 104)[0] * bs
    f.seek(label_at)
    label = bytearray(f.read(B))
    f.seek(label_at + struct.unpack_from("<I", label, 220)[0])
    desc = bytearray(f.read(40))
    count, first = struct.unpack_from("<Q", desc, 8)[0], struct.unpack_from("<Q", desc, 32)[0]
    key = bytes(head[176:192]) + bytes(head[304:320])
    blocks = []
    for i in range(count):
        f.seek(first * bs + i * B)
        c = f.read(B)
        if c == bytes(B):
            break
        d = Cipher(algorithms.AES(key), modes.XTS(struct.pack("<Q", i) + bytes(8))).decryptor()
        p = d.update(c) + d.finalize()
        if struct.unpack_from("<H", p, 10)[0] in (0x0019, 0x001A, 0x0305):
            blocks.append(bytearray(p))
for b in blocks:
    if struct.unpack_from("<H", b, 10)[0] != 0x0019:
        continue
    off, size = struct.unpack_from("<II", b, 112)
    xml = bytes(b[off:off + size])
    m = re.search(rb"<key>PassphraseWrappedKEKStruct</key><data[^>]*>([^<]+)</data>", xml)
    pwk = bytearray(base64.b64decode(m.group(1)))
    salt, iters = bytes(pwk[8:24]), struct.unpack_from("<I", pwk, 168)[0]
    kek = aes_key_unwrap(hashlib.pbkdf2_hmac("sha256", b"heslo123", salt, iters, 16), bytes(pwk[32:56]))
    pwk[32:56] = aes_key_wrap(hashlib.pbkdf2_hmac("sha256", b"fuzz", salt, 1, 16), kek)
    struct.pack_into("<I", pwk, 168, 1)
    new = base64.b64encode(bytes(pwk))
    assert len(new) == len(m.group(1))
    xml = xml[:m.start(1)] + new + xml[m.end(1):]
    b[off:off + size] = xml
def seed(name, keep):
    # Header at 0, label at 4096, the descriptor right after the label, metadata at 16384.
    h, l, d = bytearray(head), bytearray(label), bytearray(desc)
    struct.pack_into("<Q", h, 104, 4096 // bs)
    struct.pack_into("<I", l, 220, B)
    struct.pack_into("<Q", d, 8, len(keep))
    struct.pack_into("<Q", d, 32, 2 * B // bs)
    data = bytes(h) + bytes(4096 - 512) + bytes(l) + bytes(d) + bytes(2 * B - 4096 - B - 40)
    for b in keep:
        data += bytes(b)
    # Not cut at its trailing zeros: the harness encrypts only whole blocks.
    open(os.path.join(out, name), "wb").write(data)
seed("small-heslo123-as-fuzz", blocks)
seed("small-0x0019-only", [b for b in blocks if struct.unpack_from("<H", b, 10)[0] == 0x0019])
PY
fi

# TCRYPT: headers of cryptsetup's test images (crates/volume/tests/data/tcrypt/),
# decrypted with their passphrases (PBKDF2 as VeraCrypt and TrueCrypt derive it, AES-XTS
# data unit 0), each after an options byte (bit 0: hidden) and the chain index (0: AES).
if want tcrypt; then
    tar -xJf crates/volume/tests/data/tcrypt/tcrypt-images.tar.xz -C "$work"
    python3 - "$work/tcrypt-images" "$corpus/tcrypt" <<'PY'
import hashlib, os, sys
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
src, out = sys.argv[1], sys.argv[2]
for name, at, password, iterations, flags in [
    ("vc_1-sha512-xts-aes", 0, b"aaaaaaaaaaaa", 500000, 0),
    ("tc_5-sha512-xts-aes-hidden", 65536, b"bbbbbbbbbbbb", 1000, 1),
]:
    with open(os.path.join(src, name), "rb") as f:
        f.seek(at)
        raw = f.read(512)
    dk = hashlib.pbkdf2_hmac("sha512", password, raw[:64], iterations, 64)
    d = Cipher(algorithms.AES(dk), modes.XTS(bytes(16))).decryptor()
    h = raw[:64] + d.update(raw[64:]) + d.finalize()
    assert h[64:68] in (b"VERA", b"TRUE"), name
    open(os.path.join(out, name), "wb").write(bytes([flags, 0]) + h)
PY
fi

for t in "${only[@]}"; do du -sh "$corpus/$t"; done
