#pragma once
// A Program on a protobuf arena of its own. Compiled steps hold tens of thousands of instruction
// messages; on an arena they are allocated in large blocks and freed all at once. Freed one by
// one they made glibc consolidate its fast bins again and again, 40% of compiling resnet_small
// (bench/README.md, the runtime).

#include <memory>

#include <google/protobuf/arena.h>

#include "sim/isa/isa.pb.h"

namespace tpusim::isa {

class ArenaProgram {
 public:
  ArenaProgram() : arena_(std::make_unique<google::protobuf::Arena>(options())) {
    program_ = google::protobuf::Arena::CreateMessage<Program>(arena_.get());
  }
  ArenaProgram(ArenaProgram&&) noexcept = default;
  ArenaProgram& operator=(ArenaProgram&&) noexcept = default;

  Program& operator*() const { return *program_; }
  Program* operator->() const { return program_; }
  Program* get() const { return program_; }

 private:
  static google::protobuf::ArenaOptions options() {
    google::protobuf::ArenaOptions o;
    o.start_block_size = 64 << 10;  // bytes; blocks double up to max_block_size
    o.max_block_size = 4 << 20;
    return o;
  }

  std::unique_ptr<google::protobuf::Arena> arena_;  // owns program_
  Program* program_ = nullptr;
};

}  // namespace tpusim::isa
