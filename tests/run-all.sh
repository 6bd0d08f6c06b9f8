#!/usr/bin/env bash
# Runs every test: `tilec check` and `tilec verify --interpret` over every example, as a user
# would run them, then the workspace's unit and data-driven tests (which include the PTX checks:
# every example for every target, ptxas resources with no spills, PTX and resource snapshots).
# ptxas is required (tests/setup.sh installs it); TILE_SKIP_PTXAS=1 skips its checks.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tests/setup.sh
cargo build --release -p tilec
./target/release/tilec check dsl-examples/*.tile
./target/release/tilec verify --all --interpret
log=$(mktemp)
trap 'rm -f "$log"' EXIT
cargo test --workspace --release 2>&1 | tee "$log"
# One closing line for the whole run: the sum of every test binary's result line.
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i; if ($(i+1) ~ /^ignored/) g += $i } }
     END { printf "tests: %d passed, %d failed, %d skipped\n", p, f, g }' "$log"
