#!/usr/bin/env bash
# The main job: builds sectorcrypt in release mode and runs its built-in demo.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cargo run --release -q -p sectorcrypt -- demo
