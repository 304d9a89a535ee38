#!/bin/sh
# SPDX-License-Identifier: MIT
# What a release needs besides code: the licence, an SPDX line near the top of
# every source file, and one version everywhere it is written down
# (include/hakmem.h, the latest release in CHANGELOG.md, debian/changelog).
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
status=0

grep -q '^MIT License$' LICENSE && grep -q '^Copyright (c) 2026 The hakmem authors$' LICENSE ||
  { echo "LICENSE is not the MIT licence of the hakmem authors"; status=1; }

# Source files: C, C++, headers, Python, shell, make and CMake files, templates,
# man pages, and any script with a #! line.  Build outputs and debhelper's
# working directories are not sources.
missing=$(find . \( -path ./.git -o -path ./build -o -path './build-*' -o -path ./bench/results \
                   -o -path './debian/*' -type d -o -name __pycache__ \) -prune -o -type f -print |
  while read -r f; do
    case $f in
      *.c|*.h|*.cpp|*.py|*.sh|*.mk|*.cmake|*.in|*.[1-8]|*/Makefile|./debian/rules) ;;
      *) head -c 2 "$f" | grep -q '^#!' || continue ;;
    esac
    head -n 3 "$f" | grep -q 'SPDX-License-Identifier: MIT' || echo "$f"
  done)
if [ -n "$missing" ]; then
  echo "no SPDX-License-Identifier: MIT line in the first 3 lines of:"
  echo "$missing" | sed 's/^/  /'
  status=1
fi

part() { sed -n "s/^#define HAKMEM_VERSION_$1 \([0-9][0-9]*\)\$/\1/p" include/hakmem.h; }
header=$(part MAJOR).$(part MINOR).$(part PATCH)
released=$(sed -n 's/^## \[\([0-9][0-9.]*\)\].*/\1/p' CHANGELOG.md | head -1)
[ "$released" = "$header" ] ||
  { echo "CHANGELOG.md: latest release is \"$released\", include/hakmem.h says $header"; status=1; }
grep -q '^## \[Unreleased\]' CHANGELOG.md || { echo "CHANGELOG.md has no [Unreleased] section"; status=1; }
debian=$(sed -n '1s/^hakmem (\([^)]*\)).*/\1/p' debian/changelog)
[ "$debian" = "$header" ] ||
  { echo "debian/changelog: version \"$debian\", include/hakmem.h says $header"; status=1; }

[ $status = 0 ] && echo "licence, SPDX lines and version $header consistent"
exit $status
