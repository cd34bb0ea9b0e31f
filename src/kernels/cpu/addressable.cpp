// The operand check of the kernels compiled without ASan (addressable.hpp). This file is
// compiled with ASan in sanitizer builds, so it may ask ASan's shadow memory.
#define ZT_UNINSTRUMENTED_KERNEL 1
#include "addressable.hpp"

#include <cstdio>
#include <cstdlib>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

namespace zt::kernels::cpu::detail {

void expect_addressable(const void* p, int64_t bytes, const char* kernel, const char* operand) {
#if defined(__SANITIZE_ADDRESS__)
  if (!p || bytes <= 0) return;
  void* bad = __asan_region_is_poisoned(const_cast<void*>(p), static_cast<size_t>(bytes));
  if (!bad) return;
  std::fprintf(stderr,
               "ERROR: AddressSanitizer: %s: operand %s [%p, %lld bytes) is not addressable "
               "from byte %lld\n",
               kernel, operand, p, static_cast<long long>(bytes),
               static_cast<long long>(static_cast<const char*>(bad) - static_cast<const char*>(p)));
  __asan_describe_address(bad);
  std::abort();
#else
  (void)p, (void)bytes, (void)kernel, (void)operand;
#endif
}

}  // namespace zt::kernels::cpu::detail
