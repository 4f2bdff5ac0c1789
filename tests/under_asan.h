#pragma once
// Whether this test binary was built with AddressSanitizer (make test-asan), whose shadow memory
// takes terabytes of address space: no `ulimit -v` can hold it, so tests that need one skip.

namespace tpusim::testing {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kUnderAsan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kUnderAsan = true;
#else
inline constexpr bool kUnderAsan = false;
#endif
#else
inline constexpr bool kUnderAsan = false;
#endif

}  // namespace tpusim::testing
