#!/usr/bin/env bash
# NBD over TLS: what TLS costs `sectorcrypt serve`. One 1 GiB AES-256-XTS LUKS1 volume on
# tmpfs (made by qemu-img) served twice by sectorcrypt, without TLS and with
# --tls-certificates (TLS required); nbdkit's file plugin on a raw 1 GiB file without and
# with --tls=require (GnuTLS) for reference. Each is read (and written) with nbdcopy over
# a Unix socket, nbds+unix:// for the TLS ones, interleaved in rounds; medians printed
# with the ratios. Certificates: ECDSA P-256, made here with the openssl command line.
#
#   bash bench/tls.sh                    # 1 GiB, 3 rounds, /dev/shm, 4 connections
#   SIZE=256M ROUNDS=5 CONNECTIONS=1 bash bench/tls.sh
set -euo pipefail
cd "$(dirname "$0")/.."

SIZE=${SIZE:-1G}
ROUNDS=${ROUNDS:-3}
DIR=${DIR:-/dev/shm}
CONNECTIONS=${CONNECTIONS:-4}
REQUESTS=${REQUESTS:-64}

for tool in nbdkit nbdcopy qemu-img openssl; do
    command -v "$tool" >/dev/null || { echo "bench/tls.sh needs $tool (scripts/deps.sh)"; exit 1; }
done
cargo build --release -q -p sectorcrypt
cli=$(bash scripts/target-dir.sh)/release/sectorcrypt

# shellcheck source=bench/lib.sh
source bench/lib.sh
scratch "$DIR/sectorcrypt-tls-bench.XXXXXX"

# A CA and a server certificate for localhost, in nbdkit's file names.
certs=$work/certs
mkdir "$certs"
(
    cd "$certs"
    key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
    key ca-key.pem
    openssl req -x509 -new -key ca-key.pem -subj "/CN=bench CA" -days 2 \
        -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign \
        -out ca-cert.pem
    key server-key.pem
    openssl req -new -key server-key.pem -subj /CN=localhost -out server.csr
    printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost\n' >server.ext
    openssl x509 -req -in server.csr -CA ca-cert.pem -CAkey ca-key.pem -set_serial 2 \
        -days 2 -extfile server.ext -out server-cert.pem 2>/dev/null
)

size_bytes=$(numfmt --from=iec "$SIZE")
printf 'benchmark passphrase' >"$work/pass"
qemu-img create -q -f luks --object "secret,id=s0,file=$work/pass" \
    -o key-secret=s0,iter-time=10,cipher-alg=aes-256,cipher-mode=xts,ivgen-alg=plain64 \
    "$work/luks.img" "$size_bytes"
truncate -s "$size_bytes" "$work/raw.img"
head -c "$size_bytes" /dev/urandom >"$work/plain.bin"
dd if="$work/plain.bin" of="$work/raw.img" bs=4M conv=notrunc status=none

"$cli" serve "$work/luks.img" --key-file "$work/pass" --socket "$work/sc.sock" 2>"$work/sc.log" &
pids+=($!)
"$cli" serve "$work/luks.img" --key-file "$work/pass" --socket "$work/sctls.sock" \
    --tls-certificates "$certs" 2>"$work/sctls.log" &
pids+=($!)
nbdkit -f -U "$work/raw.sock" file "file=$work/raw.img" 2>"$work/raw.log" &
pids+=($!)
nbdkit -f -U "$work/rawtls.sock" --tls=require --tls-certificates="$certs" \
    file "file=$work/raw.img" 2>"$work/rawtls.log" &
pids+=($!)
for s in sc sctls raw rawtls; do wait_sock "$work/$s.sock"; done
uri() {
    case $1 in
    *tls) echo "nbds+unix:///?socket=$work/$1.sock&tls-certificates=$certs" ;;
    *) echo "nbd+unix:///?socket=$work/$1.sock" ;;
    esac
}

# Fill the volume through TLS and check it reads back byte-exact without TLS.
nbdcopy --connections "$CONNECTIONS" --flush "$work/plain.bin" "$(uri sctls)"
nbdcopy "$(uri sc)" - | cmp - "$work/plain.bin" >/dev/null ||
    { echo "written over TLS, read without: the data differ"; exit 1; }
echo "check: plaintext written over TLS reads back byte-exact without TLS"

servers=(sc sctls raw rawtls)
rounds "${servers[@]}"

declare -A med
printf '%-30s %8s %10s   (GB/s, median of %s rounds, %s connections)\n' \
    "" read write "$ROUNDS" "$CONNECTIONS"
for s in "${servers[@]}"; do
    for op in read write; do med[$s $op]=$(median <<<"${samples[$s $op]}"); done
    case $s in
    sc) name="sectorcrypt serve (luks1)" ;;
    sctls) name="sectorcrypt serve (luks1) TLS" ;;
    raw) name="nbdkit file (raw)" ;;
    rawtls) name="nbdkit file (raw) TLS" ;;
    esac
    printf '%-30s %8.2f %10.2f     runs: read %s| write %s\n' "$name" "${med[$s read]}" \
        "${med[$s write]}" "${samples[$s read]}" "${samples[$s write]}"
done
ratio() { # a-key b-key: the median of the per-round ratios
    for r in $(seq "$ROUNDS"); do
        awk -v a="${one[$1 $r]}" -v b="${one[$2 $r]}" 'BEGIN {printf "%.3f ", a/b}'
    done | median
}
printf 'sectorcrypt TLS / no TLS : read %.2fx  write %.2fx\n' \
    "$(ratio "sctls read" "sc read")" "$(ratio "sctls write" "sc write")"
printf 'nbdkit TLS / no TLS      : read %.2fx  write %.2fx\n' \
    "$(ratio "rawtls read" "raw read")" "$(ratio "rawtls write" "raw write")"
printf 'sectorcrypt TLS / nbdkit TLS: read %.2fx  write %.2fx\n' \
    "$(ratio "sctls read" "rawtls read")" "$(ratio "sctls write" "rawtls write")"
echo "(medians of the per-round ratios)"
