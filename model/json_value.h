// A small read-only JSON tree for the few documents the tool reads (topology sidecars of the
// replay benchmark, declared topologies of the demo, the simulator's fabric). Parsed by
// nlohmann::json (Debian: nlohmann-json3-dev, header-only), strict RFC 8259, with bounded input
// size and nesting depth so that a hostile file cannot exhaust the stack or memory. Not used on
// any hot path, and not in the plugin library.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace autopilot::tuner {

class JsonValue {
 public:
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };

  static constexpr int kMaxDepth = 32;
  static constexpr size_t kMaxInput = 4 << 20;

  // Parses `text`; on failure returns false and sets *error (with the byte offset).
  static bool parse(const std::string& text, JsonValue* out, std::string* error);

  Type type() const { return type_; }
  bool isNull() const { return type_ == Type::kNull; }
  bool isBool() const { return type_ == Type::kBool; }
  bool isNumber() const { return type_ == Type::kNumber; }
  bool isString() const { return type_ == Type::kString; }
  bool isArray() const { return type_ == Type::kArray; }
  bool isObject() const { return type_ == Type::kObject; }

  bool boolean() const { return bool_; }
  double number() const { return number_; }
  const std::string& string() const { return string_; }
  const std::vector<JsonValue>& array() const { return array_; }
  const std::vector<std::pair<std::string, JsonValue>>& members() const { return members_; }
  // Member lookup (objects only; the last duplicate wins); NULL when absent.
  const JsonValue* find(const std::string& key) const;

 private:
  friend class JsonParser;
  Type type_ = Type::kNull;
  bool bool_ = false;
  double number_ = 0;
  std::string string_;
  std::vector<JsonValue> array_;
  std::vector<std::pair<std::string, JsonValue>> members_;
};

}  // namespace autopilot::tuner
