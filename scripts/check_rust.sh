#!/usr/bin/env bash
# sparkafka's native fetch (native/) is built with Rust's cargo, a C compiler and make, and Perl (OpenSSL's build,
# from source: the wheel carries its own OpenSSL).
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
if ! command -v perl >/dev/null 2>&1 || ! perl -MIPC::Cmd -MFile::Compare -MFile::Copy -MFindBin -e 1 2>/dev/null; then
  echo "error: Perl with its core modules is required to build OpenSSL (built from source into the native fetch," >&2
  echo "       so that the wheel needs no system OpenSSL)." >&2
  echo "       Debian/Ubuntu: sudo apt-get install -y perl; Fedora/RHEL: sudo dnf install -y perl-core" >&2
  exit 1
fi
