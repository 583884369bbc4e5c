//===- ObservabilityConfig.cpp - flops_profiler, comms_logger, monitors ---===//
//
// The ds_config.json sections that observe a run without changing it:
// DeepSpeed's flops_profiler, comms_logger, csv_monitor and tensorboard.
//
//===----------------------------------------------------------------------===//

#include "ConfigReader.h"
#include "ConfigSections.h"

#include <algorithm>
#include <limits>
#include <map>
#include <string>
#include <vector>

namespace dsc {
namespace config_reader {

/// flops_profiler: DeepSpeed reads its keys only with the section enabled
/// and ignores keys it does not know (noted; a misspelling is refused).
void parseFlopsProfiler(const Ctx &c, const json &sec, TrainConfig &t) {
  const std::string name = "flops_profiler";
  c.object(name, sec);
  const std::vector<std::string> known = {
      "enabled",     "recompute_fwd_factor", "profile_step", "module_depth",
      "top_modules", "detailed",             "output_file"};
  std::vector<std::string> ignored;
  for (auto it = sec.begin(); it != sec.end(); ++it)
    if (std::find(known.begin(), known.end(), it.key()) == known.end())
      unknownOrIgnored(c, name, it.key(), known, /*ignores=*/true, ignored);
  noteIgnored(c, name, ignored);
  TrainConfig::FlopsProfiler &f = t.flopsProfiler;
  auto key = [&](const char *k) -> const json * {
    auto it = sec.find(k);
    return it == sec.end() || it->is_null() ? nullptr : &*it;
  };
  if (const json *v = key("enabled"))
    f.enabled = c.boolean(name + ".enabled", *v);
  if (const json *v = key("recompute_fwd_factor"))
    f.recomputeFwdFactor =
        c.nonNegativeNumber(name + ".recompute_fwd_factor", *v);
  if (const json *v = key("profile_step"))
    f.profileStep = c.nonNegative(name + ".profile_step", *v);
  if (const json *v = key("module_depth"))
    f.moduleDepth = c.integer(name + ".module_depth", *v, -1, kMaxSize,
                              "-1 (every level) or an integer >= 0");
  if (const json *v = key("top_modules"))
    f.topModules = c.positive(name + ".top_modules", *v);
  if (const json *v = key("detailed"))
    f.detailed = c.boolean(name + ".detailed", *v);
  if (const json *v = key("output_file"))
    f.outputFile = c.string(name + ".output_file", *v, "a file name or null");
}

/// comms_logger (DeepSpeed's pydantic section: an unknown key is refused).
/// prof_ops takes DeepSpeed's operation names; a name of an operation dsc
/// never runs would log nothing, so it is refused.
void parseCommsLogger(const Ctx &c, const json &sec, TrainConfig &t) {
  const std::string name = "comms_logger";
  c.object(name, sec);
  c.checkKeys(name, sec, {"enabled", "prof_all", "prof_ops", "verbose", "debug"});
  TrainConfig::CommsLogger &l = t.commsLogger;
  auto flag = [&](const char *k, bool &out) {
    if (auto it = sec.find(k); it != sec.end() && !it->is_null())
      out = c.boolean(name + "." + k, *it);
  };
  flag("enabled", l.enabled);
  flag("verbose", l.verbose);
  flag("debug", l.debug);
  flag("prof_all", l.profAll);
  auto it = sec.find("prof_ops");
  if (it == sec.end() || it->is_null())
    return;
  if (!it->is_array())
    c.fail(name + ".prof_ops must be a list of operation names, got " +
           it->dump());
  // DeepSpeed's names of the operations dsc runs, and their variants.
  static const std::map<std::string, std::string> aliases = {
      {"all_reduce", "all_reduce"},
      {"inference_all_reduce", "all_reduce"},
      {"reduce_scatter", "reduce_scatter"},
      {"reduce_scatter_tensor", "reduce_scatter"},
      {"reduce_scatter_base", "reduce_scatter"},
      {"all_gather", "all_gather"},
      {"all_gather_into_tensor", "all_gather"},
      {"all_gather_base", "all_gather"},
      {"all_to_all", "all_to_all"},
      {"all_to_all_single", "all_to_all"},
      {"broadcast", "broadcast"},
      {"send", "send"},
      {"isend", "send"},
      {"recv", "recv"},
      {"irecv", "recv"}};
  for (const json &op : *it) {
    const std::string v = op.is_string() ? op.get<std::string>() : op.dump();
    auto known = aliases.find(v);
    if (known == aliases.end())
      c.fail(name + ".prof_ops: '" + v + "' is not an operation dsc runs "
             "(all_reduce, reduce_scatter(_tensor), all_gather(_into_tensor), "
             "all_to_all(_single), broadcast, send/isend, recv/irecv)");
    l.profOps.push_back(known->second);
  }
}

/// csv_monitor / tensorboard (DeepSpeed's pydantic sections: an unknown
/// key is refused).
void parseMonitor(const Ctx &c, const std::string &name, const json &sec,
                  TrainConfig::Monitor &m) {
  c.object(name, sec);
  c.checkKeys(name, sec, {"enabled", "output_path", "job_name"});
  if (auto it = sec.find("enabled"); it != sec.end())
    m.enabled = c.boolean(name + ".enabled", *it);
  if (auto it = sec.find("output_path"); it != sec.end() && !it->is_null())
    m.outputPath = c.string(name + ".output_path", *it, "a directory");
  if (auto it = sec.find("job_name"); it != sec.end() && !it->is_null()) {
    m.jobName = c.string(name + ".job_name", *it, "a name");
    if (m.jobName.empty())
      c.bad(name + ".job_name", *it, "a non-empty name");
  }
}

} // namespace config_reader
} // namespace dsc
