#!/usr/bin/env bash
# Installs the Debian packages the build and the tests need, only when missing.
# Sourced by run.sh and test.sh; safe to run repeatedly.
set -euo pipefail

# Build: pkg-config, libssl-dev (the openssl crate, the bench peer).
# Interop tests run the real tools: cryptsetup-bin (LUKS), qemu-utils (qemu-img, qemu-io,
# qemu-nbd), nbdkit (its luks filter), libnbd-bin (nbdinfo, nbdcopy, nbdfuse), fuse3
# (fusermount3 for the FUSE mount), libengine-gost-openssl (OpenSSL's GOST peer), e2fsprogs
# (mkfs.ext4 on a mounted volume), python3-libnbd (nbdsh and the python bindings the soak
# clients of bench/soak.sh and the fuzz seeds use).
# GELI tests: grub-common (grub-fstest reads GELI images), dosfstools and mtools (FAT
# images with a known file), python3-cryptography (the reference model tests/geli_ref.py),
# xz-utils (the compressed FreeBSD-made images).
# BitLocker tests: dislocker (dislocker-file decrypts cryptsetup's Windows-made images, a
# second reader to compare with; xz-utils above unpacks them).
# VeraCrypt/TrueCrypt: python3-botan (Botan's Serpent, Twofish and Camellia in XTS make the
# cascade test vectors, a second implementation beside the RustCrypto crates).
# TLS tests: openssl (the command line makes their X.509 certificates).
# Manual and completion tests: groff-base (renders the man pages), zsh and fish (load the
# completion scripts).
# C library tests: gcc and libc6-dev (cc builds the C test program), pkg-config (above),
# binutils (readelf shows the library's SONAME; install-lib.sh reads it there too).
# Service tests: systemd (systemd-socket-activate passes listening sockets as systemd
# does), prometheus (promtool checks the metrics text), curl (scrapes it).
# The bench's peer libraries (scripts/bench-peers.sh): perl and make (openssl-src runs
# OpenSSL's Configure and make; aws-lc-sys compiles with gcc, above).
# `deps.sh bench`: fio (its nbd engine gives bench/nbd.sh the 4 KiB random-read IOPS).
# `deps.sh python`: a venv for the Python package (crates/python) in target/venv, with
# maturin (builds the wheel), pytest, cryptography (the tests' reference) and numpy (buffers
# of the tests) from PyPI; made and filled only when something is missing.
# `deps.sh docs`: librsvg2-bin (rsvg-convert renders `bench --svg` charts to PNG: a test
# checks that the chart renders, and docs/PERFORMANCE.md says how to look at one).
# `deps.sh ceph`: the single-node cluster of scripts/ceph.sh (ceph-mon, ceph-osd,
# ceph-common, uuid-runtime) and librbd-dev/librados-dev, which the `rbd` feature links.
needed=(pkg-config libssl-dev cryptsetup-bin qemu-utils nbdkit libnbd-bin fuse3
    libengine-gost-openssl e2fsprogs python3-libnbd grub-common dosfstools mtools
    python3-cryptography xz-utils openssl groff-base zsh fish gcc libc6-dev binutils
    systemd prometheus curl perl make dislocker python3-botan)
if [ "${1:-}" = bench ]; then
    needed=(fio)
fi
if [ "${1:-}" = python ]; then
    venv="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/target/venv"
    if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
        needed=(python3-venv)
    else
        needed=()
    fi
fi
if [ "${1:-}" = docs ]; then
    needed=(librsvg2-bin)
fi
if [ "${1:-}" = ceph ]; then
    needed=(ceph-mon ceph-osd ceph-common uuid-runtime librbd-dev librados-dev)
    norec=--no-install-recommends
fi
missing=()
for p in "${needed[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
    echo "installing: ${missing[*]}" >&2
    sudo=""
    if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
    $sudo apt-get update -q
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q ${norec:-} "${missing[@]}"
fi
if [ "${1:-}" = python ]; then
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    if ! "$venv/bin/python" -c 'import pytest, cryptography, numpy' 2>/dev/null ||
        ! "$venv/bin/maturin" --version > /dev/null 2>&1; then
        "$venv/bin/python" -m pip install -q 'maturin>=1.9.4,<2' pytest cryptography numpy
    fi
fi
