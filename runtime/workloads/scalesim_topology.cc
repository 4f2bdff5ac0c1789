#include "runtime/workloads/scalesim_topology.h"

#include <charconv>
#include <fstream>
#include <sstream>
#include <utility>

#include "common/input_file.h"
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

constexpr uint64_t kMaxField = uint64_t{1} << 24;  // a topology field's bound
// A topology's bound in layers: SCALE-Sim's own topologies are tens to a few hundred layers (its
// MLPerf ResNet-50 has 54), and each layer costs a simulation and a row of the report (10,000
// random layers: 0.28 s and 37 MB for `tpusim layers`; 456,000 under the 16 MiB file cap took 11 s
// and 720 MB, 18.7 s and 2 GB with --json).
constexpr size_t kMaxLayers = 10000;

// A decimal count that is the whole field: from_chars stops at the first byte that is no digit,
// and a field with bytes after its digits (an embedded NUL, "12abc") is refused, where strtoull
// saw a NUL as the string's end and read "1\x0028" as 1.
bool parse_count(const std::string& s, uint64_t* out) {
  const char* end = s.data() + s.size();
  uint64_t v = 0;
  const auto [stop, ec] = std::from_chars(s.data(), end, v);
  if (s.empty() || ec != std::errc() || stop != end) return false;
  *out = v;
  return true;
}

// A layer's GEMM within what a simulated chip can hold: each dimension at most 2^24 and each
// operand and the result at most 2^32 elements (16 GiB of f32), checked without overflow.
absl::Status check_layer_size(const TopologyLayer& layer, const std::string& label, int line_no) {
  constexpr uint64_t kMaxDim = uint64_t{1} << 24, kMaxElements = uint64_t{1} << 32;
  const std::pair<const char*, uint64_t> dims[] = {{"M", layer.t}, {"N", layer.n}, {"K", layer.k}};
  for (const auto& [name, d] : dims) {
    if (d > kMaxDim) {
      return absl::InvalidArgumentError(str_cat(label, ":", line_no, ": layer ", layer.name, "'s ",
                                                name, " is ", d, ", over 2^24"));
    }
  }
  const std::pair<const char*, std::pair<uint64_t, uint64_t>> operands[] = {
      {"M x K", {layer.t, layer.k}}, {"K x N", {layer.k, layer.n}}, {"M x N", {layer.t, layer.n}}};
  for (const auto& [name, mn] : operands) {
    if (mn.first * mn.second > kMaxElements) {  // each factor <= 2^24: no overflow
      return absl::InvalidArgumentError(str_cat(label, ":", line_no, ": layer ", layer.name, "'s ",
                                                name, " operand holds ", mn.first * mn.second,
                                                " elements, over 2^32"));
    }
  }
  return absl::OkStatus();
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
      if (!parse_count(fields[i + 1], &v[i]) || v[i] == 0 || v[i] > kMaxField) {
        return absl::InvalidArgumentError(str_cat(label, ":", line_no, ": field ", i + 2, " (\"",
                                                  fields[i + 1], "\") of layer ", fields[0],
                                                  " must be a positive integer up to 2^24"));
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
      // Each field <= 2^24: oh * ow and fh * fw cannot overflow; times c they could, so K
      // saturates at 2^48, which check_layer_size refuses as over 2^24.
      layer.t = oh * ow;
      layer.k = fh * fw > (kMaxField * kMaxField) / c ? kMaxField * kMaxField : fh * fw * c;
      layer.n = filters;
    }
    if (auto bounded = check_layer_size(layer, label, line_no); !bounded.ok()) return bounded;
    if (layers.size() == kMaxLayers) {
      return absl::InvalidArgumentError(
          str_cat(label, ":", line_no, ": layer ", layer.name, " is past the bound of ", kMaxLayers,
                  " layers a topology may have (SCALE-Sim's are tens to hundreds)"));
    }
    layers.push_back(std::move(layer));
  }
  if (layers.empty()) return absl::InvalidArgumentError(str_cat(label, ": no layers"));
  return layers;
}

absl::StatusOr<std::vector<TopologyLayer>> read_scalesim_topology(const std::string& path,
                                                                  TopologyFormat format) {
  if (auto s = check_regular_file(path, "topology file"); !s.ok()) return s;
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(str_cat("cannot open topology file ", path));
  // Read at most a byte past the bound: /dev/zero or a huge file is refused, not exhausted.
  constexpr size_t kMaxBytes = 16 << 20;
  std::string text(kMaxBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxBytes) {
    return absl::InvalidArgumentError(
        str_cat(path, " is over 16 MiB: not a SCALE-Sim topology (a few hundred layers is 10 KB)"));
  }
  return parse_scalesim_topology(text, path, format);
}

}  // namespace tpusim::runtime
