// How spec messages name a JSON value's type ("an integer", "a number",
// "string", "array", "object", "boolean", "null").
#pragma once

#include <nlohmann/json.hpp>

namespace dfarm::harness {

inline const char* JsonTypeName(const nlohmann::json& v) {
  if (v.is_number_integer() || v.is_number_unsigned()) return "an integer";
  if (v.is_number_float()) return "a number";
  return v.type_name();
}

}  // namespace dfarm::harness
