#pragma once
// What a pipeline's consumer holds of its batches beyond the pipeline's own: an estimator's loop
// takes iterations_per_loop steps of every simulated replica's feed before it runs them
// (docs/reliability.md, "Budgets"). The estimator declares it around input_fn (a
// ScopedConsumerHold on its thread) and Dataset::batch, called by input_fn on that thread,
// captures it, so that the first element of the first batch is checked against the host's memory
// with the loop's batches counted: an absurd batch size is refused before a batch is assembled,
// not after the first one.

#include <cstdint>
#include <string>

namespace tpusim::runtime::data {

struct ConsumerHold {
  uint64_t batches = 0;  // batches the consumer holds at once; 0: none declared
  std::string what;      // for the refusal: "a loop of 2 steps (--iterations-per-loop) of ..."
};

// Declares `hold` for the batches the datasets built on this thread make, until destroyed (the
// previous declaration then returns: scopes nest).
class ScopedConsumerHold {
 public:
  explicit ScopedConsumerHold(ConsumerHold hold);
  ~ScopedConsumerHold();
  ScopedConsumerHold(const ScopedConsumerHold&) = delete;
  ScopedConsumerHold& operator=(const ScopedConsumerHold&) = delete;

  // The innermost declaration on this thread (batches 0 outside every scope).
  static const ConsumerHold& current();

 private:
  ConsumerHold previous_;
};

}  // namespace tpusim::runtime::data
