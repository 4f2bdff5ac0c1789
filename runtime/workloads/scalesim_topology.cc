#include "runtime/workloads/scalesim_topology.h"

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "common/strings.h"

namespace tpusim::runtime {
namespace {

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  const size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

std::vector<std::string> split_fields(const std::string& line) {
  std::vector<std::string> fields;
  std::string field;
  std::istringstream in(line);
  while (std::getline(in, field, ',')) fields.push_back(trim(field));
  while (!fields.empty() && fields.back().empty()) fields.pop_back();  // the trailing comma
  return fields;
}

bool parse_count(const std::string& s, uint64_t* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || s[0] == '-') return false;
  *out = v;
  return true;
}

}  // namespace

absl::StatusOr<std::vector<TopologyLayer>> parse_scalesim_topology(const std::string& text,
                                                                   const std::string& label,
                                                                   TopologyFormat format) {
  std::vector<TopologyLayer> layers;
  std::istringstream in(text);
  std::string line;
  int line_no = 0;
  bool header_seen = false;
  while (std::getline(in, line)) {
    ++line_no;
    if (trim(line).empty()) continue;
    const auto fields = split_fields(line);
    if (!header_seen) {  // the header names the columns; its first field is never numeric
      header_seen = true;
      uint64_t ignored;
      if (fields.size() > 1 && !parse_count(fields[1], &ignored)) continue;
    }
    const size_t numeric = fields.size() - 1;
    TopologyFormat kind = format;
    if (kind == TopologyFormat::kAuto) {
      if (numeric == 7)
        kind = TopologyFormat::kConv;
      else if (numeric == 3)
        kind = TopologyFormat::kGemm;
      else {
        return absl::InvalidArgumentError(
            str_cat(label, ":", line_no, ": ", numeric,
                    " numeric fields; a conv layer has 7 (IFMAP H, W, filter H, W, "
                    "channels, filters, stride) and a GEMM layer 3 (M, N, K)"));
      }
    }
    const size_t want = kind == TopologyFormat::kConv ? 7 : 3;
    if (numeric != want) {
      return absl::InvalidArgumentError(
          str_cat(label, ":", line_no, ": ", numeric, " numeric fields, the ",
                  kind == TopologyFormat::kConv ? "conv" : "GEMM", " format has ", want));
    }
    std::vector<uint64_t> v(want);
    for (size_t i = 0; i < want; ++i) {
      if (!parse_count(fields[i + 1], &v[i]) || v[i] == 0) {
        return absl::InvalidArgumentError(str_cat(label, ":", line_no, ": field ", i + 2, " (\"",
                                                  fields[i + 1], "\") of layer ", fields[0],
                                                  " must be a positive integer"));
      }
    }
    TopologyLayer layer;
    layer.name = fields[0];
    if (kind == TopologyFormat::kGemm) {
      layer.t = v[0];
      layer.n = v[1];
      layer.k = v[2];
    } else {
      const uint64_t h = v[0], w = v[1], fh = v[2], fw = v[3], c = v[4], filters = v[5], s = v[6];
      if (fh > h || fw > w) {
        return absl::InvalidArgumentError(str_cat(label, ":", line_no, ": layer ", layer.name,
                                                  " has a ", fh, "x", fw,
                                                  " filter larger than its ", h, "x", w, " input"));
      }
      // SCALE-Sim: ofmap = ceil((H - Fh + S) / S), likewise for the width.
      const uint64_t oh = (h - fh + s + s - 1) / s;
      const uint64_t ow = (w - fw + s + s - 1) / s;
      layer.t = oh * ow;
      layer.k = fh * fw * c;
      layer.n = filters;
    }
    layers.push_back(std::move(layer));
  }
  if (layers.empty()) return absl::InvalidArgumentError(str_cat(label, ": no layers"));
  return layers;
}

absl::StatusOr<std::vector<TopologyLayer>> read_scalesim_topology(const std::string& path,
                                                                  TopologyFormat format) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(str_cat("cannot open topology file ", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_scalesim_topology(ss.str(), path, format);
}

}  // namespace tpusim::runtime
