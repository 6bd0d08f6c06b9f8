#!/usr/bin/env bash
# Runs every test: the workspace's unit and data-driven tests, then `tilec check` and
# `tilec verify --interpret` over every example, as a user would run them.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tests/setup.sh
cargo build --release -p tilec
./target/release/tilec check dsl-examples/*.tile
./target/release/tilec verify --interpret dsl-examples/*.tile
cargo test --workspace --release
