#include "configs/overrides.h"

#include <charconv>
#include <cstdlib>
#include <sstream>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/text_format.h>

#include "common/strings.h"
#include "configs/loader.h"

namespace tpusim::config {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

std::vector<std::string> split(std::string_view text, char sep) {
  std::vector<std::string> parts;
  std::string part;
  std::stringstream in{std::string(text)};
  while (std::getline(in, part, sep)) parts.push_back(part);
  if (!text.empty() && text.back() == sep) parts.emplace_back();
  return parts;
}

std::string field_names(const Descriptor& d) {
  std::vector<std::string> names;
  for (int i = 0; i < d.field_count(); ++i) names.push_back(d.field(i)->name());
  return str_join(names, ", ");
}

// The field of `d` called `name`, or the only one whose name starts with it.
absl::StatusOr<const FieldDescriptor*> find_field(const Descriptor& d, const std::string& name,
                                                  std::string_view path) {
  if (const FieldDescriptor* f = d.FindFieldByName(name); f != nullptr) return f;
  const FieldDescriptor* match = nullptr;
  std::vector<std::string> candidates;
  for (int i = 0; i < d.field_count(); ++i) {
    if (!name.empty() && d.field(i)->name().rfind(name, 0) == 0) {
      match = d.field(i);
      candidates.push_back(match->name());
    }
  }
  if (candidates.size() == 1) return match;
  if (candidates.size() > 1) {
    return absl::InvalidArgumentError(str_cat("'", path, "': '", name, "' could be any of ",
                                              str_join(candidates, ", "), " in ", d.name()));
  }
  return absl::InvalidArgumentError(str_cat("'", path, "': ", d.name(), " has no field '", name,
                                            "' (its fields: ", field_names(d), ")"));
}

absl::Status bad_value(std::string_view path, const FieldDescriptor& f, std::string_view text,
                       const char* expected) {
  return absl::InvalidArgumentError(
      str_cat("'", path, "': '", text, "' is not ", expected, " (", f.full_name(), ")"));
}

// Whether a from_chars read the whole of a non-empty text ending at `end`.
bool whole(const std::from_chars_result& r, const char* end) {
  return r.ec == std::errc() && r.ptr == end;
}

// Parses `text` into field `f` of `m` (appending when repeated).
absl::Status set_scalar(Message* m, const FieldDescriptor& f, std::string_view path,
                        const std::string& text) {
  const Reflection& r = *m->GetReflection();
  const bool rep = f.is_repeated();
  const char* begin = text.data();
  const char* text_end = text.data() + text.size();
  switch (f.cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
    case FieldDescriptor::CPPTYPE_INT64: {
      // from_chars, as a config file's parser reads a number: no space, no '+', nothing after.
      long long v = 0;
      if (!whole(std::from_chars(begin, text_end, v), text_end))
        return bad_value(path, f, text, "an integer");
      if (f.cpp_type() == FieldDescriptor::CPPTYPE_INT32) {
        if (v < INT32_MIN || v > INT32_MAX) return bad_value(path, f, text, "a 32-bit integer");
        rep ? r.AddInt32(m, &f, static_cast<int32_t>(v))
            : r.SetInt32(m, &f, static_cast<int32_t>(v));
      } else {
        rep ? r.AddInt64(m, &f, v) : r.SetInt64(m, &f, v);
      }
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_UINT32:
    case FieldDescriptor::CPPTYPE_UINT64: {
      unsigned long long v = 0;  // from_chars takes no sign: "-2" is not wrapped to 2^64 - 2
      if (!whole(std::from_chars(begin, text_end, v), text_end))
        return bad_value(path, f, text, "a whole number >= 0");
      if (f.cpp_type() == FieldDescriptor::CPPTYPE_UINT32) {
        if (v > UINT32_MAX) return bad_value(path, f, text, "a 32-bit whole number");
        rep ? r.AddUInt32(m, &f, static_cast<uint32_t>(v))
            : r.SetUInt32(m, &f, static_cast<uint32_t>(v));
      } else {
        rep ? r.AddUInt64(m, &f, v) : r.SetUInt64(m, &f, v);
      }
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_DOUBLE:
    case FieldDescriptor::CPPTYPE_FLOAT: {
      double v = 0;  // decimal or exponent form only: no hex floats, no space, no '+'
      if (!whole(std::from_chars(begin, text_end, v, std::chars_format::general), text_end))
        return bad_value(path, f, text, "a number");
      if (f.cpp_type() == FieldDescriptor::CPPTYPE_DOUBLE) {
        rep ? r.AddDouble(m, &f, v) : r.SetDouble(m, &f, v);
      } else {
        rep ? r.AddFloat(m, &f, static_cast<float>(v)) : r.SetFloat(m, &f, static_cast<float>(v));
      }
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_BOOL: {
      if (text != "true" && text != "false") return bad_value(path, f, text, "true or false");
      rep ? r.AddBool(m, &f, text == "true") : r.SetBool(m, &f, text == "true");
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_STRING:
      rep ? r.AddString(m, &f, text) : r.SetString(m, &f, text);
      return absl::OkStatus();
    case FieldDescriptor::CPPTYPE_ENUM: {
      const auto* value = f.enum_type()->FindValueByName(text);
      if (value == nullptr) {
        std::vector<std::string> names;
        for (int i = 0; i < f.enum_type()->value_count(); ++i)
          names.push_back(f.enum_type()->value(i)->name());
        return absl::InvalidArgumentError(str_cat("'", path, "': '", text, "' is not one of ",
                                                  str_join(names, ", "), " (", f.full_name(), ")"));
      }
      rep ? r.AddEnum(m, &f, value) : r.SetEnum(m, &f, value);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_MESSAGE:
      break;
  }
  return absl::InvalidArgumentError(
      str_cat("'", path, "': ", f.full_name(),
              " is a message; name one of its fields: ", field_names(*f.message_type())));
}

}  // namespace

bool is_config_path(std::string_view path) {
  const std::string head(path.substr(0, path.find('.')));
  return SliceConfig::descriptor()->FindFieldByName(head) != nullptr;
}

absl::Status set_field(Message* message, std::string_view path, std::string_view text) {
  const std::vector<std::string> names = split(path, '.');
  Message* m = message;
  for (size_t i = 0; i < names.size(); ++i) {
    auto field = find_field(*m->GetDescriptor(), names[i], path);
    if (!field.ok()) return field.status();
    const FieldDescriptor& f = **field;
    const bool last = i + 1 == names.size();
    if (!last) {
      if (f.cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE || f.is_repeated()) {
        return absl::InvalidArgumentError(
            str_cat("'", path, "': ", f.full_name(), " has no fields to name after it"));
      }
      m = m->GetReflection()->MutableMessage(m, &f);
      continue;
    }
    if (!f.is_repeated()) return set_scalar(m, f, path, std::string(text));
    m->GetReflection()->ClearField(m, &f);
    for (const std::string& item : split(text, 'x')) {
      if (absl::Status s = set_scalar(m, f, path, item); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(str_cat("'", path, "': an empty field path"));
}

absl::StatusOr<std::shared_ptr<const SliceSpec>> with_overrides(
    const SliceSpec& base, const std::vector<std::pair<std::string, std::string>>& sets,
    const std::string& label) {
  SliceConfig edited = base.proto;
  for (const auto& [path, value] : sets) {
    if (absl::Status s = set_field(&edited, path, value); !s.ok()) {
      return absl::InvalidArgumentError(str_cat(label, ": ", s.message()));
    }
  }
  return validate_slice(edited, label);
}

std::string to_config_text(const SliceSpec& slice) {
  std::string body;
  google::protobuf::TextFormat::PrintToString(slice.proto, &body);
  return str_cat("# proto-file: configs/config.proto\n# proto-message: tpusim.config.SliceConfig\n",
                 "#\n# ", slice.name, ", written by tpusim from ", slice.source, "\n", body);
}

}  // namespace tpusim::config
