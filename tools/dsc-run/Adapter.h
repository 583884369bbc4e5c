//===- Adapter.h - dsc-run's LoRA options ----------------------*- C++ -*-===//
//
// `--adapter DIR` reads a PEFT adapter directory (adapter_config.json beside
// adapter_model.safetensors): its settings become the run's LoRA
// configuration when the training config has no `lora` section, and must
// agree with the compiled step's (dsc.lora_* module attributes) in any case.
// `--save DIR` writes such a directory when the step has adapters.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_TOOLS_DSCRUN_ADAPTER_H
#define DSC_TOOLS_DSCRUN_ADAPTER_H

#include "dsc/Frontend/Config.h"

#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace dsc {

/// DIR/adapter_config.json and DIR/adapter_model.safetensors.
std::string adapterConfigPath(const std::string &dir);
std::string adapterWeightsPath(const std::string &dir);

/// Reads DIR/adapter_config.json into `train.lora` unless the training
/// config has a `lora` section already (then checkAdapterMatchesStep
/// compares the two once the step is built).
LoraConfig readAdapterConfig(const std::string &dir, TrainConfig &train);

/// Throws naming the key when the adapter's settings differ from those the
/// step was compiled with (or the step has no LoRA).
void checkAdapterMatchesStep(const LoraConfig &adapter, const std::string &dir,
                             mlir::ModuleOp step);

/// Whether the step was built with -dsc-lora.
bool stepHasLora(mlir::ModuleOp step);

/// `--save DIR` for a LoRA step: DIR is a directory or can be made one,
/// and the two files in it can be written.
void checkAdapterOutput(const std::string &dir, const std::string &option);

} // namespace dsc

#endif // DSC_TOOLS_DSCRUN_ADAPTER_H
