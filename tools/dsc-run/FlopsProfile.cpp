//===- FlopsProfile.cpp - dsc-run train's flops_profiler ------------------===//

#include "FlopsProfile.h"

#include "dsc/Dialect/CostModel.h"
#include "dsc/Dialect/DscOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>
#include <vector>

using namespace dsc;

namespace {

constexpr const char *kPrefix = "dsc.flops_profile";

/// "name=count;name=count" (names have no '=' or ';').
std::string encode(const std::vector<std::pair<std::string, int64_t>> &parts) {
  std::string s;
  for (const auto &[name, count] : parts)
    s += (s.empty() ? "" : ";") + name + "=" + std::to_string(count);
  return s;
}

std::vector<std::pair<std::string, int64_t>> decode(const std::string &text) {
  std::vector<std::pair<std::string, int64_t>> parts;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ';')) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos)
      throw Error("flops profile: malformed entry '" + item + "'");
    parts.emplace_back(item.substr(0, eq), std::stoll(item.substr(eq + 1)));
  }
  return parts;
}

/// Largest first, then by name (a stable order for equal costs).
std::vector<std::pair<std::string, int64_t>>
sorted(const std::map<std::string, int64_t> &costs) {
  std::vector<std::pair<std::string, int64_t>> v(costs.begin(), costs.end());
  std::stable_sort(v.begin(), v.end(), [](const auto &a, const auto &b) {
    return a.second > b.second;
  });
  return v;
}

std::string flopsText(double flops) {
  char text[32];
  if (flops >= 1e12)
    std::snprintf(text, sizeof text, "%.2f TFLOP", flops / 1e12);
  else if (flops >= 1e9)
    std::snprintf(text, sizeof text, "%.2f GFLOP", flops / 1e9);
  else
    std::snprintf(text, sizeof text, "%.2f MFLOP", flops / 1e6);
  return text;
}

} // namespace

void dsc::annotateFlopsProfile(mlir::ModuleOp module, const TrainConfig &train) {
  const TrainConfig::FlopsProfiler &f = train.flopsProfiler;
  if (!f.enabled)
    return;
  auto forward = module.lookupSymbol<mlir::func::FuncOp>("forward");
  if (!forward)
    throw Error("flops_profiler: the imported model has no @forward");
  mlir::DialectRegistry costs;
  mlir::dsc::registerCostModel(costs);
  module.getContext()->appendDialectRegistry(costs);
  mlir::Builder b(module.getContext());
  auto set = [&](const std::string &key, mlir::Attribute value) {
    module->setAttr(std::string(kPrefix) + (key.empty() ? "" : "." + key),
                    value);
  };
  set("", b.getI64IntegerAttr(1));
  set("step", b.getI64IntegerAttr(f.profileStep));
  set("top", b.getI64IntegerAttr(f.topModules));
  set("depth", b.getI64IntegerAttr(f.moduleDepth));
  set("detailed", b.getI64IntegerAttr(f.detailed ? 1 : 0));
  set("recompute_factor", b.getF64FloatAttr(f.recomputeFwdFactor));
  set("output", b.getStringAttr(f.outputFile));
  int64_t params = 0;
  for (unsigned i = 0; i < forward.getNumArguments(); ++i)
    if (forward.getArgAttr(i, mlir::dsc::kParamAttrName))
      params += mlir::cast<mlir::RankedTensorType>(
                    forward.getArgument(i).getType())
                    .getNumElements();
  // Ops outside the layers belong to the embedding until the first
  // layer's op, to the head after it (as dsc-run plan attributes them).
  std::map<std::string, int64_t> byOp, byModule;
  int64_t total = 0;
  bool seenLayer = false;
  forward.walk([&](mlir::Operation *op) {
    auto cost = mlir::dyn_cast<mlir::dsc::CostOpInterface>(op);
    if (!cost)
      return;
    const int64_t flops = cost.getFlops();
    std::string unit = seenLayer ? "head" : "embedding";
    if (auto layer =
            op->getAttrOfType<mlir::IntegerAttr>(mlir::dsc::kLayerAttrName)) {
      seenLayer = true;
      unit = "layer " + std::to_string(layer.getInt());
    }
    if (flops <= 0)
      return;
    byOp[op->getName().stripDialect().str()] += flops;
    byModule[unit] += flops;
    total += flops;
  });
  set("params", b.getI64IntegerAttr(params));
  set("forward", b.getI64IntegerAttr(total));
  set("ops", b.getStringAttr(encode(sorted(byOp))));
  set("modules", b.getStringAttr(encode(sorted(byModule))));
}

