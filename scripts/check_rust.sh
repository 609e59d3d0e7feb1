#!/usr/bin/env bash
# sparkafka's native fetch (native/) is built with Rust's cargo. Say clearly how to get it when it is missing.
set -euo pipefail
if ! command -v cargo >/dev/null 2>&1; then
  echo "error: Rust (cargo) is required to build sparkafka's native fetch but 'cargo' is not on the PATH." >&2
  echo "       Install it with: curl --proto '=https' -sSf https://sh.rustup.rs | sh -s -- -y" >&2
  echo "       then run: source \"\$HOME/.cargo/env\"" >&2
  exit 1
fi
if ! command -v cc >/dev/null 2>&1 || ! command -v make >/dev/null 2>&1; then
  echo "error: a C compiler and make are required to build librdkafka for sparkafka's native fetch." >&2
  echo "       Debian/Ubuntu: sudo apt-get install -y build-essential" >&2
  exit 1
fi
