//===- Fit.cpp - What fits a device: `estimate --device-memory` -----------===//
//
// The candidates, cheapest first (what they cost: nothing, recomputation,
// then a different optimizer with less state):
//   the optimizer as configured, then (Adam/AdamW only) its 8-bit form
//   (bitsandbytes' AdamW8bit / Adam8bit, same params), then Adafactor with
//   the same lr and weight decay (relative_step, scale_parameter and
//   warmup_init off: the fine-tuning setting);
//   for each: the remat as configured, then dsc's budget policy at the
//   device budget (-dsc-remat recomputes only what the budget needs), then
//   per-layer checkpointing (activation_checkpointing); then the same three
//   with ZeRO-Offload of the optimizer (offload_optimizer cpu, at least
//   ZeRO stage 1): the host update and the copies cost more than
//   recomputing, and change nothing in the numbers. A config that offloads
//   the optimizer already (to host memory or NVMe) keeps its offload and
//   has no such extra candidates.
// Each candidate is the user's config with those keys edited, re-read by
// the config reader (so the printed ds_config is exactly what was planned)
// and planned for every micro-batch that divides the user's samples per
// rank and step (micro-batch x accumulation, which stays as configured, so
// the micro-batch changes the speed, not the numbers). The first candidate
// that fits at all wins, with its largest fitting micro-batch.
//
//===----------------------------------------------------------------------===//

#include "Fit.h"

#include "Compile.h"
#include "Memory.h"

#include "dsc/Support/Error.h"
#include "dsc/Support/Files.h"

#include "mlir/IR/MLIRContext.h"

#include <nlohmann/json.hpp>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <vector>

