#!/bin/sh
# SPDX-License-Identifier: MIT
# test-needs: python3
# Every benchmark of bench/ once, at a tiny size, with hakmem preloaded and
# with glibc: each must exit 0 and print a well-formed RESULT line, so the
# benchmark kit cannot rot between `make bench` runs.
set -eu
: "${HAKMEM_LIB:?HAKMEM_LIB must name libhakmem.so}"
root=$(cd "$(dirname "$0")/../.." && pwd)
exec python3 "$root/scripts/bench.py" --smoke --build "$(dirname "$HAKMEM_LIB")"
