//===- ConfigSections.h - The ds_config.json section readers ----*- C++ -*-===//
//
// Internal to lib/Frontend: each section of the training config is read by
// its own file; DeepSpeedConfig.cpp's parseTrainConfigText calls them.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_LIB_FRONTEND_CONFIGSECTIONS_H
#define DSC_LIB_FRONTEND_CONFIGSECTIONS_H

#include "ConfigReader.h"

namespace dsc {
namespace config_reader {

// DeepSpeedKeyChecks.cpp: keys judged by the DeepSpeed key table.
/// The table's keys directly inside the section `prefix` ("": top level).
std::vector<std::string> deepSpeedKeysIn(const std::string &prefix);
/// `a` and then the names of `b` that `a` lacks.
std::vector<std::string> merged(std::vector<std::string> a,
                                const std::vector<std::string> &b);
/// Handles `key` of the section `prefix` when the table says it has no
/// effect or is not supported; false when the table implements it (the
/// caller's to read) or does not know it.
bool handleTableKey(const Ctx &c, const std::string &prefix,
                    const std::string &key, const json &v);
/// `key` of `prefix` is in neither the table nor `allowed`: unknown
/// where DeepSpeed refuses such keys (`ignores` false); where it ignores
/// them, added to `ignored` for noteIgnored, unless it is within edit
/// distance 2 of an allowed key (then refused as a misspelling).
void unknownOrIgnored(const Ctx &c, const std::string &prefix,
                      const std::string &key,
                      const std::vector<std::string> &allowed, bool ignores,
                      std::vector<std::string> &ignored);
/// One note naming the keys of `prefix` that are ignored, if any.
void noteIgnored(const Ctx &c, const std::string &prefix,
                 const std::vector<std::string> &ignored);
/// A section every key of which the table describes (data_types).
void parseTableSection(const Ctx &c, const std::string &name,
                       const json &sec);
/// The keys of `sec` outside `implemented`: by the table, else unknown.
void checkSectionKeys(const Ctx &c, const std::string &name, const json &sec,
                      const std::vector<std::string> &implemented);

// DeepSpeedOptimizer.cpp
void parseOptimizer(const Ctx &c, const json &sec, OptimizerConfig &o);
void parseScheduler(const Ctx &c, const json &sec, SchedulerConfig &s);

// SparseAttentionConfig.cpp
void parseSparseAttention(const Ctx &c, const json &sec,
                          SparseAttentionConfig &s);

// DscSection.cpp
void parseTransformerKernel(const Ctx &c, const json &sec, TrainConfig &t);
/// Resolves dsc.remat.policy (`policy`, empty if not given) against the
/// DeepSpeed switches already in `r`, once the whole file is read.
void resolveRemat(const Ctx &c, const std::string &policy, RematConfig &r);
void parseDsc(const Ctx &c, const json &sec, TrainConfig &t,
              std::string &rematPolicy);

// LoraConfig.cpp: the `lora` section (prefix "lora") or a PEFT
// adapter_config.json (prefix "").
void parseLora(const Ctx &c, const std::string &prefix, const json &sec,
               LoraConfig &l);

// ObservabilityConfig.cpp
void parseFlopsProfiler(const Ctx &c, const json &sec, TrainConfig &t);
void parseCommsLogger(const Ctx &c, const json &sec, TrainConfig &t);
/// csv_monitor or tensorboard (`name`).
void parseMonitor(const Ctx &c, const std::string &name, const json &sec,
                  TrainConfig::Monitor &m);

// OffloadConfig.cpp
/// The `aio` section (the swap file's request queues).
void parseAio(const Ctx &c, const json &sec, AioOptions &aio);
/// zero_optimization.offload_optimizer (the section, or null).
void parseOffloadOptimizer(const Ctx &c, const json &sec, TrainConfig &t);
/// zero_optimization.cpu_offload, DeepSpeed's deprecated switch for it.
void parseCpuOffload(const Ctx &c, const json &v, TrainConfig &t);
/// zero_optimization.offload_param at stage 3 (the section, or null).
void parseOffloadParam(const Ctx &c, const json &sec, TrainConfig &t);
/// zero_optimization.cpu_offload_param / cpu_offload_params (`key`),
/// DeepSpeed's deprecated switches for it.
void parseCpuOffloadParam(const Ctx &c, const std::string &key,
                          const json &v, TrainConfig &t);
/// Refuses offload without a ZeRO stage and parameter offload without
/// optimizer offload, once the whole file is read.
void checkOffloadCombination(const Ctx &c, const TrainConfig &t);

// AutoValues.cpp
/// Resolves "auto" values as the Hugging Face Trainer's DeepSpeed
/// integration does; each resolution becomes a note of `c`.
void resolveAuto(json &j, const Ctx &c, const TrainConfigInputs &in);
/// The resolved config (TrainConfig::resolvedJson).
std::string resolvedText(json j, const Ctx &c, const TrainConfig &t);

} // namespace config_reader
} // namespace dsc

#endif // DSC_LIB_FRONTEND_CONFIGSECTIONS_H
