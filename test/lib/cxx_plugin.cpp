// SPDX-License-Identifier: MIT
// Part of the "cxx_dlopen" test: a C++ library that a C program loads with
// dlopen, so that the C++ runtime arrives after the allocator was set up.
// Each function reports what a failing operator new did: thrown
// std::bad_alloc (1), or the calls its new-handler got before giving up.
#include <cstddef>
#include <cstdint>
#include <new>

static int handler_calls;

static void give_up_after_two() {
  if (++handler_calls >= 2) std::set_new_handler(nullptr);
}

extern "C" int plugin_new_fails() {
  volatile std::size_t huge = SIZE_MAX / 2;
  try {
    ::operator delete(::operator new(huge));
  } catch (const std::bad_alloc &) {
    return 1;
  }
  return 0;
}

extern "C" int plugin_new_handler_calls() {
  volatile std::size_t huge = SIZE_MAX / 2;
  handler_calls = 0;
  std::set_new_handler(give_up_after_two);
  try {
    ::operator delete[](::operator new[](huge));
  } catch (const std::bad_alloc &) {
    return handler_calls;
  }
  return -1;
}

extern "C" int plugin_aligned_new_fails() {
  volatile std::size_t huge = SIZE_MAX / 2;
  try {
    ::operator delete(::operator new(huge, std::align_val_t(64)), std::align_val_t(64));
  } catch (const std::bad_alloc &) {
    return 1;
  }
  return 0;
}
