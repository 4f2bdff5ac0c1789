#pragma once
// The rules every config field must satisfy, applied once at load. Each function reads one
// message through a FieldChecker (which records violations with file, line and field) and
// fills the matching validated spec with SI units. Derived figures are computed by
// finish_slice() once every field passed.

#include "configs/config.pb.h"
#include "configs/field_checker.h"
#include "configs/slice_spec.h"

namespace tpusim::config {

void validate_chip(const ChipConfig& chip, FieldChecker& c, ChipSpec* spec);
void validate_topology(const TopologyConfig& topology, FieldChecker& c, TopologySpec* spec);
void validate_host(const HostConfig& host, FieldChecker& c, HostSpec* spec);

// Rules that relate the parts of a slice (ICI links vs. topology, chips per host); run after
// the parts were validated on their own. `c` is the slice file's top-level checker.
void validate_slice_relations(const SliceConfig& slice, FieldChecker& c, SliceSpec* spec);

// Fills the derived figures of a fully validated slice.
void finish_slice(SliceSpec* spec);

// A single chip shown as a one-chip slice (for `tpusim config show tpu_v3.pbtxt`).
void finish_chip(ChipSpec* spec);

}  // namespace tpusim::config
