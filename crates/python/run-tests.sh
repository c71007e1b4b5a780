#!/usr/bin/env bash
# Builds the Python package's wheel with maturin (as `maturin build` does on any machine),
# installs it into the venv of `scripts/deps.sh python` (target/venv) and runs its pytest
# tests. The tests skip, saying why (`-rs` lists the reasons), where cryptsetup or qemu-img
# are missing; under SECTORCRYPT_STRICT=1 (CI) such a skip fails the test instead.
# Arguments go to `maturin build` (`--release`: optimised, as bench/python.sh builds it);
# SECTORCRYPT_PYTEST=0 builds and installs without testing.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bash "$root/scripts/deps.sh" python
venv="$root/target/venv"
wheels="$root/target/wheels/python"
rm -rf "$wheels"
"$venv/bin/maturin" build -q "$@" -m "$root/crates/python/Cargo.toml" \
    --interpreter "$venv/bin/python" -o "$wheels"
"$venv/bin/python" -m pip install -q --force-reinstall --no-deps "$wheels"/sectorcrypt-*.whl
if [ "${SECTORCRYPT_PYTEST:-1}" = 1 ]; then
    cd "$root/crates/python"
    "$venv/bin/python" -m pytest -q -rs -p no:cacheprovider tests
fi
