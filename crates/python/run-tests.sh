#!/usr/bin/env bash
# Builds the Python package's wheel with maturin (as `maturin build` does on any machine),
# installs it into the venv of `scripts/deps.sh python` (target/venv) and runs its pytest
# tests (with the `sectorcrypt` command built, for the test that compares its headers with
# the package's). The tests skip, saying why (`-rs` lists the reasons), where cryptsetup or qemu-img
# are missing; under SECTORCRYPT_STRICT=1 (CI) such a skip fails the test instead.
# Arguments go to `maturin build` (`--release`: optimised, as bench/python.sh builds it);
# SECTORCRYPT_PYTEST=0 builds and installs without testing.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bash "$root/scripts/deps.sh" python
venv="$root/target/venv"
wheels="$root/target/wheels/python"
rm -rf "$wheels"
# With librbd-dev the package opens rbd: images too, and its RBD tests run (they start the
# single-node cluster of scripts/ceph.sh).
features=()
if dpkg-query -W -f='${Status}' librbd-dev 2>/dev/null | grep -q "install ok installed"; then
    # A wheel for this machine: it links the system's librbd, which auditwheel would
    # otherwise try to copy into it.
    features=(--features rbd --auditwheel skip)
    export SECTORCRYPT_PY_RBD=1
fi
"$venv/bin/maturin" build -q "${features[@]}" "$@" -m "$root/crates/python/Cargo.toml" \
    --interpreter "$venv/bin/python" -o "$wheels"
"$venv/bin/python" -m pip install -q --force-reinstall --no-deps "$wheels"/sectorcrypt-*.whl
if [ "${SECTORCRYPT_PYTEST:-1}" = 1 ]; then
    # The command line, for the test that compares the headers both front ends make.
    cargo build -q -p sectorcrypt --manifest-path "$root/Cargo.toml"
    target="$(cargo metadata -q --format-version 1 --no-deps --manifest-path "$root/Cargo.toml" |
        "$venv/bin/python" -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
    export SECTORCRYPT_CLI="$target/debug/sectorcrypt"
    cd "$root/crates/python"
    "$venv/bin/python" -m pytest -q -rs -p no:cacheprovider tests
fi
