#!/bin/sh
# SPDX-License-Identifier: MIT
# test-needs: ls
# ls(1) with hakmem preloaded: long listings of /usr/lib, /usr/bin and,
# recursively, /usr/share/doc, compared with the same listings without it.
# shellcheck source-path=SCRIPTDIR source=../lib/common.sh
. "$(dirname "$0")/../lib/common.sh"

for args in "-la /usr/lib" "-la /usr/bin" "-laR /usr/share/doc" "-lS --color=always /usr/lib/x86_64-linux-gnu"; do
  # shellcheck disable=SC2086  # the arguments are meant to be split
  ls $args > "$work/ref" 2>&1 || true
  # shellcheck disable=SC2086
  hak ls $args > "$work/hak" 2>&1 || true
  same "$work/hak" "$work/ref" "ls $args"
done
echo "listings identical ($(wc -l < "$work/hak") lines in the last one)"
