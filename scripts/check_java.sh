#!/usr/bin/env bash
# Spark 4 needs Java 17 or newer on the PATH. Say clearly how to get it when it is missing.
set -euo pipefail
if ! command -v java >/dev/null 2>&1; then
  echo "error: Java 17+ is required by Spark 4 but 'java' is not on the PATH." >&2
  echo "       Debian/Ubuntu: sudo apt-get install -y openjdk-17-jre-headless" >&2
  exit 1
fi
version=$(java -version 2>&1 | awk -F'"' '/version/ {print $2; exit}')
major=${version%%.*}
if [ "$major" = "1" ]; then major=$(echo "$version" | cut -d. -f2); fi
if ! [ "$major" -ge 17 ] 2>/dev/null; then
  echo "error: Java $version found, Spark 4 needs Java 17 or newer." >&2
  echo "       Debian/Ubuntu: sudo apt-get install -y openjdk-17-jre-headless" >&2
  exit 1
fi
