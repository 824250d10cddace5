#include "model/json_value.h"

#include <cmath>
#include <nlohmann/json.hpp>

namespace autopilot::tuner {

// Parsing is nlohmann::json's (strict RFC 8259, UTF-8 checked, numbers that overflow a double
// refused); this file bounds it and copies the result into the small read-only tree the readers
// walk. ordered_json keeps members in document order; on a duplicate key the last value wins.
class JsonParser {
 public:
  using Json = nlohmann::ordered_json;

  static bool run(const std::string& text, JsonValue* out, std::string* error) {
    if (text.size() > JsonValue::kMaxInput) {
      *error = "document larger than " + std::to_string(JsonValue::kMaxInput) + " bytes";
      return false;
    }
    // The parser itself keeps its own stack, but the copy below recurses: refuse deep nesting
    // while parsing (the callback sees every value's depth), before anything is built.
    bool tooDeep = false;
    auto bound = [&](int depth, Json::parse_event_t, Json&) {
      if (depth > JsonValue::kMaxDepth) tooDeep = true;
      return !tooDeep;
    };
    Json doc;
    try {
      doc = Json::parse(text, bound, /*allow_exceptions=*/true, /*ignore_comments=*/false);
    } catch (const Json::exception& e) {
      *error = tooDeep ? "nested too deep (more than " + std::to_string(JsonValue::kMaxDepth) +
                             " levels)"
                       : e.what();
      return false;
    } catch (...) {
      *error = "cannot parse (out of memory?)";
      return false;
    }
    if (tooDeep) {
      *error = "nested too deep (more than " + std::to_string(JsonValue::kMaxDepth) + " levels)";
      return false;
    }
    copy(doc, out);
    return true;
  }

 private:
  static void copy(const Json& j, JsonValue* out) {
    *out = JsonValue{};
    switch (j.type()) {
      case Json::value_t::boolean:
        out->type_ = JsonValue::Type::kBool;
        out->bool_ = j.get<bool>();
        break;
      case Json::value_t::number_integer:
      case Json::value_t::number_unsigned:
      case Json::value_t::number_float:
        out->type_ = JsonValue::Type::kNumber;
        out->number_ = j.get<double>();
        break;
      case Json::value_t::string:
        out->type_ = JsonValue::Type::kString;
        out->string_ = j.get<std::string>();
        break;
      case Json::value_t::array:
        out->type_ = JsonValue::Type::kArray;
        out->array_.resize(j.size());
        for (size_t i = 0; i < j.size(); ++i) copy(j[i], &out->array_[i]);
        break;
      case Json::value_t::object:
        out->type_ = JsonValue::Type::kObject;
        for (const auto& [key, value] : j.items()) {
          out->members_.emplace_back(key, JsonValue{});
          copy(value, &out->members_.back().second);
        }
        break;
      default:  // null, and the binary type JSON text cannot produce
        out->type_ = JsonValue::Type::kNull;
        break;
    }
  }
};

bool JsonValue::parse(const std::string& text, JsonValue* out, std::string* error) {
  return JsonParser::run(text, out, error);
}

const JsonValue* JsonValue::find(const std::string& key) const {
  const JsonValue* found = nullptr;
  for (const auto& [k, v] : members_) {
    if (k == key) found = &v;
  }
  return found;
}

}  // namespace autopilot::tuner
