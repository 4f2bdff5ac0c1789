#pragma once
// FieldChecker applies one rule to one field of a parsed config message and records a message
// naming the file, the line (when the parser saw one), the dotted field path and the rule.
// Rules are looked up by field name through protobuf reflection, so a rule reads like
// `c.positive(hbm, "bandwidth_gb_per_s")`.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <google/protobuf/message.h>
#include <google/protobuf/text_format.h>

namespace tpusim::config {

class FieldChecker {
 public:
  // `locations` may be null (a message built in code has no lines). `errors` collects every
  // violation; the loader fails when it is non-empty.
  FieldChecker(std::string file, const google::protobuf::TextFormat::ParseInfoTree* locations,
               std::string path_prefix, int block_line, std::vector<std::string>* errors);

  // A checker for the sub-message `field` of `msg`; records "block is missing" and returns
  // false through `present` when it is absent.
  FieldChecker nested(const google::protobuf::Message& msg, std::string_view field,
                      bool* present) const;

  // Each rule returns the field's value (0 or "" when it is absent or broken).
  std::string nonempty_string(const google::protobuf::Message& msg, std::string_view field);
  double positive(const google::protobuf::Message& msg, std::string_view field);
  double non_negative(const google::protobuf::Message& msg, std::string_view field);
  // positive() or non_negative(), then within [lo, hi]: a rate or a delay a run can simulate
  // (`why` names the unit and the span).
  double positive_in_range(const google::protobuf::Message& msg, std::string_view field, double lo,
                           double hi, std::string_view why);
  double non_negative_at_most(const google::protobuf::Message& msg, std::string_view field,
                              double hi, std::string_view why);
  double real_in_range(const google::protobuf::Message& msg, std::string_view field, double lo,
                       double hi, std::string_view why);
  uint64_t count_in_range(const google::protobuf::Message& msg, std::string_view field, uint64_t lo,
                          uint64_t hi, std::string_view why);

  // Records a violation about `field` (may be "" for the block itself).
  void fail(const google::protobuf::Message& msg, std::string_view field, std::string_view rule);

  const std::string& file() const { return file_; }
  std::string path(std::string_view field) const;

 private:
  const google::protobuf::FieldDescriptor* find(const google::protobuf::Message& msg,
                                                std::string_view field);
  bool require(const google::protobuf::Message& msg, const google::protobuf::FieldDescriptor* fd);
  double read_number(const google::protobuf::Message& msg,
                     const google::protobuf::FieldDescriptor* fd);
  std::string where(const google::protobuf::FieldDescriptor* fd) const;
  // `v` when it is in [lo, hi]; otherwise records "must be in [lo, hi] (why)" and returns 0.
  double within(const google::protobuf::FieldDescriptor* fd, std::string_view field, double v,
                double lo, double hi, std::string_view why);

  std::string file_;
  const google::protobuf::TextFormat::ParseInfoTree* locations_;
  std::string prefix_;
  int block_line_;  // 1-based line of the enclosing block, 0 when unknown
  std::vector<std::string>* errors_;
};

}  // namespace tpusim::config
