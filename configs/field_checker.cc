#include "configs/field_checker.h"

#include <cmath>
#include <utility>

#include "common/strings.h"

namespace tpusim::config {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

FieldChecker::FieldChecker(std::string file,
                           const google::protobuf::TextFormat::ParseInfoTree* locations,
                           std::string path_prefix, int block_line,
                           std::vector<std::string>* errors)
    : file_(std::move(file)),
      locations_(locations),
      prefix_(std::move(path_prefix)),
      block_line_(block_line),
      errors_(errors) {}

std::string FieldChecker::path(std::string_view field) const {
  if (field.empty()) return prefix_.empty() ? "(top level)" : prefix_.substr(0, prefix_.size() - 1);
  return str_cat(prefix_, field);
}

std::string FieldChecker::where(const FieldDescriptor* fd) const {
  int line = 0;
  if (locations_ != nullptr && fd != nullptr) {
    const int index = fd->is_repeated() ? 0 : -1;
    const auto loc = locations_->GetLocation(fd, index);
    if (loc.line >= 0) line = loc.line + 1;
  }
  if (line == 0) line = block_line_;
  return line > 0 ? str_cat(file_, ":", line) : file_;
}

const FieldDescriptor* FieldChecker::find(const Message& msg, std::string_view field) {
  const FieldDescriptor* fd = msg.GetDescriptor()->FindFieldByName(std::string(field));
  if (fd == nullptr) {
    // A rule naming a field the schema lacks is a bug in tpusim, not in the user's file.
    errors_->push_back(
        str_cat(file_, ": internal error: validation rule names unknown field ", path(field)));
  }
  return fd;
}

void FieldChecker::fail(const Message& msg, std::string_view field, std::string_view rule) {
  const FieldDescriptor* fd =
      field.empty() ? nullptr : msg.GetDescriptor()->FindFieldByName(std::string(field));
  errors_->push_back(str_cat(where(fd), ": ", path(field), ": ", rule));
}

bool FieldChecker::require(const Message& msg, const FieldDescriptor* fd) {
  if (fd->is_repeated() ? msg.GetReflection()->FieldSize(msg, fd) > 0
                        : msg.GetReflection()->HasField(msg, fd)) {
    return true;
  }
  errors_->push_back(
      str_cat(where(nullptr), ": ", path(fd->name()), ": required field is missing"));
  return false;
}

FieldChecker FieldChecker::nested(const Message& msg, std::string_view field, bool* present) const {
  const FieldDescriptor* fd = msg.GetDescriptor()->FindFieldByName(std::string(field));
  const Reflection* r = msg.GetReflection();
  *present = fd != nullptr && r->HasField(msg, fd);
  int line = block_line_;
  const google::protobuf::TextFormat::ParseInfoTree* sub = nullptr;
  if (*present && locations_ != nullptr) {
    sub = locations_->GetTreeForNested(fd, -1);
    const auto loc = locations_->GetLocation(fd, -1);
    if (loc.line >= 0) line = loc.line + 1;
  }
  if (!*present) {
    errors_->push_back(str_cat(where(nullptr), ": ", path(field), ": required block `", field,
                               " { ... }` is missing"));
  }
  return FieldChecker(file_, sub, str_cat(prefix_, field, "."), line, errors_);
}

double FieldChecker::read_number(const Message& msg, const FieldDescriptor* fd) {
  const Reflection* r = msg.GetReflection();
  switch (fd->cpp_type()) {
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return r->GetDouble(msg, fd);
    case FieldDescriptor::CPPTYPE_FLOAT:
      return r->GetFloat(msg, fd);
    case FieldDescriptor::CPPTYPE_UINT32:
      return r->GetUInt32(msg, fd);
    case FieldDescriptor::CPPTYPE_UINT64:
      return static_cast<double>(r->GetUInt64(msg, fd));
    case FieldDescriptor::CPPTYPE_INT32:
      return r->GetInt32(msg, fd);
    case FieldDescriptor::CPPTYPE_INT64:
      return static_cast<double>(r->GetInt64(msg, fd));
    default:
      errors_->push_back(
          str_cat(file_, ": internal error: ", path(fd->name()), " is not a number"));
      return 0;
  }
}

std::string FieldChecker::nonempty_string(const Message& msg, std::string_view field) {
  const FieldDescriptor* fd = find(msg, field);
  if (fd == nullptr || !require(msg, fd)) return "";
  std::string value = msg.GetReflection()->GetString(msg, fd);
  if (value.empty())
    errors_->push_back(str_cat(where(fd), ": ", path(field), ": must not be empty"));
  return value;
}

double FieldChecker::real_in_range(const Message& msg, std::string_view field, double lo, double hi,
                                   std::string_view why) {
  const FieldDescriptor* fd = find(msg, field);
  if (fd == nullptr || !require(msg, fd)) return 0;
  const double v = read_number(msg, fd);
  if (!std::isfinite(v)) {
    errors_->push_back(
        str_cat(where(fd), ": ", path(field), " = ", v, ": must be a finite number (", why, ")"));
    return 0;
  }
  return within(fd, field, v, lo, hi, why);
}

double FieldChecker::within(const FieldDescriptor* fd, std::string_view field, double v, double lo,
                            double hi, std::string_view why) {
  if (v >= lo && v <= hi) return v;
  errors_->push_back(str_cat(where(fd), ": ", path(field), " = ", v, ": must be in [", lo, ", ", hi,
                             "] (", why, ")"));
  return 0;
}

double FieldChecker::positive(const Message& msg, std::string_view field) {
  const FieldDescriptor* fd = find(msg, field);
  if (fd == nullptr || !require(msg, fd)) return 0;
  const double v = read_number(msg, fd);
  if (!std::isfinite(v) || v <= 0) {
    errors_->push_back(
        str_cat(where(fd), ": ", path(field), " = ", v, ": must be a finite number > 0"));
    return 0;
  }
  return v;
}

double FieldChecker::non_negative(const Message& msg, std::string_view field) {
  const FieldDescriptor* fd = find(msg, field);
  if (fd == nullptr || !require(msg, fd)) return 0;
  const double v = read_number(msg, fd);
  if (!std::isfinite(v) || v < 0) {
    errors_->push_back(
        str_cat(where(fd), ": ", path(field), " = ", v, ": must be a finite number >= 0"));
    return 0;
  }
  return v;
}

double FieldChecker::positive_in_range(const Message& msg, std::string_view field, double lo,
                                       double hi, std::string_view why) {
  const double v = positive(msg, field);
  return v > 0 ? within(find(msg, field), field, v, lo, hi, why) : 0;
}

double FieldChecker::non_negative_at_most(const Message& msg, std::string_view field, double hi,
                                          std::string_view why) {
  const double v = non_negative(msg, field);
  if (v > hi) {
    errors_->push_back(str_cat(where(find(msg, field)), ": ", path(field), " = ", v,
                               ": must be at most ", hi, " (", why, ")"));
    return 0;
  }
  return v;
}

uint64_t FieldChecker::count_in_range(const Message& msg, std::string_view field, uint64_t lo,
                                      uint64_t hi, std::string_view why) {
  const double v = real_in_range(msg, field, static_cast<double>(lo), static_cast<double>(hi), why);
  return static_cast<uint64_t>(v);
}

}  // namespace tpusim::config
