#!/usr/bin/env bash
# sparkafka's native fetch (native/) is built with Rust's cargo, a C compiler and OpenSSL 3's development files.
# Say clearly how to get each when it is missing.
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
if ! command -v pkg-config >/dev/null 2>&1 || ! pkg-config --atleast-version=3.0 openssl 2>/dev/null; then
  echo "error: OpenSSL 3 development files are required to build sparkafka's native fetch with TLS and SASL" >&2
  echo "       (found: $(pkg-config --modversion openssl 2>/dev/null || echo none))." >&2
  echo "       Debian/Ubuntu: sudo apt-get install -y libssl-dev pkg-config" >&2
  echo "       Fedora/RHEL: sudo dnf install -y openssl-devel pkgconf-pkg-config; macOS: brew install openssl@3 pkg-config" >&2
  exit 1
fi
