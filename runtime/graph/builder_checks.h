#pragma once
// How GraphBuilder's files check and describe operands in their errors (builder.cc,
// builder_layout.cc, builder_index.cc); not part of the API.

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "common/strings.h"
#include "runtime/graph/builder.h"

namespace tpusim::runtime::builder_checks {

// "f32[2, 3] and s32[4]": each value's dtype and shape.
inline std::string shapes_of(std::initializer_list<Value> values) {
  std::vector<std::string> s;
  for (const Value& v : values) s.push_back(str_cat(dtype_name(v.dtype()), v.shape().str()));
  return str_join(s, " and ");
}

// Whether `axes` are distinct axes of a rank-`rank` shape.
inline bool valid_axes(const std::vector<int64_t>& axes, int rank) {
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t a : axes) {
    if (a < 0 || a >= rank || seen[static_cast<size_t>(a)]) return false;
    seen[static_cast<size_t>(a)] = true;
  }
  return true;
}

}  // namespace tpusim::runtime::builder_checks
