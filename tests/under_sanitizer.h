#pragma once
// Whether this test binary was built with AddressSanitizer (make test-asan) or ThreadSanitizer
// (make test-tsan), whose shadow memory takes terabytes of address space: no `ulimit -v` can
// hold it, so tests that need one skip.

namespace tpusim::testing {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kUnderSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kUnderSanitizer = true;
#else
inline constexpr bool kUnderSanitizer = false;
#endif
#else
inline constexpr bool kUnderSanitizer = false;
#endif

}  // namespace tpusim::testing
