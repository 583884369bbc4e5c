//===- Adapter.cpp - dsc-run's LoRA options -------------------------------===//

#include "Adapter.h"

#include "dsc/Support/OutputFile.h"
#include "dsc/Program/Program.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <sys/stat.h>
#include <unistd.h>

using namespace dsc;

std::string dsc::adapterConfigPath(const std::string &dir) {
  // An empty --adapter would name the root's files.
  if (dir.empty())
    throw dsc::Error("--adapter: empty path");
  return dir + "/adapter_config.json";
}

std::string dsc::adapterWeightsPath(const std::string &dir) {
  if (dir.empty())
    throw dsc::Error("--adapter: empty path");
  return dir + "/adapter_model.safetensors";
}

LoraConfig dsc::readAdapterConfig(const std::string &dir, TrainConfig &train) {
  LoraConfig adapter = parseAdapterConfig(adapterConfigPath(dir));
  if (!train.lora.enabled) {
    train.lora = adapter;
    // The dropout is a training choice; PEFT saves the one it trained with.
  }
  return adapter;
}

bool dsc::stepHasLora(mlir::ModuleOp step) {
  return step->hasAttr("dsc.lora_rank");
}

void dsc::checkAdapterMatchesStep(const LoraConfig &adapter,
                                  const std::string &dir,
                                  mlir::ModuleOp step) {
  const std::string file = adapterConfigPath(dir);
  if (!stepHasLora(step))
    throw dsc::Error("--adapter " + dir + ": the step has no LoRA adapters "
                    "(it was compiled without a \"lora\" section)");
  auto attr = [&](const char *key) { return step->getAttr(key); };
  auto differs = [&](const std::string &key, const std::string &inFile,
                     const std::string &inStep) {
    throw dsc::Error(file + ": " + key + " is " + inFile +
                    " but the training step was built with " + inStep +
                    " (the training config's \"lora\" section)");
  };
  auto intOf = [&](const char *key) {
    auto a = llvm::dyn_cast_or_null<mlir::IntegerAttr>(attr(key));
    return a ? a.getInt() : int64_t(-1);
  };
  auto floatOf = [&](const char *key) {
    auto a = llvm::dyn_cast_or_null<mlir::FloatAttr>(attr(key));
    return a ? a.getValueAsDouble() : std::nan("");
  };
  auto stringOf = [&](const char *key) {
    auto a = llvm::dyn_cast_or_null<mlir::StringAttr>(attr(key));
    return a ? a.str() : std::string();
  };
  if (intOf("dsc.lora_rank") != adapter.rank)
    differs("r", std::to_string(adapter.rank),
            std::to_string(intOf("dsc.lora_rank")));
  if (floatOf("dsc.lora_alpha") != adapter.alpha)
    differs("lora_alpha", llvm::formatv("{0}", adapter.alpha).str(),
            llvm::formatv("{0}", floatOf("dsc.lora_alpha")).str());
  if (stringOf("dsc.lora_bias") != adapter.bias)
    differs("bias", "\"" + adapter.bias + "\"",
            "\"" + stringOf("dsc.lora_bias") + "\"");
  if ((intOf("dsc.lora_rslora") == 1) != adapter.useRslora)
    differs("use_rslora", adapter.useRslora ? "true" : "false",
            adapter.useRslora ? "false" : "true");
  // A file without target_modules means PEFT's default for the model, which
  // is what the step was built with when the training config had none.
  if (adapter.targetModules.empty() && adapter.targetRegex.empty())
    return;
  if (!adapter.targetRegex.empty()) {
    const std::string have = stringOf("dsc.lora_target_regex");
    if (adapter.targetRegex != have)
      differs("target_modules", "\"" + adapter.targetRegex + "\"",
              "\"" + have + "\"");
    return;
  }
  // A set to PEFT (it saves it in any order).
  std::vector<std::string> want = adapter.targetModules, have;
  const std::string list = stringOf("dsc.lora_target_modules");
  for (llvm::StringRef entry : llvm::split(list, ','))
    have.push_back(entry.str());
  std::sort(want.begin(), want.end());
  std::sort(have.begin(), have.end());
  if (want != have)
    differs("target_modules", "[" + llvm::join(want, ", ") + "]",
            "[" + llvm::join(have, ", ") + "]");
}

void dsc::checkAdapterOutput(const std::string &dir,
                             const std::string &option) {
  if (dir.empty())
    throw dsc::Error(option + ": empty output path");
  struct stat st;
  if (stat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode))
      throw dsc::Error(option + ": " + dir + " is not a directory (a LoRA "
                      "model saves PEFT's adapter directory)");
  } else {
    // saveAdapter creates it; its parent must take the new directory.
    std::string parent = dir;
    while (parent.size() > 1 && parent.back() == '/')
      parent.pop_back();
    size_t slash = parent.rfind('/');
    parent = slash == std::string::npos ? "."
             : slash == 0                ? "/"
                                         : parent.substr(0, slash);
    if (access(parent.c_str(), W_OK | X_OK) != 0)
      throw dsc::Error(option + ": cannot create directory " + dir + " (" +
                      parent + " is missing or not writable)");
    return;
  }
  dsc::checkOutputFile(adapterWeightsPath(dir), option);
  dsc::checkOutputFile(adapterConfigPath(dir), option);
}
