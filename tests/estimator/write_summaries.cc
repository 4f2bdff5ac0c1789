// Writes an event file with known scalars into DIR, for the interop tier to read back with
// TensorBoard's own event reader: loss = 1 / (step + 1) and learning_rate = 0.1 at steps
// 0, 10, ..., 90.
#include <cstdio>

#include "estimator/summary_writer.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: tpusim_write_summaries DIR\n");
    return 2;
  }
  auto w = tpusim::estimator::SummaryWriter::create(argv[1]);
  if (!w.ok()) {
    std::fprintf(stderr, "%s\n", std::string(w.status().message()).c_str());
    return 1;
  }
  for (int step = 0; step < 100; step += 10) {
    if (!(*w)->add_scalar("loss", 1.0 / (step + 1), step).ok() ||
        !(*w)->add_scalar("learning_rate", 0.1, step).ok()) {
      return 1;
    }
  }
  std::printf("%s\n", (*w)->path().c_str());
  return 0;
}
