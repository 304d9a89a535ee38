#!/bin/sh
# SPDX-License-Identifier: MIT
# test-needs: g++
# test-timeout: 180
# test-timeout-full: 900
# A C++ program heavy on new and delete in threads (cxx_churn.cpp: vectors,
# strings, maps, shared_ptr, lists and exceptions built in some threads and
# checked, reworked and deleted in others), compiled with g++, run with
# hakmem preloaded: it checks every batch itself, and its digest must equal
# that of the run without hakmem.  4 threads each way, 300 rounds each (3000
# with HAKMEM_TEST_SIZE=full).
# shellcheck source-path=SCRIPTDIR source=../lib/common.sh
. "$(dirname "$0")/../lib/common.sh"

rounds=300
[ "${HAKMEM_TEST_SIZE:-quick}" = full ] && rounds=3000

g++ -std=gnu++17 -O2 -pthread "$(dirname "$0")/cxx_churn.cpp" -o "$work/cxx_churn" -ldl
"$work/cxx_churn" 4 "$rounds" > "$work/ref"
hak "$work/cxx_churn" 4 "$rounds" > "$work/hak"
grep -qx hakmem "$work/hak" || { echo "cxx_churn ran without hakmem"; exit 1; }
grep -qx "no hakmem" "$work/ref" || { echo "the reference run had hakmem"; exit 1; }
head -1 "$work/ref" > "$work/ref1"
head -1 "$work/hak" > "$work/hak1"
same "$work/hak1" "$work/ref1" "cxx_churn"
cat "$work/hak1"
