#include "runtime/data/consumer_hold.h"

#include <utility>

namespace tpusim::runtime::data {
namespace {

thread_local ConsumerHold declared;

}  // namespace

ScopedConsumerHold::ScopedConsumerHold(ConsumerHold hold)
    : previous_(std::exchange(declared, std::move(hold))) {}

ScopedConsumerHold::~ScopedConsumerHold() { declared = std::move(previous_); }

const ConsumerHold& ScopedConsumerHold::current() { return declared; }

}  // namespace tpusim::runtime::data
