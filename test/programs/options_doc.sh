#!/bin/sh
# SPDX-License-Identifier: MIT
# The README's option list is the one the library's table of options gives
# (build/options_doc prints it; `make readme-options` puts it in the README).
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
doc="$(dirname "$HAKMEM_LIB")/options_doc"
[ -x "$doc" ] || { echo "$doc is not built (make $doc)"; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/hakmem-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
"$doc" > "$work/table"
awk '/<!-- options:end -->/ { skip = 0 } skip { print } /<!-- options:begin -->/ { skip = 1 }' \
  "$root/README.md" > "$work/readme"
[ -s "$work/table" ] || { echo "options_doc printed nothing"; exit 1; }
if ! cmp -s "$work/table" "$work/readme"; then
  echo "README.md's option list differs from the table in src/options.c (run make readme-options):"
  diff "$work/readme" "$work/table" || true
  exit 1
fi
echo "README lists the $(($(wc -l < "$work/table") - 2)) options of the table"