void dsc::annotateRecomputeFlops(mlir::ModuleOp module) {
  if (!module->hasAttr(kPrefix))
    return;
  int64_t flops = 0;
  if (auto micro = module.lookupSymbol<mlir::func::FuncOp>("micro_step"))
    if (auto attr = micro->getAttrOfType<mlir::IntegerAttr>(
            "dsc.remat.recompute_flops"))
      flops = attr.getInt();
  module->setAttr(std::string(kPrefix) + ".recompute",
                  mlir::Builder(module.getContext()).getI64IntegerAttr(flops));
}

std::optional<FlopsProfile> FlopsProfile::of(const rt::Program &program) {
  if (program.metaInt("flops_profile", 0) == 0)
    return std::nullopt;
  FlopsProfile p;
  p.profileStep = program.metaInt("flops_profile.step", 1, 0);
  p.top = program.metaInt("flops_profile.top", 1, 1);
  p.depth = program.metaInt("flops_profile.depth", -1, -1);
  p.detailed = program.metaInt("flops_profile.detailed", 1) != 0;
  p.output = program.metaString("flops_profile.output", "");
  auto factor = program.meta.find("flops_profile.recompute_factor");
  if (factor != program.meta.end())
    if (const double *d = std::get_if<double>(&factor->second))
      p.recomputeFactor = *d;
  p.mesh = program.mesh();
  p.microBatch = program.metaInt("micro_batch");
  p.seqLen = program.metaInt("seq_len");
  p.accumulation = program.metaInt("grad_accum", 1);
  p.forward = double(program.metaInt("flops_profile.forward", 0));
  p.params = double(program.metaInt("flops_profile.params", 0));
  p.recompute = double(program.metaInt("flops_profile.recompute", 0));
  p.byOp = program.metaString("flops_profile.ops", "");
  p.byModule = program.metaString("flops_profile.modules", "");
  return p;
}

std::string FlopsProfile::report(const rt::StepStats &s) const {
  const int64_t B = microBatch, T = seqLen, A = accumulation;
  const double perRank = forward / double(mesh.tensor * mesh.pipeline);
  const double recomputed =
      recomputeFactor > 0 ? recomputeFactor * perRank : recompute;
  const double stepFlops = double(A) * (3.0 * perRank + recomputed);
  const double seconds = s.microSeconds + s.optimizerSeconds;
  std::ostringstream os;
  char line[256];
  os << "dsc FLOPs profiler (flops_profiler): step " << s.step << "\n";
  std::snprintf(line, sizeof line,
                "  ranks %lld: data %lld x tensor %lld x pipeline %lld; "
                "micro-batch %lld x %lld tokens, accumulation %lld\n",
                (long long)mesh.size(), (long long)mesh.data,
                (long long)mesh.tensor, (long long)mesh.pipeline,
                (long long)B, (long long)T, (long long)A);
  os << line;
  std::snprintf(line, sizeof line, "  parameters: %.2f M\n", params / 1e6);
  os << line;
  os << "  forward FLOPs per micro-batch: " << flopsText(forward)
     << " (the model), " << flopsText(perRank) << " per rank\n";
  os << "  FLOPs per step per rank: " << flopsText(stepFlops)
     << " (backward counted as 2 x forward, as DeepSpeed counts it; "
     << (recomputeFactor > 0 ? "recompute_fwd_factor: "
                             : "recomputation (-dsc-remat): ")
     << flopsText(recomputed) << " per micro-batch)\n";
  std::snprintf(line, sizeof line,
                "  step time: %.1f ms (micro-steps %.1f ms, optimizer %.1f "
                "ms)\n",
                1e3 * seconds, 1e3 * s.microSeconds, 1e3 * s.optimizerSeconds);
  os << line;
  const double rate = seconds > 0 ? stepFlops / seconds : 0.0;
  std::snprintf(line, sizeof line,
                "  FLOP/s per rank: %.2f %s; samples/s: %.1f\n",
                rate >= 1e12 ? rate / 1e12 : rate / 1e9,
                rate >= 1e12 ? "TFLOP/s" : "GFLOP/s",
                T > 0 ? s.tokensPerSecond / double(T) : 0.0);
  os << line;
  if (!detailed)
    return os.str();
  auto list = [&](const char *what, const std::string &encoded) {
    const auto parts = decode(encoded);
    os << "  forward FLOPs by " << what << " (top " << top << " of "
       << parts.size() << "):";
    for (size_t i = 0; i < parts.size() && int64_t(i) < top; ++i) {
      std::snprintf(line, sizeof line, "%s %s %s (%.1f%%)", i ? "," : "",
                    parts[i].first.c_str(), flopsText(double(parts[i].second)).c_str(),
                    forward > 0 ? 100.0 * double(parts[i].second) / forward : 0.0);
      os << line;
    }
    os << "\n";
  };
  list("op", byOp);
  if (depth != 0)
    list("module", byModule);
  return os.str();
}
