#!/usr/bin/env bash
# Prints cargo's target directory for this workspace: $CARGO_TARGET_DIR when it is set,
# the workspace's target/ otherwise (as `cargo metadata` reports it, absolute). The scripts
# find what cargo built through it:
#
#   tdir=$(bash scripts/target-dir.sh)
#   "$tdir/release/sectorcrypt" ...
set -euo pipefail
cd "$(dirname "$0")/.."
cargo metadata --format-version 1 --no-deps | sed 's/.*"target_directory":"\([^"]*\)".*/\1/'
