//===- DeepSpeedKeyChecks.cpp - ds_config keys vs. the table --------------===//
//
// Keys of a ds_config.json checked against the DeepSpeed key table
// (DeepSpeedKeys.cpp): keys dsc implements are the caller's to read; keys
// without effect are noted once; unsupported ones are refused with the
// table's reason; keys DeepSpeed does not know are unknown.
//
//===----------------------------------------------------------------------===//

#include "ConfigReader.h"
#include "ConfigSections.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace dsc {
namespace config_reader {

const DeepSpeedKey *findDeepSpeedKey(const std::string &p) {
  for (const DeepSpeedKey &k : deepSpeedKeys())
    if (p == k.path)
      return &k;
  return nullptr;
}

/// The table's keys directly inside the section `prefix` ("": top level).
std::vector<std::string> deepSpeedKeysIn(const std::string &prefix) {
  std::vector<std::string> out;
  const std::string start = prefix.empty() ? "" : prefix + ".";
  for (const DeepSpeedKey &k : deepSpeedKeys()) {
    const std::string p = k.path;
    if (p.rfind(start, 0) == 0 &&
        p.find('.', start.size()) == std::string::npos)
      out.push_back(p.substr(start.size()));
  }
  return out;
}

/// `a` and then the names of `b` that `a` lacks.
std::vector<std::string> merged(std::vector<std::string> a,
                                const std::vector<std::string> &b) {
  for (const std::string &k : b)
    if (std::find(a.begin(), a.end(), k) == a.end())
      a.push_back(k);
  return a;
}

/// Whether `v` is one of a table entry's accepted values (DeepSpeedKey).
bool acceptedValue(const std::string &accepts, const json &v) {
  if (accepts == "{enabled:false}") {
    if (!v.is_object())
      return false;
    auto it = v.find("enabled");
    return it == v.end() || *it == false;
  }
  if (accepts == "{device:none}") {
    if (v.is_null())
      return true;
    if (!v.is_object())
      return false;
    auto it = v.find("device");
    return it == v.end() || it->is_null() || *it == "none";
  }
  size_t start = 0;
  while (start <= accepts.size()) {
    size_t bar = accepts.find('|', start);
    if (bar == std::string::npos)
      bar = accepts.size();
    if (json::parse(accepts.substr(start, bar - start)) == v)
      return true;
    start = bar + 1;
  }
  return false;
}

void checkKeyType(const Ctx &c, const std::string &p, const json &v,
                  const std::string &type) {
  if (type == "list") {
    if (!v.is_null() && !v.is_array())
      c.bad(p, v, "a list");
  } else if (type == "bool")
    c.boolean(p, v);
  else if (type == "int")
    c.integer(p, v, std::numeric_limits<int64_t>::min(),
              std::numeric_limits<int64_t>::max(), "an integer");
  else if (type == "int>=0")
    c.integer(p, v, 0, std::numeric_limits<int64_t>::max(),
              "a non-negative integer");
  else if (type == "number")
    c.number(p, v, [](double) { return true; }, "a number");
  else if (type == "string") {
    if (!v.is_null())
      c.string(p, v, "a string");
  } else if (type == "object") {
    if (!v.is_null())
      c.object(p, v);
  }
}

namespace {

/// The keys of the section `name` (an object) against the table's keys
/// inside it. `off`: the section is accepted only switched off, so each
/// key's type is checked and nothing else; otherwise each key gets its
/// own treatment. A key the table does not know is unknown, or, where
/// DeepSpeed ignores such keys, noted (unless it misspells a known one).
void checkTableSection(const Ctx &c, const std::string &name, const json &sec,
                       bool off) {
  const DeepSpeedKey *section = findDeepSpeedKey(name);
  const std::vector<std::string> known = deepSpeedKeysIn(name);
  std::vector<std::string> ignored;
  for (auto it = sec.begin(); it != sec.end(); ++it) {
    const std::string p = path(name, it.key());
    const DeepSpeedKey *k = findDeepSpeedKey(p);
    if (!k) {
      unknownOrIgnored(c, name, it.key(), known,
                       section && section->ignoresUnknownKeys, ignored);
      continue;
    }
    if (off || !handleTableKey(c, name, it.key(), it.value())) {
      // DeepSpeed's default null: the key may be null whatever its type.
      if (!(it.value().is_null() && std::string(k->dsDefault) == "null"))
        checkKeyType(c, p, it.value(), k->type);
    }
  }
  noteIgnored(c, name, ignored);
}

bool hasTableKeysIn(const std::string &name) {
  return !deepSpeedKeysIn(name).empty();
}

} // namespace

void unknownOrIgnored(const Ctx &c, const std::string &prefix,
                      const std::string &key,
                      const std::vector<std::string> &allowed, bool ignores,
                      std::vector<std::string> &ignored) {
  if (!ignores)
    c.unknownKey(prefix, key, allowed);
  const std::string near = suggest(key, allowed);
  if (!near.empty())
    c.fail(path(prefix, key) + ": unknown key" + near +
           "; DeepSpeed would ignore it (it ignores keys it does not know "
           "here); allowed here: " +
           join(allowed));
  ignored.push_back(key);
}

void noteIgnored(const Ctx &c, const std::string &prefix,
                 const std::vector<std::string> &ignored) {
  if (ignored.empty())
    return;
  std::vector<std::string> paths;
  for (const std::string &k : ignored)
    paths.push_back(path(prefix, k));
  c.note(join(paths) + ": " + (ignored.size() == 1 ? "not a key" : "not keys") +
         " of " +
         (prefix.empty() ? std::string("DeepSpeed's config")
                         : "DeepSpeed's " + prefix + " section") +
         "; ignored, as DeepSpeed ignores " +
         (ignored.size() == 1 ? "it" : "them"));
}

/// Handles `key` of the section `prefix` when the table says it has no
/// effect or is not supported; false when the table implements it (the
/// caller's to read) or does not know it.
bool handleTableKey(const Ctx &c, const std::string &prefix,
                    const std::string &key, const json &v) {
  const std::string p = path(prefix, key);
  const DeepSpeedKey *k = findDeepSpeedKey(p);
  if (!k || k->treatment == KeyTreatment::Implemented)
    return false;
  const std::string accepts = k->accepts ? k->accepts : "";
  // A section whose keys the table lists: each key checked.
  if (v.is_object() && hasTableKeysIn(p) &&
      (accepts.empty() || accepts == "{enabled:false}")) {
    checkTableSection(c, p, v, /*off=*/!accepts.empty());
    if (accepts.empty() || acceptedValue(accepts, v))
      return true;
  }
  if (!accepts.empty() && acceptedValue(accepts, v)) {
    if (k->treatment == KeyTreatment::NoEffect)
      c.note(p + ": accepted; no effect in dsc: " + k->why);
    return true;
  }
  if (k->treatment == KeyTreatment::NoEffect && accepts.empty()) {
    checkKeyType(c, p, v, k->type);
    c.note(p + ": accepted; no effect in dsc: " + k->why);
    return true;
  }
  // Refused: name the value that asks for what dsc does not do.
  if (accepts == "{enabled:false}" && v.is_object())
    c.fail(p + ".enabled: " + c.shown(p + ".enabled", v["enabled"]) +
           " is not supported by dsc: " + k->why +
           " (the section is accepted with enabled false)");
  if (accepts == "{device:none}" && v.is_object() && v.contains("device"))
    c.fail(p + ".device: " + c.shown(p + ".device", v["device"]) +
           " is not supported by dsc: " + k->why +
           " (accepted: device \"none\")");
  std::string allowed;
  for (char ch : accepts)
    allowed += ch == '|' ? std::string(" or ") : std::string(1, ch);
  if (accepts.empty() && v.is_object())
    c.fail(p + ": not supported by dsc: " + k->why);
  c.fail(p + ": " + c.shown(p, v) + " is not supported by dsc: " + k->why +
         (allowed.empty() || allowed[0] == '{' ? ""
                                               : " (accepted: " + allowed + ")"));
}

/// A section every key of which the table describes (data_types).
void parseTableSection(const Ctx &c, const std::string &name,
                       const json &sec) {
  c.object(name, sec);
  for (auto it = sec.begin(); it != sec.end(); ++it)
    if (!handleTableKey(c, name, it.key(), it.value()))
      c.unknownKey(name, it.key(), deepSpeedKeysIn(name));
}

/// The keys of `sec` outside `implemented`: by the table, else unknown.
void checkSectionKeys(const Ctx &c, const std::string &name, const json &sec,
                      const std::vector<std::string> &implemented) {
  for (auto it = sec.begin(); it != sec.end(); ++it) {
    const std::string &k = it.key();
    if (std::find(implemented.begin(), implemented.end(), k) !=
        implemented.end())
      continue;
    if (!handleTableKey(c, name, k, it.value()))
      c.unknownKey(name, k, merged(implemented, deepSpeedKeysIn(name)));
  }
}

} // namespace config_reader

} // namespace dsc
