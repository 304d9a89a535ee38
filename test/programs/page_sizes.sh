#!/bin/sh
# SPDX-License-Identifier: MIT
# test-needs: python3
# Kernels of 16 and 64 KiB pages, by logic: the test build of the library
# (HK_TEST_PAGE_SIZE) takes its page size from HAKMEM_TEST_PAGE_SIZE, and
# every range it aligns to that page is valid on this kernel's smaller ones.
# pvalloc(1) must span one such page (the override took), then API tests of
# big blocks, realloc, alignment, fork and tight address space must pass.
# shellcheck source-path=SCRIPTDIR source=../lib/common.sh
. "$(dirname "$0")/../lib/common.sh"

build=$(dirname "$HAKMEM_LIB")
lib=$build/pagetest/libhakmem.so
[ -f "$lib" ] || { echo "$lib does not exist"; exit 1; }
for page in 16384 65536; do
  got=$(HAKMEM_TEST_PAGE_SIZE=$page LD_PRELOAD=$lib python3 -c 'import ctypes
c = ctypes.CDLL(None); c.pvalloc.restype = ctypes.c_void_p; c.malloc_usable_size.argtypes = [ctypes.c_void_p]
print(c.malloc_usable_size(c.pvalloc(1)))')
  [ "$got" -ge "$page" ] && [ $((got % page)) -eq 0 ] || { echo "page $page: pvalloc(1) holds $got bytes"; exit 1; }
  for t in big_block_cycles realloc align fork tight_address_space address_space_limit usable_size; do
    HAKMEM_TEST_PAGE_SIZE=$page HAKMEM_TEST_ALLOCATOR=hakmem LD_PRELOAD=$lib "$build/test/$t" > "$work/out" 2>&1 ||
      { echo "page $page: $t failed"; tail -20 "$work/out"; exit 1; }
  done
done
echo ok
