//===- ConfigFuzzer.cpp - config.json and ds_config.json text -------------===//
//
// The input is parsed as a model config and as a training config
// (parseModelConfigText, parseTrainConfigText); whichever is accepted is
// cross-checked (validateConfigs) against the other file of the GPT-2 tiny
// example. Accepted: ConfigError. An accepted model has positive sizes.
//
//===----------------------------------------------------------------------===//

#include "FuzzCommon.h"

#include "dsc/Frontend/Config.h"

using namespace dsc;

namespace {
const char *const kModel = R"({"model_type": "gpt2", "vocab_size": 256,
  "n_positions": 64, "n_ctx": 64, "n_embd": 64, "n_layer": 2, "n_head": 4})";
const char *const kTrain = R"({"train_micro_batch_size_per_gpu": 8,
  "gradient_accumulation_steps": 1, "optimizer": {"type": "AdamW",
  "params": {"lr": 1e-3}}, "dsc": {"seed": 42, "seq_len": 64}})";

template <typename F> bool accepted(F &&parse) {
  try {
    parse();
    return true;
  } catch (const ConfigError &) {
    return false;
  } catch (...) {
    fuzz::unexpectedException();
  }
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string text(fuzz::bytesOf(data, size));
  static const ModelConfig defaultModel =
      parseModelConfigText(kModel, "model.json");
  static const TrainConfig defaultTrain =
      parseTrainConfigText(kTrain, "ds_config.json");

  ModelConfig model;
  if (accepted([&] { model = parseModelConfigText(text, "fuzz.json"); })) {
    fuzz::require(model.vocabSize > 0 && model.hidden > 0 &&
                      model.numLayers > 0 && model.numHeads > 0 &&
                      model.maxPositions > 0 && model.intermediate > 0 &&
                      model.hidden % model.numHeads == 0,
                  "accepted model config with a non-positive size");
    accepted([&] { validateConfigs(model, defaultTrain); });
  }
  TrainConfig train;
  if (accepted([&] { train = parseTrainConfigText(text, "fuzz.json"); }))
    accepted([&] { validateConfigs(defaultModel, train); });
  return 0;
}
