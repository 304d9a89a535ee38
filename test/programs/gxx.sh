#!/bin/sh
# SPDX-License-Identifier: MIT
# test-needs: g++
# g++ (cc1plus is a large C++ program) with hakmem preloaded compiles one of
# the tests with optimisation; the assembly must equal that produced without
# hakmem.
# shellcheck source-path=SCRIPTDIR source=../lib/common.sh
. "$(dirname "$0")/../lib/common.sh"

src="$(dirname "$0")/../api/cxx_new.cpp"
flags="-std=gnu++17 -O2 -D_GNU_SOURCE -I$(dirname "$0")/../../include -I$(dirname "$0")/.. -S"
# shellcheck disable=SC2086
g++ $flags "$src" -o "$work/ref.s"
# shellcheck disable=SC2086
hak g++ $flags "$src" -o "$work/hak.s"
same "$work/hak.s" "$work/ref.s" "g++ -O2 -S"
echo "assembly identical ($(wc -l < "$work/hak.s") lines)"