namespace dsc {

int64_t parseByteSize(const std::string &text, const std::string &option) {
  static const struct {
    const char *suffix;
    double factor;
  } units[] = {{"TiB", 1099511627776.0}, {"GiB", 1073741824.0},
               {"MiB", 1048576.0},       {"KiB", 1024.0},
               {"TB", 1e12},             {"GB", 1e9},
               {"MB", 1e6},              {"KB", 1e3},
               {"T", 1099511627776.0},   {"G", 1073741824.0},
               {"M", 1048576.0},         {"K", 1024.0},
               {"B", 1.0},               {"", 1.0}};
  auto fail = [&](const std::string &why) {
    return Error(option + " " + text + ": " + why +
                 "; expected a size such as 24GiB, 16GB, 512MiB or a byte "
                 "count");
  };
  // A decimal number (digits, at most one point), then the unit.
  size_t digits = 0, points = 0, i = 0;
  for (; i < text.size() && (std::isdigit((unsigned char)text[i]) ||
                             text[i] == '.');
       ++i)
    (text[i] == '.' ? points : digits) += 1;
  if (digits == 0 || points > 1)
    throw fail("not a number");
  const std::string unit = text.substr(i);
  for (const auto &u : units) {
    if (unit != u.suffix)
      continue;
    const double bytes = std::strtod(text.substr(0, i).c_str(), nullptr) *
                         u.factor;
    if (bytes >= 9.0e18)
      throw fail("too large");
    if (bytes < 1.0)
      throw fail("less than one byte");
    return int64_t(bytes);
  }
  throw fail("unknown unit '" + unit + "'");
}

namespace {

std::string mib(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", double(bytes) / 1048576.0);
  return text;
}

/// One candidate: a name for the table and the edit of the user's config.
struct Candidate {
  std::string optimizer; ///< "as configured", "AdamW8bit", "Adafactor"
  std::string remat;     ///< "as configured", "budget", "per-layer", each
                         ///< with "offload + " before it when offloaded
  nlohmann::json config;
};

/// The optimizer alternatives to the user's `optimizer` section.
std::vector<std::pair<std::string, nlohmann::json>>
optimizerAlternatives(const nlohmann::json &config) {
  std::vector<std::pair<std::string, nlohmann::json>> out = {
      {"as configured", config.value("optimizer", nlohmann::json())}};
  const nlohmann::json optimizer = config.value("optimizer", nlohmann::json());
  const std::string type =
      optimizer.is_object() && optimizer.contains("type") &&
              optimizer["type"].is_string()
          ? optimizer["type"].get<std::string>()
          : "";
  std::string lower;
  for (char ch : type)
    lower += char(std::tolower(static_cast<unsigned char>(ch)));
  if (lower != "adam" && lower != "adamw")
    return out;
  nlohmann::json eight = optimizer;
  eight["type"] = lower == "adam" ? "Adam8bit" : "AdamW8bit";
  // DeepSpeed's Adam takes adam_w_mode/torch_adam; bitsandbytes' does not.
  if (eight.contains("params") && eight["params"].is_object())
    for (const char *key : {"adam_w_mode", "torch_adam", "fused"})
      eight["params"].erase(key);
  out.push_back({eight["type"].get<std::string>(), eight});
  nlohmann::json factored = {{"type", "Adafactor"}};
  nlohmann::json params = {{"relative_step", false},
                           {"scale_parameter", false},
                           {"warmup_init", false}};
  if (optimizer.contains("params") && optimizer["params"].is_object()) {
    for (const char *key : {"lr", "weight_decay"})
      if (optimizer["params"].contains(key))
        params[key] = optimizer["params"][key];
  }
  if (!params.contains("lr"))
    params["lr"] = 1e-3; // dsc's Adam default, which the user's run had
  factored["params"] = params;
  out.push_back({"Adafactor", factored});
  return out;
}

/// Whether the user's config offloads the optimizer already (to host
/// memory or NVMe): then its own candidates are the offloaded ones.
bool offloadsOptimizer(const nlohmann::json &user) {
  const nlohmann::json *zero = user.contains("zero_optimization")
                                   ? &user["zero_optimization"]
                                   : nullptr;
  if (!zero || !zero->is_object())
    return false;
  if (zero->contains("cpu_offload") && (*zero)["cpu_offload"] == true)
    return true;
  if (!zero->contains("offload_optimizer") ||
      !(*zero)["offload_optimizer"].is_object())
    return false;
  const nlohmann::json &section = (*zero)["offload_optimizer"];
  return section.contains("device") && section["device"].is_string() &&
         section["device"] != "none";
}

std::vector<Candidate> candidates(const nlohmann::json &user,
                                  int64_t budget) {
  std::vector<Candidate> out;
  const bool offloaded = offloadsOptimizer(user);
  for (const auto &[name, optimizer] : optimizerAlternatives(user)) {
    nlohmann::json configured = user;
    if (!optimizer.is_null())
      configured["optimizer"] = optimizer;
    std::vector<std::pair<std::string, nlohmann::json>> bases = {
        {"", configured}};
    if (!offloaded) {
      nlohmann::json withOffload = configured;
      nlohmann::json &zero = withOffload["zero_optimization"];
      if (!zero.is_object())
        zero = nlohmann::json::object(); // absent, or a bare boolean
      if (!zero.contains("stage") || !zero["stage"].is_number_integer() ||
          zero["stage"].get<int64_t>() < 1)
        zero["stage"] = 1;
      zero["offload_optimizer"] = {{"device", "cpu"}};
      zero.erase("cpu_offload");
      bases.push_back({"offload + ", withOffload});
    }
    for (const auto &[prefix, base] : bases) {
      out.push_back({name, prefix + "as configured", base});
      nlohmann::json budgeted = base;
      budgeted["dsc"]["remat"] = {{"policy", "budget"},
                                  {"memory_budget_bytes", budget}};
      budgeted.erase("activation_checkpointing");
      out.push_back({name, prefix + "budget", budgeted});
      nlohmann::json perLayer = base;
      perLayer["activation_checkpointing"] = nlohmann::json::object();
      if (perLayer.contains("dsc") && perLayer["dsc"].is_object())
        perLayer["dsc"].erase("remat");
      out.push_back({name, prefix + "per-layer", perLayer});
    }
  }
  return out;
}

/// The planned peak of `config` (with micro-batch `micro` and
/// accumulation `accum`), or the reader's or compiler's refusal.
struct Planned {
  std::optional<int64_t> peak;
  std::string refusal;
};

Planned plan(const ModelConfig &model, nlohmann::json config, int64_t micro,
             int64_t accum, const TrainConfigInputs &inputs) {
  config["train_micro_batch_size_per_gpu"] = micro;
  config["gradient_accumulation_steps"] = accum;
  config.erase("train_batch_size");
  try {
    TrainConfig train = parseTrainConfigText(config.dump(), "candidate",
                                             inputs);
    validateConfigs(model, train);
    mlir::MLIRContext ctx;
    auto module = compileStep(ctx, model, train);
    rt::Program program = lowerStep(*module);
    return {planStep(program, /*apply=*/false).peakBytes, ""};
  } catch (const std::exception &e) {
    // -dsc-remat's budget policy refuses a budget it cannot meet: that
    // candidate is over budget, not inapplicable.
    if (std::string(e.what()).find("cannot be met") != std::string::npos)
      return {std::numeric_limits<int64_t>::max(), ""};
    return {std::nullopt, e.what()};
  }
}

} // namespace

bool fitDeviceMemory(const ModelConfig &model, const std::string &configPath,
                     const TrainConfigInputs &inputs, int64_t budget,
                     std::ostream &out) {
  const nlohmann::json user = parseStrictJson(
      readRegularFile(configPath, 1 << 24, "a training config"), 64);
  TrainConfigInputs quiet = inputs;
  const TrainConfig given = parseTrainConfigText(user.dump(), configPath,
                                                 quiet);
  // Samples per rank and step: kept, so the training is the same.
  const int64_t perRank = given.microBatch * given.gradAccum;
  std::vector<int64_t> micros;
  for (int64_t m = 1; m <= perRank; ++m)
    if (perRank % m == 0)
      micros.push_back(m);

  out << "device budget " << mib(budget) << "; " << perRank
      << " samples per rank and step (micro-batch x accumulation) kept\n";
  out << "  optimizer        remat                    largest micro-batch   "
         "planned peak\n";
  std::optional<size_t> pick;
  std::vector<std::pair<int64_t, int64_t>> best; // micro, peak per candidate
  const std::vector<Candidate> all = candidates(user, budget);
  for (size_t i = 0; i < all.size(); ++i) {
    const Candidate &c = all[i];
    int64_t fitMicro = 0, fitPeak = 0;
    std::string refusal;
    // Peaks grow with the micro-batch: stop at the first that does not fit.
    for (int64_t m : micros) {
      Planned p = plan(model, c.config, m, perRank / m, inputs);
      if (!p.peak) {
        refusal = p.refusal;
        break;
      }
      if (*p.peak > budget)
        break;
      fitMicro = m;
      fitPeak = *p.peak;
    }
    best.push_back({fitMicro, fitPeak});
    const std::string status =
        fitMicro ? mib(fitPeak)
                 : refusal.empty() ? "over budget at 1" : "not applicable";
    char line[160];
    std::snprintf(line, sizeof line, "  %-16s %-24s %-21s %s\n",
                  c.optimizer.c_str(), c.remat.c_str(),
                  fitMicro ? std::to_string(fitMicro).c_str() : "none",
                  status.c_str());
    out << line;
    if (!refusal.empty() && !fitMicro)
      out << "    (" << refusal << ")\n";
    if (fitMicro > 0) {
      pick = i; // the cheapest that fits: stop searching
      break;
    }
  }
  if (!pick) {
    out << "nothing fits " << mib(budget)
        << ": not even micro-batch 1 with offload, 8-bit or factored "
           "optimizer state and per-layer checkpointing\n";
    return false;
  }
  nlohmann::json result = all[*pick].config;
  const int64_t micro = best[*pick].first;
  result["train_micro_batch_size_per_gpu"] = micro;
  result["gradient_accumulation_steps"] = perRank / micro;
  result.erase("train_batch_size");
  out << "fits: " << all[*pick].optimizer << " optimizer, "
      << all[*pick].remat << ", micro-batch " << micro << " ("
      << mib(best[*pick].second) << " planned); ds_config:\n"
      << result.dump(2) << "\n";
  return true;
}

} // namespace dsc
