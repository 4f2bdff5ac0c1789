#pragma once
// The HBM buffers a fragment of the tpusim compiler uses, as its lowering declares them (as
// XLA's thunks declare their buffer uses), and the check that holds the instructions to them.
//
// Each op's rule (lowering_rules.cc) and each fused fragment (a Fusion) declares the nodes whose
// buffers its fragment reads and writes. The planning passes take their edges from these
// declarations: which nodes are needed, who reads a value, how long a buffer lives (step_plan.h).
// After a node's fragment is emitted, check_fragment_hbm verifies that every HBM byte its
// instructions touch lies in a buffer it declared, in the compiler's constants or in the node's
// temporaries, so that a declaration that forgets a buffer fails the compile rather than letting
// the HBM plan reuse a buffer that is still read.

#include <string_view>
#include <vector>

#include <absl/status/status.h>

#include "runtime/backend/tpusim/schedule.h"
#include "runtime/graph/graph.h"
#include "sim/isa/isa.pb.h"

namespace tpusim::runtime::tpusim_backend {

// Nodes stand for their buffers (an alias's buffer is its owner's: hbm_plan.h).
struct BufferUses {
  std::vector<int> reads;   // the buffers the fragment reads
  std::vector<int> writes;  // the buffers it writes
  // For a node that emits nothing because its value is another node's buffer (reshape,
  // stop_gradient), that node; -1 otherwise.
  int aliases = -1;

  // The nodes whose values this node needs in HBM: its reads, and the node it aliases. The
  // planning passes' edges (which nodes are needed, who reads a value).
  std::vector<int> needs() const;
};

// What a fragment uses unless its op's rule says otherwise: it reads its inputs and writes its
// own buffer.
BufferUses reads_inputs_writes_self(const Graph& graph, int id);

// The HBM one fragment may touch, in bytes: it may read `readable` (what it declared it reads or
// writes, the compiler's constants, its temporaries) and write `writable` (what it declared it
// writes, its temporaries).
struct FragmentHbm {
  std::vector<HbmRange> readable;
  std::vector<HbmRange> writable;
};

// Checks instructions [begin, end) of `core` (one node's fragment): the HBM block of every DMA,
// and the buffers every collective sums from and into, lie each inside one range `allowed` gives
// for its direction. InternalError naming node `node` and its kind `op`, the instruction's index
// and the stray range otherwise. A scan of the fragment's instructions, run on every compile.
absl::Status check_fragment_hbm(const isa::CoreProgram& core, int begin, int end,
                                const FragmentHbm& allowed, int node, std::string_view op);

}  // namespace tpusim::runtime::tpusim_backend
