#!/usr/bin/env bash
# Runs every check: formatting, clippy, all tests (every backend this CPU has), and a
# benchmark smoke run. Installs missing Debian packages first.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh

cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
cargo test --workspace 2>&1
cargo run --release -q -p sectorcrypt -- bench --quick
