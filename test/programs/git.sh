#!/bin/sh
# SPDX-License-Identifier: MIT
# test-needs: git
# git with hakmem preloaded: init, add, commit, log, diff, status, gc and
# fsck in a fresh repository; with fixed dates and identities the output,
# commit hashes included, must equal that of the same commands without hakmem.
# shellcheck source-path=SCRIPTDIR source=../lib/common.sh
. "$(dirname "$0")/../lib/common.sh"

export HOME="$work" GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
export GIT_AUTHOR_NAME=Test GIT_AUTHOR_EMAIL=test@example.org
export GIT_COMMITTER_NAME=Test GIT_COMMITTER_EMAIL=test@example.org
export GIT_AUTHOR_DATE="2024-01-01T00:00:00Z" GIT_COMMITTER_DATE="2024-01-01T00:00:00Z"

git_work() { # git_work RUNNER DIR
  run=$1 dir=$2
  mkdir "$dir" && cd "$dir" || exit 1
  $run git init -q -b main .
  i=0
  while [ $i -lt 300 ]; do
    mkdir -p "d$((i % 10))"
    seq $i $((i * 3)) > "d$((i % 10))/f$i.txt"
    i=$((i + 1))
  done
  $run git add -A
  $run git commit -q -m "first"
  i=0
  while [ $i -lt 300 ]; do
    echo "change $i" >> "d$((i % 10))/f$i.txt"
    i=$((i + 7))
  done
  rm d3/f3.txt
  $run git commit -q -a -m "second"
  $run git log --stat
  $run git diff --stat HEAD~1
  $run git rev-parse HEAD HEAD~1
  $run git status --porcelain
  $run git gc -q
  $run git fsck --no-progress
  $run git count-objects -v | grep -v size
  cd "$work" || exit 1
}

plain() { "$@"; }
for how in plain hak; do
  out="$work/$how.out"
  if ! (git_work $how "$work/$how") > "$out" 2>&1; then
    echo "git failed ($how):"
    tail -20 "$out"
    exit 1
  fi
done
same "$work/hak.out" "$work/plain.out" "git"
grep -c . "$work/hak.out" | sed 's/$/ lines of git output identical/'
