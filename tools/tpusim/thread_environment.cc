#include "tools/tpusim/thread_environment.h"

#include <charconv>
#include <string_view>

#include "common/strings.h"

namespace tpusim::cli {

absl::Status check_omp_num_threads(const char* value) {
  if (value == nullptr) return absl::OkStatus();
  const std::string_view text(value);
  size_t start = 0;
  for (;;) {
    const size_t end = std::min(text.find(',', start), text.size());
    const std::string_view level = text.substr(start, end - start);
    long long threads = 0;
    const auto [ptr, ec] = std::from_chars(level.data(), level.data() + level.size(), threads);
    if (ec != std::errc() || ptr != level.data() + level.size() || threads < 1 ||
        threads > kMaxOpenMpThreads) {
      return absl::InvalidArgumentError(
          str_cat("OMP_NUM_THREADS=", text,
                  ": each team size (a comma list, one per nesting level) is "
                  "a whole number 1..",
                  kMaxOpenMpThreads, ", not '", level,
                  "' (tpusim's OpenMP work "
                  "is bound by the host's cores; its thread flags take at most ",
                  kMaxOpenMpThreads, ")"));
    }
    if (end == text.size()) return absl::OkStatus();
    start = end + 1;
  }
}

}  // namespace tpusim::cli
