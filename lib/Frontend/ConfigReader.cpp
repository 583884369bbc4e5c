//===- ConfigReader.cpp - JSON reading ------------------------------------===//
//
// JSON reading shared by every config file dsc reads: strict parsing,
// numbers quoted as the user wrote them, "did you mean" suggestions.
//
//===----------------------------------------------------------------------===//

#include "ConfigReader.h"
#include "ConfigSections.h"
#include "dsc/Support/Files.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace dsc {
namespace config_reader {

std::string oneLine(std::string s) {
  for (char &c : s)
    if (c == '\n' || c == '\r' || c == '\t')
      c = ' ';
  return s;
}

/// A JSON value as the user wrote it, kept short and on one line.
std::string show(const json &v) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 64)
    s = s.substr(0, 60) + "...";
  return s;
}

std::string join(const std::vector<std::string> &names) {
  std::string out;
  for (const std::string &n : names)
    out += (out.empty() ? "" : ", ") + n;
  return out;
}

std::string path(const std::string &prefix, const std::string &key) {
  return prefix.empty() ? key : prefix + "." + key;
}

std::string lower(std::string s) {
  for (char &c : s)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

static size_t editDistance(const std::string &a, const std::string &b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1,
                         diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

/// " (did you mean 'x'?)" when a known name is close to `key`.
std::string suggest(const std::string &key,
                    const std::vector<std::string> &known) {
  std::string best;
  size_t bestDist = 3; // accept distance <= 2
  for (const std::string &k : known) {
    size_t d = editDistance(lower(key), lower(k));
    if (d < bestDist) {
      bestDist = d;
      best = k;
    }
  }
  return best.empty() ? "" : " (did you mean '" + best + "'?)";
}

namespace {

/// The text of every floating-point number of a JSON document, by key path
/// ("a.b", "a.b[1]"): messages quote a number as the user wrote it (5.5e0,
/// not 5.5). A second, SAX pass over a document parseStrictJson accepted.
class NumberTexts : public nlohmann::json_sax<json> {
public:
  explicit NumberTexts(std::map<std::string, std::string> &out) : out(out) {}
  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t &s) override {
    out[here()] = s;
    return value();
  }
  bool string(string_t &) override { return value(); }
  bool binary(binary_t &) override { return value(); }
  bool start_object(std::size_t) override {
    stack.push_back({true, "", 0});
    return true;
  }
  bool key(string_t &k) override {
    stack.back().key = k;
    return true;
  }
  bool end_object() override { return end(); }
  bool start_array(std::size_t) override {
    stack.push_back({false, "", 0});
    return true;
  }
  bool end_array() override { return end(); }
  bool parse_error(std::size_t, const std::string &,
                   const nlohmann::detail::exception &) override {
    return false;
  }

private:
  struct Level {
    bool object;
    std::string key;
    size_t index;
  };
  std::string here() const {
    std::string p;
    for (size_t i = 1; i < stack.size(); ++i) {
      const Level &l = stack[i - 1];
      if (l.object)
        p += (p.empty() ? "" : ".") + l.key;
      else
        p += "[" + std::to_string(l.index) + "]";
    }
    const Level &l = stack.back();
    return l.object ? (p.empty() ? "" : p + ".") + l.key
                    : p + "[" + std::to_string(l.index) + "]";
  }
  bool value() {
    if (!stack.empty() && !stack.back().object)
      ++stack.back().index;
    return true;
  }
  bool end() {
    stack.pop_back();
    return value();
  }
  std::map<std::string, std::string> &out;
  std::vector<Level> stack;
};

} // namespace

/// Real configs are a few KiB and nest 3 levels; these bounds keep a hostile
/// file from costing more than a fraction of a second.
constexpr uint64_t kMaxConfigBytes = 16ull << 20; // 16 MiB
constexpr int kMaxConfigDepth = 64;

std::string readFile(const std::string &file) {
  try {
    return readRegularFile(file, kMaxConfigBytes, "a config file");
  } catch (const FileError &e) {
    throw ConfigError(oneLine(e.what()));
  }
}

/// Parses strict JSON (no comments, no NaN, at most kMaxConfigDepth levels)
/// and rejects duplicate keys, which nlohmann::json would otherwise resolve
/// silently (last one wins).
json parseJson(const std::string &text, Ctx &c) {
  json j;
  try {
    j = parseStrictJson(text, kMaxConfigDepth);
  } catch (const JsonError &e) {
    c.fail(e.what());
  }
  if (!j.is_object())
    c.fail(std::string("expected a JSON object at the top level, got ") +
           j.type_name());
  NumberTexts texts(c.numberTexts);
  json::sax_parse(text, &texts);
  return j;
}

} // namespace config_reader

} // namespace dsc
