//===- ConfigReader.h - JSON reading for config files ------------------===//
//
// Internal to lib/Frontend: the error context (Ctx) every config reader uses,
// typed access to JSON values and the bounds on what a config may ask for.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_LIB_FRONTEND_CONFIGREADER_H
#define DSC_LIB_FRONTEND_CONFIGREADER_H

#include "dsc/Frontend/Config.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace dsc {
namespace config_reader {

using json = nlohmann::json;

/// Largest value accepted for sizes (dimensions, batch sizes, steps): keeps
/// every product the compiler forms well inside int64.
constexpr int64_t kMaxSize = (int64_t(1) << 31) - 1;
// Model dimensions and layer counts: far above any real model, far below
// what would overflow the byte counts derived from them (or build IR until
// memory runs out).
constexpr int64_t kMaxDimension = int64_t(1) << 24;
constexpr int64_t kMaxLayers = 4096;
/// Experts of a mixture-of-experts layer (one CUDA block routes them).
constexpr int64_t kMaxExperts = 1024;
// What one training step may plan, all buffers together (4 PiB).
constexpr double kMaxStepBytes = double(int64_t(1) << 52);

std::string oneLine(std::string s);
/// A JSON value as the user wrote it, kept short and on one line.
std::string show(const json &v);
std::string join(const std::vector<std::string> &names);
std::string path(const std::string &prefix, const std::string &key);
std::string lower(std::string s);
/// " (did you mean 'x'?)" when a known name is close to `key`.
std::string suggest(const std::string &key,
                    const std::vector<std::string> &known);
inline std::string str(int64_t v) { return std::to_string(v); }

/// Error reporting and typed access to JSON values, all naming `origin`.
class Ctx {
public:
  explicit Ctx(std::string origin) : origin(std::move(origin)) {}

  [[noreturn]] void fail(const std::string &msg) const {
    throw ConfigError(oneLine(origin + ": " + msg));
  }

  /// `v` (at key path `p`) as the user wrote it.
  std::string shown(const std::string &p, const json &v) const {
    if (v.is_number_float())
      if (auto it = numberTexts.find(p); it != numberTexts.end())
        return it->second;
    return show(v);
  }

  /// "<path>: <value> is not allowed; expected <expected>".
  [[noreturn]] void bad(const std::string &p, const json &v,
                        const std::string &expected) const {
    std::string msg = p + ": " + shown(p, v) + " is not allowed; expected " +
                      expected;
    if (v.is_string() && v.get_ref<const std::string &>() == "auto")
      msg += " (\"auto\" is resolved only where the Hugging Face Trainer "
             "resolves it; write the value itself)";
    fail(msg);
  }

  /// "<notePrefix><text>" ("ds_config: ..."), once.
  void note(const std::string &text) const {
    const std::string line = notePrefix + text;
    if (std::find(notes.begin(), notes.end(), line) == notes.end())
      notes.push_back(line);
  }

  /// An integer, also written as a whole-number float (5e8, 1e9: DeepSpeed
  /// reads its integer keys so).
  int64_t integer(const std::string &p, const json &v, int64_t min,
                  int64_t max, const std::string &expected) const {
    int64_t x = 0;
    if (v.is_number_float()) {
      const double d = v.get<double>();
      // 2^63 itself is not an int64; the compare is exact in double.
      if (!std::isfinite(d) || d != std::floor(d) || d < -9223372036854775808.0 ||
          d >= 9223372036854775808.0)
        bad(p, v, expected);
      x = int64_t(d);
      wholeFloats.emplace_back(p, x);
    } else {
      if (!v.is_number_integer())
        bad(p, v, expected);
      if (v.is_number_unsigned() &&
          v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
        bad(p, v, expected);
      x = v.get<int64_t>();
    }
    if (x < min || x > max)
      bad(p, v, expected);
    return x;
  }
  /// A model dimension (vocabulary, width, heads, positions).
  int64_t dimension(const std::string &p, const json &v) const {
    return integer(p, v, 1, kMaxDimension,
                   "a positive integer (at most " + std::to_string(kMaxDimension) +
                       ")");
  }
  int64_t layerCount(const std::string &p, const json &v) const {
    return integer(p, v, 1, kMaxLayers,
                   "a positive integer (at most " + std::to_string(kMaxLayers) +
                       " layers)");
  }
  int64_t positive(const std::string &p, const json &v) const {
    return integer(p, v, 1, kMaxSize, "a positive integer (at most 2^31-1)");
  }
  int64_t nonNegative(const std::string &p, const json &v) const {
    return integer(p, v, 0, kMaxSize,
                   "an integer >= 0 (at most 2^31-1)");
  }

  double number(const std::string &p, const json &v,
                const std::function<bool(double)> &ok,
                const std::string &expected) const {
    if (!v.is_number())
      bad(p, v, expected);
    double x = v.get<double>();
    if (!std::isfinite(x) || !ok(x))
      bad(p, v, expected);
    return x;
  }
  double probability(const std::string &p, const json &v) const {
    return number(p, v, [](double x) { return x >= 0 && x < 1; },
                  "a number in [0, 1)");
  }
  double nonNegativeNumber(const std::string &p, const json &v) const {
    return number(p, v, [](double x) { return x >= 0; }, "a number >= 0");
  }
  double positiveNumber(const std::string &p, const json &v) const {
    return number(p, v, [](double x) { return x > 0; }, "a number > 0");
  }

  bool boolean(const std::string &p, const json &v) const {
    if (!v.is_boolean())
      bad(p, v, "true or false");
    return v.get<bool>();
  }

  const std::string &string(const std::string &p, const json &v,
                            const std::string &expected) const {
    if (!v.is_string())
      bad(p, v, expected);
    return v.get_ref<const std::string &>();
  }

  const json &object(const std::string &p, const json &v) const {
    if (!v.is_object())
      bad(p, v, "a JSON object");
    return v;
  }

  /// Train-config style unknown key: "<path>: unknown key; allowed here: ...".
  [[noreturn]] void unknownKey(const std::string &prefix,
                               const std::string &key,
                               const std::vector<std::string> &allowed) const {
    fail(path(prefix, key) + ": unknown key" + suggest(key, allowed) +
         "; allowed here: " + join(allowed));
  }

  /// Fails on the first key of `obj` that is not in `allowed`.
  void checkKeys(const std::string &prefix, const json &obj,
                 const std::vector<std::string> &allowed) const {
    for (auto it = obj.begin(); it != obj.end(); ++it)
      if (std::find(allowed.begin(), allowed.end(), it.key()) == allowed.end())
        unknownKey(prefix, it.key(), allowed);
  }

  std::string origin;
  std::string notePrefix = "ds_config: ";
  std::map<std::string, std::string> numberTexts;
  /// Integer keys written as floats, by path: written as integers in the
  /// resolved config.
  mutable std::vector<std::pair<std::string, int64_t>> wholeFloats;
  mutable std::vector<std::string> notes;
  /// Keys a reader ignored because the library it follows ignores them,
  /// for one note at the end.
  mutable std::vector<std::string> ignoredKeys;
};


/// The contents of a config file (bounded in size), or a ConfigError.
std::string readFile(const std::string &file);
/// Strict JSON (no comments, no NaN, no duplicate keys) with an object at
/// the top level; remembers the text of every number in `c`.
json parseJson(const std::string &text, Ctx &c);

} // namespace config_reader
} // namespace dsc

#endif // DSC_LIB_FRONTEND_CONFIGREADER_H
