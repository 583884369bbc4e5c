//===- ConfigTest.cpp - Tests for the config.json / ds_config.json parser -===//

#include "dsc/Frontend/Config.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <string>

using namespace dsc;

namespace {

/// The message of the ConfigError `fn` throws; fails the test otherwise.
template <typename Fn> std::string errorOf(Fn &&fn) {
  try {
    fn();
  } catch (const ConfigError &e) {
    std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "multi-line: " << msg;
    return msg;
  } catch (const std::exception &e) {
    ADD_FAILURE() << "threw a non-ConfigError: " << e.what();
    return "";
  }
  ADD_FAILURE() << "no ConfigError thrown";
  return "";
}

std::string modelError(const std::string &text) {
  return errorOf([&] { parseModelConfigText(text, "m.json"); });
}
std::string trainError(const std::string &text, int64_t world = 1) {
  return errorOf([&] { parseTrainConfigText(text, "ds.json", world); });
}
TrainConfig train(const std::string &text, int64_t world = 1) {
  return parseTrainConfigText(text, "ds.json", world);
}
/// A valid minimal ds_config with `extra` members appended.
std::string ds(const std::string &extra) {
  return R"({"train_micro_batch_size_per_gpu": 2)" +
         (extra.empty() ? std::string() : ", " + extra) + "}";
}

std::string examplesDir() {
#ifdef DSC_EXAMPLES_DIR
  return DSC_EXAMPLES_DIR;
#else
  std::string f = __FILE__; // <root>/unittests/Frontend/ConfigTest.cpp
  for (int i = 0; i < 3; ++i)
    f = f.substr(0, f.find_last_of('/'));
  return f + "/examples";
#endif
}

std::string writeTemp(const std::string &name, const std::string &text) {
  std::string p = ::testing::TempDir() + "/" + name;
  std::ofstream(p) << text;
  return p;
}

#define EXPECT_HAS(msg, part)                                                  \
  EXPECT_NE((msg).find(part), std::string::npos)                               \
      << "message: " << (msg) << "\nexpected to contain: " << (part)

//===----------------------------------------------------------------------===//
// Model config
//===----------------------------------------------------------------------===//

TEST(ModelConfig, Gpt2Defaults) {
  ModelConfig m = parseModelConfigText(R"({"model_type": "gpt2"})", "m");
  EXPECT_EQ(m.type, ModelType::GPT2);
  EXPECT_EQ(m.vocabSize, 50257);
  EXPECT_EQ(m.maxPositions, 1024);
  EXPECT_EQ(m.hidden, 768);
  EXPECT_EQ(m.numLayers, 12);
  EXPECT_EQ(m.numHeads, 12);
  EXPECT_EQ(m.intermediate, 4 * 768);
  EXPECT_DOUBLE_EQ(m.layerNormEps, 1e-5);
  EXPECT_DOUBLE_EQ(m.initializerRange, 0.02);
  EXPECT_DOUBLE_EQ(m.embdDropout, 0.1);
  EXPECT_DOUBLE_EQ(m.residDropout, 0.1);
  EXPECT_DOUBLE_EQ(m.attnDropout, 0.1);
  EXPECT_EQ(m.gelu, GeluApprox::Tanh);
}

TEST(ModelConfig, BertDefaults) {
  ModelConfig m = parseModelConfigText(R"({"model_type": "bert"})", "m");
  EXPECT_EQ(m.type, ModelType::BERT);
  EXPECT_EQ(m.vocabSize, 30522);
  EXPECT_EQ(m.hidden, 768);
  EXPECT_EQ(m.numLayers, 12);
  EXPECT_EQ(m.numHeads, 12);
  EXPECT_EQ(m.intermediate, 3072);
  EXPECT_EQ(m.maxPositions, 512);
  EXPECT_EQ(m.typeVocabSize, 2);
  EXPECT_DOUBLE_EQ(m.layerNormEps, 1e-12);
  EXPECT_DOUBLE_EQ(m.embdDropout, 0.1);
  EXPECT_DOUBLE_EQ(m.attnDropout, 0.1);
  EXPECT_EQ(m.gelu, GeluApprox::Erf);
}

TEST(ModelConfig, Gpt2Normalisation) {
  ModelConfig m = parseModelConfigText(R"({
    "model_type": "gpt2", "vocab_size": 256, "n_positions": 64, "n_ctx": 64,
    "n_embd": 64, "n_layer": 2, "n_head": 4, "n_inner": 100,
    "activation_function": "gelu", "resid_pdrop": 0.0, "embd_pdrop": 0.25,
    "attn_pdrop": 0, "layer_norm_epsilon": 1e-6, "initializer_range": 0.01,
    "tie_word_embeddings": true})",
                                       "m");
  EXPECT_EQ(m.vocabSize, 256);
  EXPECT_EQ(m.maxPositions, 64);
  EXPECT_EQ(m.hidden, 64);
  EXPECT_EQ(m.numLayers, 2);
  EXPECT_EQ(m.numHeads, 4);
  EXPECT_EQ(m.intermediate, 100);
  EXPECT_EQ(m.gelu, GeluApprox::Erf);
  EXPECT_DOUBLE_EQ(m.residDropout, 0.0);
  EXPECT_DOUBLE_EQ(m.embdDropout, 0.25);
  EXPECT_DOUBLE_EQ(m.attnDropout, 0.0);
  EXPECT_DOUBLE_EQ(m.layerNormEps, 1e-6);
  EXPECT_DOUBLE_EQ(m.initializerRange, 0.01);
  // n_inner null means 4 * n_embd.
  m = parseModelConfigText(
      R"({"model_type": "gpt2", "n_embd": 32, "n_head": 2, "n_inner": null})",
      "m");
  EXPECT_EQ(m.intermediate, 128);
}

TEST(ModelConfig, GeluNames) {
  auto gelu = [](const char *key, const char *type, const char *name) {
    return parseModelConfigText(std::string("{\"model_type\": \"") + type +
                                    "\", \"" + key + "\": \"" + name + "\"}",
                                "m")
        .gelu;
  };
  EXPECT_EQ(gelu("activation_function", "gpt2", "gelu_new"), GeluApprox::Tanh);
  EXPECT_EQ(gelu("activation_function", "gpt2", "gelu_pytorch_tanh"),
            GeluApprox::Tanh);
  EXPECT_EQ(gelu("activation_function", "gpt2", "gelu"), GeluApprox::Erf);
  EXPECT_EQ(gelu("hidden_act", "bert", "gelu"), GeluApprox::Erf);
  EXPECT_EQ(gelu("hidden_act", "bert", "gelu_new"), GeluApprox::Tanh);
  std::string msg = modelError(
      R"({"model_type": "gpt2", "activation_function": "relu"})");
  EXPECT_HAS(msg, "m.json: activation_function: \"relu\" is not allowed");
  msg = modelError(R"({"model_type": "bert", "hidden_act": "silu"})");
  EXPECT_HAS(msg, "hidden_act: \"silu\" is not allowed");
}

TEST(ModelConfig, BertDropoutMapping) {
  ModelConfig m = parseModelConfigText(
      R"({"model_type": "bert", "hidden_dropout_prob": 0.2,
          "attention_probs_dropout_prob": 0.3, "type_vocab_size": 1})",
      "m");
  EXPECT_DOUBLE_EQ(m.embdDropout, 0.2);
  EXPECT_DOUBLE_EQ(m.residDropout, 0.2);
  EXPECT_DOUBLE_EQ(m.attnDropout, 0.3);
  EXPECT_EQ(m.typeVocabSize, 1);
}

TEST(ModelConfig, MalformedJson) {
  std::string msg = modelError("{\"model_type\": \"gpt2\",\n \"n_layer\": }");
  EXPECT_HAS(msg, "m.json: malformed JSON: ");
  EXPECT_HAS(msg, "line 2");
  EXPECT_EQ(msg.find("json.exception"), std::string::npos) << msg;
  EXPECT_HAS(modelError(""), "m.json: malformed JSON");
  EXPECT_HAS(modelError("{\"a\": NaN}"), "malformed JSON");
  EXPECT_HAS(modelError("[1, 2]"), "m.json: expected a JSON object");
}

TEST(ModelConfig, DuplicateKey) {
  EXPECT_HAS(modelError(R"({"model_type": "gpt2", "n_layer": 2, "n_layer": 3})"),
             "m.json: n_layer: duplicate key");
}

TEST(ModelConfig, NestingIsBounded) {
  // 64 levels (top level included) are accepted by the reader (the key is
  // then one transformers keeps unread: noted); the 65th is refused as soon
  // as the parser reaches it, so a million levels cost no more than 65.
  auto nested = [](int levels) {
    return "{\"model_type\": \"gpt2\", \"x\": " +
           std::string(size_t(levels - 1), '[') +
           std::string(size_t(levels - 1), ']') + "}";
  };
  ModelConfig deep = parseModelConfigText(nested(64), "m.json");
  ASSERT_EQ(deep.notes.size(), 1u);
  EXPECT_EQ(deep.notes[0].rfind("model config: x: not a key of "
                                "transformers' gpt2 configuration",
                                0),
            0u);
  std::string brackets;
  for (int i = 0; i < 63; ++i)
    brackets += "[]";
  EXPECT_EQ(modelError(nested(65)),
            "m.json: x" + brackets + ": nesting too deep (more than 64 levels)");
  EXPECT_HAS(modelError(nested(1000000)),
             "nesting too deep (more than 64 levels)");
  // Objects: the message names the key path (cut short past 150 chars).
  std::string objs;
  for (int i = 0; i < 100000; ++i)
    objs += "{\"level\": ";
  objs += "1" + std::string(100000, '}');
  EXPECT_HAS(trainError(objs), "ds.json: level.level.level.level.level.");
  EXPECT_HAS(trainError(objs), "...: nesting too deep (more than 64 levels)");
}

TEST(ModelConfig, HeadsMustDivideHidden) {
  EXPECT_EQ(modelError(R"({"model_type": "gpt2", "n_embd": 10, "n_head": 3})"),
            "m.json: n_embd (10) must be divisible by n_head (3)");
  EXPECT_EQ(modelError(
                R"({"model_type": "bert", "hidden_size": 10,
                    "num_attention_heads": 4})"),
            "m.json: hidden_size (10) must be divisible by "
            "num_attention_heads (4)");
}

TEST(ModelConfig, ModelType) {
  EXPECT_HAS(modelError(R"({"n_layer": 2})"), "m.json: model_type: missing");
  EXPECT_HAS(modelError(R"({"model_type": "gptj"})"),
             "m.json: model_type: \"gptj\" is not supported");
  EXPECT_HAS(modelError(R"({"model_type": 2})"), "model_type: 2 is not allowed");
}

TEST(ModelConfig, UnknownKey) {
  EXPECT_HAS(modelError(R"({"model_type": "gpt2", "n_embdd": 64})"),
             "m.json: unknown key 'n_embdd' in model config (did you mean "
             "'n_embd'?)");
  // GPT2Config stores hidden_size as n_embd (attribute_map): refused
  // naming the key to write instead.
  EXPECT_HAS(modelError(R"({"model_type": "gpt2", "hidden_size": 64})"),
             "unknown key 'hidden_size' in model config: GPT2Config stores "
             "it as n_embd (its attribute_map), overriding n_embd; write "
             "n_embd");
  // Another model type's architecture key: a mixed-up file.
  EXPECT_HAS(modelError(R"({"model_type": "bert", "n_layer": 2})"),
             "unknown key 'n_layer' in model config: a key of gpt2 configs, "
             "which transformers' bert configuration does not read");
  EXPECT_HAS(modelError(R"({"model_type": "gpt2", "rms_norm_eps": 1e-5})"),
             "unknown key 'rms_norm_eps' in model config: a key of llama");
  // Any other key transformers keeps as an unread attribute: one note.
  ModelConfig m = parseModelConfigText(
      R"({"model_type": "bert", "my_tag": "a", "_private": 1})", "m.json");
  ASSERT_EQ(m.notes.size(), 1u);
  EXPECT_EQ(m.notes[0],
            "model config: _private, my_tag: not keys of transformers' bert "
            "configuration; accepted and ignored (transformers keeps them as "
            "attributes no model code reads)");
  // Architecture keys of models dsc does not build are refused.
  EXPECT_EQ(modelError(R"({"model_type": "qwen2", "num_hidden_layers": 2,
      "layer_types": ["full_attention", "sliding_attention"]})"),
            "m.json: layer_types: not supported: per-layer attention types "
            "other than \"full_attention\" (sliding windows) are not "
            "supported");
  // Every layer full attention: the model dsc builds.
  EXPECT_TRUE(parseModelConfigText(R"({"model_type": "qwen2",
      "num_hidden_layers": 2, "layer_types": ["full_attention",
      "full_attention"]})",
                                   "m.json")
                  .notes.empty());
}

TEST(ModelConfig, IgnoredKeys) {
  ModelConfig m = parseModelConfigText(R"({
    "model_type": "gpt2", "architectures": ["GPT2LMHeadModel"],
    "transformers_version": "4.46.1", "torch_dtype": "float32",
    "bos_token_id": 50256, "eos_token_id": 50256, "use_cache": true,
    "summary_type": "cls_index", "summary_activation": null,
    "scale_attn_weights": true, "reorder_and_upcast_attn": false,
    "scale_attn_by_inverse_layer_idx": false, "_name_or_path": "gpt2",
    "id2label": {"0": "LABEL_0"}, "label2id": {"LABEL_0": 0},
    "task_specific_params": {"text-generation": {"max_length": 50}},
    "pruned_heads": {}, "is_decoder": false})",
                                       "m");
  EXPECT_EQ(m.numLayers, 12);
  m = parseModelConfigText(R"({"model_type": "bert", "pad_token_id": 0,
      "gradient_checkpointing": false, "classifier_dropout": null,
      "position_embedding_type": "absolute", "directionality": "bidi"})",
                           "m");
  EXPECT_EQ(m.numLayers, 12);
}

TEST(ModelConfig, ArchitectureChangingKeysAreChecked) {
  EXPECT_HAS(modelError(R"({"model_type": "gpt2", "scale_attn_weights": false})"),
             "m.json: scale_attn_weights: false is not supported; expected true");
  EXPECT_HAS(modelError(R"({"model_type": "bert", "is_decoder": true})"),
             "is_decoder: true is not supported");
  EXPECT_HAS(modelError(
                 R"({"model_type": "bert", "position_embedding_type": "relative_key"})"),
             "position_embedding_type: \"relative_key\" is not allowed; "
             "expected \"absolute\"");
  EXPECT_HAS(modelError(R"({"model_type": "gpt2", "n_ctx": 512})"),
             "n_ctx (512) must equal n_positions (1024)");
}

TEST(ModelConfig, WrongType) {
  EXPECT_EQ(modelError(R"({"model_type": "gpt2", "n_layer": "12"})"),
            "m.json: n_layer: \"12\" is not allowed; expected a positive "
            "integer (at most 4096 layers)");
  // Whole-number floats are integers (as DeepSpeed reads them); the
  // message quotes the number as written.
  EXPECT_EQ(parseModelConfigText(R"({"model_type": "gpt2", "n_layer": 12.0})",
                                 "m.json").numLayers, 12);
  EXPECT_HAS(modelError(R"({"model_type": "gpt2", "n_layer": 1.25e1})"),
             "n_layer: 1.25e1 is not allowed");
  EXPECT_HAS(modelError(R"({"model_type": "gpt2", "tie_word_embeddings": 1})"),
             "tie_word_embeddings: 1 is not allowed; expected true or false");
  // Untied heads are not implemented: refused, not trained tied.
  for (const char *type : {"gpt2", "bert"})
    EXPECT_HAS(modelError(std::string(R"({"model_type": ")") + type +
                          R"(", "tie_word_embeddings": false})"),
               "tie_word_embeddings: false (an output head of its own) is "
               "not supported yet");
  EXPECT_HAS(modelError(R"({"model_type": "bert", "layer_norm_eps": "1e-12"})"),
             "layer_norm_eps: \"1e-12\" is not allowed; expected a number > 0");
}

TEST(ModelConfig, OutOfRange) {
  EXPECT_HAS(modelError(R"({"model_type": "gpt2", "n_layer": 0})"),
             "m.json: n_layer: 0 is not allowed; expected a positive integer");
  EXPECT_HAS(modelError(R"({"model_type": "gpt2", "vocab_size": -5})"),
             "vocab_size: -5 is not allowed");
  EXPECT_HAS(modelError(R"({"model_type": "gpt2", "n_embd": 4294967296})"),
             "n_embd: 4294967296 is not allowed");
  EXPECT_HAS(modelError(R"({"model_type": "gpt2", "attn_pdrop": 1.0})"),
             "attn_pdrop: 1.0 is not allowed; expected a number in [0, 1)");
  EXPECT_HAS(modelError(R"({"model_type": "bert", "hidden_dropout_prob": -0.1})"),
             "hidden_dropout_prob: -0.1 is not allowed");
  EXPECT_HAS(modelError(R"({"model_type": "gpt2", "layer_norm_epsilon": 0})"),
             "layer_norm_epsilon: 0 is not allowed; expected a number > 0");
  EXPECT_HAS(modelError(R"({"model_type": "gpt2", "n_inner": 0})"),
             "n_inner: 0 is not allowed; expected null or a positive integer");
}

TEST(ModelConfig, Files) {
  std::string missing = ::testing::TempDir() + "/does-not-exist.json";
  EXPECT_EQ(errorOf([&] { parseModelConfig(missing); }),
            "cannot open " + missing + ": No such file or directory");
  EXPECT_EQ(errorOf([&] { parseModelConfig(::testing::TempDir()); }),
            ::testing::TempDir() + " is not a regular file (a directory)");
  // A device or FIFO would be read forever (or block in open()).
  EXPECT_EQ(errorOf([&] { parseTrainConfig("/dev/zero"); }),
            "/dev/zero is not a regular file (a character device)");
  // Real configs are a few KiB; over 16 MiB is refused before parsing.
  std::string huge = writeTemp(
      "huge.json", "{\"model_type\": \"gpt2\"" + std::string(16 << 20, ' ') + "}");
  EXPECT_EQ(errorOf([&] { parseModelConfig(huge); }),
            huge + " is 16777238 bytes, over the 16777216 byte limit for a "
                   "config file");
  std::string p = writeTemp("bad-model.json", "{\"model_type\": \"gpt2\",}");
  EXPECT_HAS(errorOf([&] { parseModelConfig(p); }), p + ": malformed JSON");
  p = writeTemp("good-model.json", R"({"model_type": "gpt2", "n_layer": 3})");
  EXPECT_EQ(parseModelConfig(p).numLayers, 3);
}

//===----------------------------------------------------------------------===//
// Training config
//===----------------------------------------------------------------------===//

TEST(TrainConfig, Defaults) {
  TrainConfig t = train(ds(""));
  EXPECT_EQ(t.microBatch, 2);
  EXPECT_EQ(t.gradAccum, 1);
  EXPECT_EQ(t.trainBatchSize, 2);
  EXPECT_DOUBLE_EQ(t.gradClip, 0.0);
  EXPECT_EQ(t.optimizer.type, OptimizerType::AdamW);
  EXPECT_EQ(t.scheduler.type, SchedulerType::None);
  EXPECT_EQ(t.seed, 42u);
  EXPECT_EQ(t.seqLen, 0);
  EXPECT_DOUBLE_EQ(t.mlmProbability, 0.15);
  EXPECT_EQ(t.maskTokenId, -1);
}

TEST(TrainConfig, BatchSizeDerivation) {
  TrainConfig t = train(R"({"train_batch_size": 32,
                            "train_micro_batch_size_per_gpu": 4})",
                        2);
  EXPECT_EQ(t.gradAccum, 4);
  t = train(R"({"train_batch_size": 32, "gradient_accumulation_steps": 2})", 4);
  EXPECT_EQ(t.microBatch, 4);
  t = train(R"({"train_micro_batch_size_per_gpu": 3,
                "gradient_accumulation_steps": 5})",
            2);
  EXPECT_EQ(t.trainBatchSize, 30);
  t = train(R"({"train_batch_size": 16})", 4);
  EXPECT_EQ(t.microBatch, 4);
  EXPECT_EQ(t.gradAccum, 1);
  t = train(R"({"train_micro_batch_size_per_gpu": 8})", 2);
  EXPECT_EQ(t.trainBatchSize, 16);
  t = train(R"({"train_batch_size": 16, "train_micro_batch_size_per_gpu": 4,
                "gradient_accumulation_steps": 2})",
            2);
  EXPECT_EQ(t.trainBatchSize, 16);
}

TEST(TrainConfig, InconsistentBatchSizes) {
  EXPECT_EQ(trainError(R"({"train_batch_size": 32,
                           "train_micro_batch_size_per_gpu": 8,
                           "gradient_accumulation_steps": 2})"),
            "ds.json: train_batch_size (32) must equal "
            "train_micro_batch_size_per_gpu (8) * gradient_accumulation_steps "
            "(2) * world size (1)");
  EXPECT_HAS(trainError(R"({"train_batch_size": 10,
                            "train_micro_batch_size_per_gpu": 4})"),
             "train_batch_size (10) is not divisible by "
             "train_micro_batch_size_per_gpu (4) * world size (1)");
  EXPECT_HAS(trainError(R"({"train_batch_size": 8})", 3),
             "train_batch_size (8) is not divisible by world size (3)");
  EXPECT_HAS(trainError(R"({"gradient_accumulation_steps": 2})"),
             "train_batch_size or train_micro_batch_size_per_gpu must be set");
  EXPECT_HAS(trainError("{}"),
             "train_batch_size or train_micro_batch_size_per_gpu must be set");
  EXPECT_HAS(trainError(ds(""), 0), "world size 0 is not allowed");
}

TEST(TrainConfig, AdamFollowsDeepSpeed) {
  // DeepSpeed's "Adam" has adam_w_mode = true by default: decoupled decay.
  TrainConfig t = train(ds(R"("optimizer": {"type": "Adam"})"));
  EXPECT_EQ(t.optimizer.type, OptimizerType::AdamW);
  t = train(ds(R"("optimizer": {"type": "adam",
                   "params": {"adam_w_mode": false, "weight_decay": 0.1}})"));
  EXPECT_EQ(t.optimizer.type, OptimizerType::Adam);
  EXPECT_DOUBLE_EQ(t.optimizer.weightDecay, 0.1);
  t = train(ds(R"("optimizer": {"type": "ADAMW", "params": {"lr": 3e-4,
                   "betas": [0.8, 0.95], "eps": 1e-6, "bias_correction": false,
                   "torch_adam": true}})"));
  EXPECT_EQ(t.optimizer.type, OptimizerType::AdamW);
  EXPECT_DOUBLE_EQ(t.optimizer.lr, 3e-4);
  EXPECT_DOUBLE_EQ(t.optimizer.beta1, 0.8);
  EXPECT_DOUBLE_EQ(t.optimizer.beta2, 0.95);
  EXPECT_DOUBLE_EQ(t.optimizer.eps, 1e-6);
  EXPECT_FALSE(t.optimizer.biasCorrection);
  EXPECT_HAS(trainError(ds(R"("optimizer": {"type": "AdamW",
                              "params": {"adam_w_mode": false}})")),
             "optimizer.params.adam_w_mode: false contradicts");
  EXPECT_HAS(trainError(ds(R"("optimizer": {"type": "Adam",
                              "params": {"amsgrad": true}})")),
             "optimizer.params.amsgrad: true is not supported yet");
}

TEST(TrainConfig, OptimizerTypes) {
  TrainConfig t = train(ds(R"("optimizer": {"type": "Lamb", "params":
                                {"max_coeff": 5, "min_coeff": 0.1}})"));
  EXPECT_EQ(t.optimizer.type, OptimizerType::Lamb);
  EXPECT_DOUBLE_EQ(t.optimizer.maxCoeff, 5.0);
  EXPECT_DOUBLE_EQ(t.optimizer.minCoeff, 0.1);
  t = train(ds(R"("optimizer": {"type": "sgd", "params": {"lr": 0.1,
                  "momentum": 0.9, "nesterov": true}})"));
  EXPECT_EQ(t.optimizer.type, OptimizerType::SGD);
  EXPECT_DOUBLE_EQ(t.optimizer.momentum, 0.9);
  EXPECT_TRUE(t.optimizer.nesterov);
  EXPECT_HAS(trainError(ds(R"("optimizer": {"type": "Adagrad"})")),
             "optimizer.type: \"Adagrad\" is not allowed; expected one of");
  EXPECT_HAS(trainError(ds(R"("optimizer": {"params": {}})")),
             "optimizer.type: missing");
  EXPECT_HAS(trainError(ds(R"("optimizer": {"type": "AdamW",
                              "params": {"momentum": 0.9}})")),
             "optimizer.params.momentum: not a parameter of optimizer type "
             "'AdamW'");
  EXPECT_HAS(trainError(ds(R"("optimizer": {"type": "SGD",
                              "params": {"betas": [0.9, 0.99]}})")),
             "optimizer.params.betas: not a parameter of optimizer type 'SGD'");
  EXPECT_HAS(trainError(ds(R"("optimizer": {"type": "SGD",
                              "params": {"nesterov": true}})")),
             "optimizer.params.nesterov: true requires momentum > 0");
}

TEST(TrainConfig, ZeroOneAdam) {
  TrainConfig t = train(ds(R"("optimizer": {"type": "ZeroOneAdam", "params":
      {"lr": 1e-3, "var_freeze_step": 400, "var_update_scaler": 8,
       "local_step_scaler": 100, "local_step_clipper": 4, "cuda_aware": false,
       "comm_backend_name": "mpi", "bias_correction": true}})"));
  EXPECT_EQ(t.optimizer.type, OptimizerType::ZeroOneAdam);
  EXPECT_EQ(t.optimizer.varFreezeStep, 400);
  EXPECT_EQ(t.optimizer.varUpdateScaler, 8);
  EXPECT_EQ(t.optimizer.localStepScaler, 100);
  EXPECT_EQ(t.optimizer.localStepClipper, 4);
  EXPECT_FALSE(t.optimizer.biasCorrection); // as DeepSpeed: never corrects
  t = train(ds(R"("optimizer": {"type": "zerooneadam"})"));
  // DeepSpeed's defaults.
  EXPECT_EQ(t.optimizer.varFreezeStep, 100000);
  EXPECT_EQ(t.optimizer.varUpdateScaler, 16);
  EXPECT_EQ(t.optimizer.localStepScaler, 32678);
  EXPECT_EQ(t.optimizer.localStepClipper, 16);
  EXPECT_HAS(trainError(ds(R"("optimizer": {"type": "ZeroOneAdam",
                              "params": {"var_update_scaler": 0}})")),
             "optimizer.params.var_update_scaler: 0 is not allowed");
  EXPECT_HAS(trainError(ds(R"("optimizer": {"type": "ZeroOneAdam",
                              "params": {"var_freeze_step": 0}})")),
             "optimizer.params.var_freeze_step: 0 is not allowed; expected "
             "an integer >= 1");
  EXPECT_HAS(trainError(ds(R"("optimizer": {"type": "ZeroOneAdam",
                              "params": {"freeze_step": 10}})")),
             "optimizer.params.freeze_step: not a parameter of optimizer "
             "type 'ZeroOneAdam'");
  EXPECT_HAS(trainError(ds(R"("optimizer": {"type": "ZeroOneAdam"},
                              "zero_optimization": {"stage": 2})")),
             "zero_optimization.stage 2 with optimizer ZeroOneAdam: its "
             "compressed steps add each rank's own whole gradient to its own "
             "whole momentum before any reduction, so gradients cannot be "
             "sharded");
  EXPECT_HAS(trainError(ds(R"("optimizer": {"type": "ZeroOneAdam"},
                              "fp16": {"enabled": true})")),
             "fp16 with optimizer ZeroOneAdam is not supported yet");
}

// DeepSpeed's OnebitLamb keys and defaults; what is not built is refused.
TEST(TrainConfig, OneBitLamb) {
  TrainConfig t = train(ds(R"("optimizer": {"type": "OneBitLamb", "params":
      {"lr": 2e-3, "freeze_step": 20, "max_coeff": 5, "min_coeff": 0.1,
       "coeff_beta": 0.8, "factor_max": 3, "factor_min": 0.7,
       "factor_threshold": 0.2, "cuda_aware": false,
       "comm_backend_name": "mpi", "bias_correction": true}})"));
  EXPECT_EQ(t.optimizer.type, OptimizerType::OneBitLamb);
  EXPECT_EQ(t.optimizer.freezeStep, 20);
  EXPECT_DOUBLE_EQ(t.optimizer.maxCoeff, 5.0);
  EXPECT_DOUBLE_EQ(t.optimizer.minCoeff, 0.1);
  EXPECT_DOUBLE_EQ(t.optimizer.coeffBeta, 0.8);
  EXPECT_DOUBLE_EQ(t.optimizer.factorMax, 3.0);
  EXPECT_DOUBLE_EQ(t.optimizer.factorMin, 0.7);
  EXPECT_DOUBLE_EQ(t.optimizer.factorThreshold, 0.2);
  EXPECT_FALSE(t.optimizer.biasCorrection); // as DeepSpeed: never corrects
  t = train(ds(R"("optimizer": {"type": "onebitlamb"})"));
  EXPECT_EQ(t.optimizer.freezeStep, 100000);
  EXPECT_DOUBLE_EQ(t.optimizer.coeffBeta, 0.9);
  EXPECT_DOUBLE_EQ(t.optimizer.factorMax, 4.0);
  EXPECT_DOUBLE_EQ(t.optimizer.factorMin, 0.5);
  EXPECT_DOUBLE_EQ(t.optimizer.factorThreshold, 0.1);
  EXPECT_HAS(trainError(ds(R"("optimizer": {"type": "OneBitLamb",
                              "params": {"coeff_beta": 1.0}})")),
             "optimizer.params.coeff_beta: 1.0 is not allowed");
  EXPECT_HAS(trainError(ds(R"("optimizer": {"type": "OneBitLamb",
                              "params": {"factor_min": 5}})")),
             "optimizer.params.factor_min (5.0) must not exceed factor_max "
             "(4.0)");
  EXPECT_HAS(trainError(ds(R"("optimizer": {"type": "OneBitLamb",
                              "params": {"var_freeze_step": 10}})")),
             "optimizer.params.var_freeze_step: not a parameter of "
             "optimizer type 'OneBitLamb'");
  EXPECT_HAS(trainError(ds(R"("optimizer": {"type": "OneBitLamb"},
                              "zero_optimization": {"stage": 1})")),
             "zero_optimization.stage 1 with optimizer OneBitLamb: LAMB's "
             "trust ratio needs whole parameters");
  EXPECT_HAS(trainError(ds(R"("optimizer": {"type": "OneBitLamb"},
                              "fp16": {"enabled": true})")),
             "fp16 with optimizer OneBitLamb is not supported yet");
}

TEST(TrainConfig, OneBitAdam) {
  TrainConfig t = train(ds(R"("optimizer": {"type": "OneBitAdam", "params":
      {"lr": 2e-4, "freeze_step": 23000, "cuda_aware": false,
       "comm_backend_name": "mpi", "bias_correction": true}})"));
  EXPECT_EQ(t.optimizer.type, OptimizerType::OneBitAdam);
  EXPECT_EQ(t.optimizer.freezeStep, 23000);
  EXPECT_EQ(t.optimizer.commBackend, "mpi");
  // DeepSpeed's OnebitAdam accepts bias_correction and never corrects.
  EXPECT_FALSE(t.optimizer.biasCorrection);
  t = train(ds(R"("optimizer": {"type": "onebitadam"})"));
  EXPECT_EQ(t.optimizer.freezeStep, 100000); // DeepSpeed's default
  EXPECT_EQ(t.optimizer.commBackend, "nccl");
  EXPECT_HAS(trainError(ds(R"("optimizer": {"type": "OneBitAdam",
                              "params": {"freeze_step": -1}})")),
             "optimizer.params.freeze_step: -1 is not allowed; expected an "
             "integer >= 1");
  // Frozen at zero, the variance held every weight still (exit 0).
  EXPECT_HAS(trainError(ds(R"("optimizer": {"type": "OneBitAdam",
                              "params": {"freeze_step": 0}})")),
             "optimizer.params.freeze_step: 0 is not allowed; expected an "
             "integer >= 1 (the variance freezes after that many "
             "full-precision steps)");
  EXPECT_HAS(trainError(ds(R"("optimizer": {"type": "OneBitLamb",
                              "params": {"freeze_step": 0}})")),
             "optimizer.params.freeze_step: 0 is not allowed");
  EXPECT_HAS(trainError(ds(R"("optimizer": {"type": "OneBitAdam",
                              "params": {"comm_backend_name": "gloo"}})")),
             "optimizer.params.comm_backend_name: \"gloo\" is not allowed; "
             "expected \"nccl\" or \"mpi\"");
  EXPECT_HAS(trainError(ds(R"("optimizer": {"type": "OneBitAdam",
                              "params": {"eps_inside_sqrt": true}})")),
             "optimizer.params.eps_inside_sqrt: true is not supported");
  EXPECT_HAS(trainError(ds(R"("optimizer": {"type": "OneBitAdam",
                              "params": {"max_grad_norm": 1.0}})")),
             "clip with the top-level gradient_clipping");
  EXPECT_HAS(trainError(ds(R"("optimizer": {"type": "OneBitAdam",
                              "params": {"momentum": 0.9}})")),
             "optimizer.params.momentum: not a parameter of optimizer type "
             "'OneBitAdam'");
  EXPECT_HAS(trainError(ds(R"("optimizer": {"type": "AdamW",
                              "params": {"freeze_step": 10}})")),
             "optimizer.params.freeze_step: not a parameter of optimizer "
             "type 'AdamW'");
  EXPECT_HAS(trainError(ds(R"("optimizer": {"type": "OneBitAdam"},
                              "zero_optimization": {"stage": 1})")),
             "zero_optimization.stage 1 with optimizer OneBitAdam: its "
             "compressed steps add each rank's own whole gradient to its own "
             "whole momentum before any reduction, so only the frozen "
             "variance could be sharded");
  EXPECT_HAS(trainError(ds(R"("optimizer": {"type": "OneBitAdam"},
                              "zero_optimization": {"stage": 2})")),
             "before any reduction, so gradients cannot be sharded; use "
             "stage 0");
}

TEST(TrainConfig, UnknownKeyAtDepth) {
  EXPECT_HAS(trainError(ds(R"("optimizer": {"type": "AdamW",
                              "params": {"betaz": [0.9, 0.99]}})")),
             "ds.json: optimizer.params.betaz: unknown key (did you mean "
             "'betas'?)");
  EXPECT_HAS(trainError(ds(R"("scheduler": {"type": "WarmupLR",
                              "params": {"warmup_steps": 10}})")),
             "ds.json: scheduler.params.warmup_steps: unknown key");
  EXPECT_HAS(trainError(ds(R"("dsc": {"seqlen": 10})")),
             "ds.json: dsc.seqlen: unknown key (did you mean 'seq_len'?)");
  EXPECT_HAS(trainError(ds(R"("fp16": {"enabled": false, "loss_scael": 0})")),
             "fp16.loss_scael: unknown key");
  EXPECT_HAS(trainError(ds(R"("optimiser": {})")),
             "ds.json: optimiser: unknown key (did you mean 'optimizer'?)");
  EXPECT_HAS(trainError(ds(R"("optimizer": {"type": "AdamW", "foo": 1})")),
             "optimizer.foo: unknown key");
}

TEST(TrainConfig, WrongTypeAndRange) {
  EXPECT_EQ(trainError(R"({"train_micro_batch_size_per_gpu": 1,
                           "steps_per_print": "auto"})"),
            "ds.json: steps_per_print: \"auto\" is not allowed; expected a "
            "positive integer (at most 2^31-1) (\"auto\" is resolved only "
            "where the Hugging Face Trainer resolves it; write the value "
            "itself)");
  EXPECT_HAS(trainError(R"({"train_micro_batch_size_per_gpu": 0})"),
             "train_micro_batch_size_per_gpu: 0 is not allowed");
  EXPECT_HAS(trainError(R"({"train_micro_batch_size_per_gpu": 2.5})"),
             "train_micro_batch_size_per_gpu: 2.5 is not allowed");
  EXPECT_HAS(trainError(ds(R"("gradient_clipping": -1)")),
             "gradient_clipping: -1 is not allowed; expected a number >= 0");
  EXPECT_HAS(trainError(ds(R"("optimizer": {"type": "AdamW",
                              "params": {"betas": [0.9]}})")),
             "optimizer.params.betas: [0.9] is not allowed; expected an "
             "array of two numbers");
  EXPECT_HAS(trainError(ds(R"("optimizer": {"type": "AdamW",
                              "params": {"betas": [0.9, 1.5]}})")),
             "optimizer.params.betas[1]: 1.5 is not allowed");
  EXPECT_HAS(trainError(ds(R"("optimizer": {"type": "AdamW",
                              "params": {"lr": "1e-3"}})")),
             "optimizer.params.lr: \"1e-3\" is not allowed");
  EXPECT_HAS(trainError(ds(R"("optimizer": "AdamW")")),
             "optimizer: \"AdamW\" is not allowed; expected a JSON object");
  EXPECT_HAS(trainError(ds(R"("dsc": {"seed": -1})")),
             "dsc.seed: -1 is not allowed; expected an integer in [0, 2^64)");
  EXPECT_HAS(trainError(ds(R"("dsc": {"mlm_probability": 1})")),
             "dsc.mlm_probability: 1 is not allowed; expected a number in "
             "(0, 1)");
  EXPECT_HAS(trainError(ds(R"("dsc": {"seq_len": 0})")),
             "dsc.seq_len: 0 is not allowed");
  EXPECT_HAS(trainError(ds(R"("dsc": {"mask_token_id": -1})")),
             "dsc.mask_token_id: -1 is not allowed");
  EXPECT_HAS(trainError(ds(R"("wall_clock_breakdown": "yes")")),
             "wall_clock_breakdown: \"yes\" is not allowed; expected true or "
             "false");
}

TEST(TrainConfig, DscSection) {
  TrainConfig t = train(ds(R"("dsc": {"seed": 18446744073709551615,
      "seq_len": 128, "mlm_probability": 0.2, "mask_token_id": 4})"));
  EXPECT_EQ(t.seed, 18446744073709551615ull);
  EXPECT_EQ(t.seqLen, 128);
  EXPECT_DOUBLE_EQ(t.mlmProbability, 0.2);
  EXPECT_EQ(t.maskTokenId, 4);
}

TEST(TrainConfig, FusionSwitches) {
  FusionConfig on = train(ds("")).fusion; // all on by default
  EXPECT_TRUE(on.qkv && on.biasGelu && on.swiglu && on.biasDropoutAdd &&
              on.softmaxDropout && on.residualLayerNorm &&
              on.residualRmsNorm && on.attention);
  FusionConfig off = train(ds(R"("dsc": {"fusion": {"qkv": false,
      "bias_gelu": false, "swiglu": false, "bias_dropout_add": false,
      "softmax_dropout": false, "residual_layer_norm": false,
      "residual_rms_norm": false, "attention": false}})")).fusion;
  EXPECT_FALSE(off.qkv || off.biasGelu || off.swiglu || off.biasDropoutAdd ||
               off.softmaxDropout || off.residualLayerNorm ||
               off.residualRmsNorm || off.attention);
  EXPECT_HAS(trainError(ds(R"("dsc": {"fusion": {"qkv": 1}})")),
             "dsc.fusion.qkv");
  EXPECT_HAS(trainError(ds(R"("dsc": {"fusion": {"gelu": true}})")),
             "dsc.fusion.gelu");
}

TEST(TrainConfig, Schedulers) {
  TrainConfig t = train(ds(R"("scheduler": {"type": "WarmupLR"})"));
  EXPECT_EQ(t.scheduler.type, SchedulerType::WarmupLR);
  EXPECT_DOUBLE_EQ(t.scheduler.warmupMinLr, 0.0);
  EXPECT_DOUBLE_EQ(t.scheduler.warmupMaxLr, 0.001);
  EXPECT_EQ(t.scheduler.warmupNumSteps, 1000);
  EXPECT_TRUE(t.scheduler.warmupLog);
  t = train(ds(R"("scheduler": {"type": "WarmupDecayLR", "params": {
      "total_num_steps": 100, "warmup_num_steps": 0, "warmup_type": "linear",
      "warmup_min_lr": 1e-5, "warmup_max_lr": 1e-3}})"));
  EXPECT_EQ(t.scheduler.type, SchedulerType::WarmupDecayLR);
  EXPECT_EQ(t.scheduler.totalNumSteps, 100);
  EXPECT_EQ(t.scheduler.warmupNumSteps, 2); // DeepSpeed clamps to >= 2
  EXPECT_FALSE(t.scheduler.warmupLog);
  EXPECT_DOUBLE_EQ(t.scheduler.warmupMinLr, 1e-5);
  t = train(ds(R"("scheduler": {"type": "WarmupCosineLR", "params": {
      "total_num_steps": 1000, "warmup_num_steps": 10,
      "warmup_min_ratio": 0.1, "cos_min_ratio": 0.01}})"));
  EXPECT_EQ(t.scheduler.type, SchedulerType::WarmupCosineLR);
  EXPECT_DOUBLE_EQ(t.scheduler.warmupMinRatio, 0.1);
  EXPECT_DOUBLE_EQ(t.scheduler.cosMinRatio, 0.01);
  EXPECT_EQ(t.scheduler.warmupNumSteps, 10);

  EXPECT_HAS(trainError(ds(R"("scheduler": {"type": "WarmupDecayLR"})")),
             "scheduler.params.total_num_steps: missing; required by "
             "WarmupDecayLR");
  EXPECT_HAS(trainError(ds(R"("scheduler": {"type": "WarmupCosineLR",
      "params": {"total_num_steps": 5, "warmup_num_steps": 10}})")),
             "total_num_steps (5) must be at least warmup_num_steps (10)");
  EXPECT_HAS(trainError(ds(R"("scheduler": {"type": "WarmupLR",
      "params": {"warmup_type": "cosine"}})")),
             "scheduler.params.warmup_type: \"cosine\" is not allowed; "
             "expected \"log\" or \"linear\"");
  EXPECT_HAS(trainError(ds(R"("scheduler": {"type": "WarmupLR",
      "params": {"total_num_steps": 5}})")),
             "scheduler.params.total_num_steps: unknown key");
  EXPECT_HAS(trainError(ds(R"("scheduler": {"type": "WarmupCosineLR",
      "params": {"total_num_steps": 5000, "warmup_max_lr": 0.1}})")),
             "scheduler.params.warmup_max_lr: unknown key");
  EXPECT_HAS(trainError(ds(R"("scheduler": {"type": "warmuplr"})")),
             "names are case-sensitive: 'WarmupLR'");
  EXPECT_HAS(trainError(ds(R"("scheduler": {"type": "OneCycle"})")),
             "scheduler.type 'OneCycle' is not supported yet");
}

TEST(TrainConfig, UnimplementedSections) {
  // Absent or disabled: accepted.
  train(ds(R"("fp16": {"enabled": false, "loss_scale": 0,
              "initial_scale_power": 16}, "bf16": {"enabled": false},
              "zero_optimization": {"stage": 0, "overlap_comm": true},
              "activation_checkpointing": {"partition_activations": false,
              "number_checkpoints": null}, "transformer_kernel": {
              "normalize_invertible": false}, "wall_clock_breakdown": false)"));
  train(ds(R"("fp16": {"loss_scale": 0}, "zero_optimization": false)"));
  EXPECT_EQ(train(ds(R"("zero_optimization": {"stage": 2})")).zeroStage, 2);
  EXPECT_EQ(train(ds(R"("zero_optimization": true)")).zeroStage, 1);
  EXPECT_EQ(train(ds(R"("zero_optimization": {"stage": 3})")).zeroStage, 3);
  // ZeRO-Offload: offload_optimizer device cpu, or the deprecated
  // cpu_offload; NVMe and stage 0 are refused.
  EXPECT_TRUE(train(ds(R"("zero_optimization": {"stage": 1,
                          "cpu_offload": true})")).offloadOptimizer);
  EXPECT_TRUE(train(ds(R"("zero_optimization": {"stage": 3,
                          "offload_optimizer": {"device": "cpu",
                          "pin_memory": true}})")).offloadOptimizer);
  EXPECT_FALSE(train(ds(R"("zero_optimization": {"stage": 2,
                           "offload_optimizer": {"device": "none"}})"))
                   .offloadOptimizer);
  // ZeRO-Infinity: the swap file's directory is required.
  EXPECT_EQ(train(ds(R"("zero_optimization": {"stage": 2,
                        "offload_optimizer": {"device": "nvme",
                        "nvme_path": "/local_nvme"}})"))
                .offloadNvmePath,
            "/local_nvme");
  EXPECT_HAS(trainError(ds(R"("zero_optimization": {"stage": 2,
                              "offload_optimizer": {"device": "nvme"}})")),
             "ds.json: zero_optimization.offload_optimizer.nvme_path: device "
             "\"nvme\" needs the directory of the swap file");
  EXPECT_HAS(trainError(ds(R"("zero_optimization": {"stage": 0,
                              "cpu_offload": true})")),
             "ds.json: zero_optimization.offload_optimizer (device cpu) needs "
             "zero_optimization.stage 1, 2 or 3");
  // Parameter offload: stage 3, with the optimizer's; noted below.
  const TrainConfig params = train(ds(R"("zero_optimization": {"stage": 3,
      "offload_optimizer": {"device": "cpu"},
      "offload_param": {"device": "cpu", "pin_memory": true}})"));
  EXPECT_TRUE(params.offloadParams && params.offloadOptimizer);
  EXPECT_TRUE(train(ds(R"("zero_optimization": {"stage": 3,
                          "cpu_offload": true, "cpu_offload_param": true})"))
                  .offloadParams);
  EXPECT_FALSE(train(ds(R"("zero_optimization": {"stage": 2,
                           "cpu_offload": true, "cpu_offload_params": true})"))
                   .offloadParams);
  EXPECT_HAS(trainError(ds(R"("zero_optimization": {"stage": 3,
                              "offload_param": {"device": "cpu"}})")),
             "zero_optimization.offload_param (device cpu) without "
             "offload_optimizer is not supported");
  EXPECT_HAS(trainError(ds(R"("zero_optimization": {"stage": 2,
                              "offload_optimizer": {"device": "cpu",
                              "pin_memory": "yes"}})")),
             "zero_optimization.offload_optimizer.pin_memory: \"yes\" is not "
             "allowed; expected true or false");
  // The device as DeepSpeed's enum spells it: it refuses "CPU" and null.
  EXPECT_HAS(trainError(ds(R"("zero_optimization": {"stage": 2,
                              "offload_optimizer": {"device": "NVME",
                              "nvme_path": "/local_nvme"}})")),
             "zero_optimization.offload_optimizer.device: \"NVME\" is not "
             "allowed; expected \"none\", \"cpu\" or \"nvme\", in lower case");
  EXPECT_HAS(trainError(ds(R"("zero_optimization": {"stage": 2,
                              "offload_optimizer": {"device": null}})")),
             "zero_optimization.offload_optimizer.device: null is not "
             "allowed; expected \"none\", \"cpu\" or \"nvme\" (omit the key");
  const std::string gpu = trainError(ds(R"("zero_optimization": {"stage": 2,
      "offload_optimizer": {"device": "gpu"}})"));
  EXPECT_HAS(gpu, "zero_optimization.offload_optimizer.device: \"gpu\" is not "
                  "allowed; expected \"none\", \"cpu\" or \"nvme\"");
  EXPECT_EQ(gpu.find("lower case"), std::string::npos) << gpu;
  // Keys without effect keep DeepSpeed's ranges (pydantic's ge=0).
  EXPECT_HAS(trainError(ds(R"("zero_optimization": {"stage": 3,
                              "sub_group_size": -1})")),
             "zero_optimization.sub_group_size: -1 is not allowed; expected a "
             "non-negative integer");
  EXPECT_HAS(trainError(ds(R"("zero_optimization": {"stage": 3,
                              "stage3_max_live_parameters": -5})")),
             "zero_optimization.stage3_max_live_parameters: -5 is not allowed");
  EXPECT_EQ(train(ds(R"("zero_optimization": {"stage": 3, "sub_group_size": 0,
                        "stage3_max_reuse_distance": 0})")).zeroStage, 3);
  EXPECT_HAS(trainError(ds(R"("zero_optimization": {"stage": 1,
                              "overlap_comm": 1})")),
             "zero_optimization.overlap_comm");
  EXPECT_HAS(trainError(ds(R"("zero_optimization": {"stage": 4})")),
             "zero_optimization.stage: 4 is not allowed");
  // Splitting checkpoints over tensor ranks: recorded (plan uses it).
  EXPECT_TRUE(train(ds(R"("activation_checkpointing":
                          {"partition_activations": true})"))
                  .parallel.partitionActivations);
}

// DeepSpeed's tensor_parallel and pipeline sections and dsc's schedule
// keys; the batch rule counts data-parallel ranks only.
TEST(TrainConfig, TensorAndPipelineParallel) {
  TrainConfig t = train(R"({"train_batch_size": 16,
                            "train_micro_batch_size_per_gpu": 2,
                            "tensor_parallel": {"autotp_size": 2},
                            "pipeline": {"stages": 4, "partition": "uniform",
                                         "activation_checkpoint_interval": 2,
                                         "seed_layers": false},
                            "dsc": {"pipeline_schedule": "interleaved",
                                    "pipeline_virtual_stages": 2}})",
                        16);
  EXPECT_EQ(t.parallel.tensor, 2);
  EXPECT_EQ(t.parallel.pipeline, 4);
  EXPECT_EQ(t.dataParallel(), 2);
  EXPECT_EQ(t.gradAccum, 4); // 16 / (2 per micro-batch * 2 data ranks)
  EXPECT_EQ(t.parallel.partition, "uniform");
  EXPECT_EQ(t.parallel.activationCheckpointInterval, 2);
  // Checkpointing every 2 layers: per-layer checkpointing over pairs.
  EXPECT_TRUE(t.remat.perLayer);
  EXPECT_EQ(t.remat.layerInterval, 2);
  EXPECT_EQ(t.parallel.virtualStages, 2);
  EXPECT_EQ(train(ds(R"("pipeline": {"stages": "auto"})")).parallel.pipeline,
            1);
  EXPECT_EQ(train(ds("")).parallel.partition, "best");

  EXPECT_EQ(trainError(ds(R"("tensor_parallel": {"autotp_size": 2})"), 3),
            "ds.json: the world size (3) is not divisible by "
            "tensor_parallel.autotp_size (2) * pipeline.stages (1) = 2");
  EXPECT_HAS(trainError(R"({"train_batch_size": 6,
                            "train_micro_batch_size_per_gpu": 2,
                            "pipeline": {"stages": 2}})",
                        4),
             "train_batch_size (6) is not divisible by "
             "train_micro_batch_size_per_gpu (2) * data-parallel size (2)");
  EXPECT_HAS(trainError(ds(R"("tensor_parallel": {"tp_size": 2})")),
             "tensor_parallel.tp_size: unknown key");
  EXPECT_HAS(trainError(ds(R"("pipeline": {"partition": "type:Block"})")),
             "pipeline.partition: \"type:Block\" is not allowed");
  EXPECT_HAS(trainError(ds(R"("dsc": {"pipeline_virtual_stages": 2})")),
             "more than one virtual stage per rank is the interleaved "
             "schedule");
  EXPECT_HAS(trainError(ds(R"("dsc": {"pipeline_schedule": "zb"})")),
             "dsc.pipeline_schedule: \"zb\" is not allowed");

  // What tensor slicing cannot compose with yet is refused by name.
  const std::string tp2 = R"("tensor_parallel": {"autotp_size": 2}, )";
  EXPECT_HAS(trainError(ds(tp2 + R"("optimizer": {"type": "Lamb"})"), 2),
             "tensor_parallel.autotp_size 2 with optimizer Lamb: LAMB's "
             "trust ratio needs whole parameters");
  EXPECT_HAS(trainError(ds(tp2 + R"("optimizer": {"type": "OneBitLamb"})"),
                        2),
             "tensor_parallel.autotp_size 2 with optimizer OneBitLamb: "
             "LAMB's trust ratio needs whole parameters");
}

// DeepSpeed's keys and JSON defaults; every key is accepted in every mode
// (DeepSpeed's documented example lists them all), its checks are errors.
TEST(TrainConfig, SparseAttention) {
  EXPECT_FALSE(train(ds("")).sparseAttention.enabled);
  SparseAttentionConfig d = train(ds(R"("sparse_attention": {})"))
                                .sparseAttention;
  EXPECT_TRUE(d.enabled);
  EXPECT_EQ(d.mode, SparsityMode::Fixed);
  EXPECT_EQ(d.block, 16);
  EXPECT_EQ(d.numLocalBlocks, 4);
  EXPECT_EQ(d.numRandomBlocks, 0);
  EXPECT_FALSE(d.unidirectional);
  SparseAttentionConfig v = train(ds(R"("sparse_attention": {
      "mode": "variable", "block": 32, "num_local_blocks": 2,
      "attention": "unidirectional", "num_random_blocks": 1,
      "local_window_blocks": [2, 3], "global_block_indices": [0, 4],
      "global_block_end_indices": [1, 6], "num_sliding_window_blocks": 5})"))
                                .sparseAttention;
  EXPECT_EQ(v.mode, SparsityMode::Variable);
  EXPECT_EQ(v.block, 32);
  EXPECT_TRUE(v.unidirectional);
  EXPECT_EQ(v.localWindowBlocks, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(v.globalBlockEndIndices, (std::vector<int64_t>{1, 6}));
  EXPECT_HAS(trainError(ds(R"("sparse_attention": {"mode": "sparse"})")),
             "sparse_attention.mode: \"sparse\" is not allowed");
  EXPECT_HAS(trainError(ds(R"("sparse_attention": {"num_local_blocks": 6,
                              "num_global_blocks": 4})")),
             "num_local_blocks (6) must be divisible by num_global_blocks");
  EXPECT_HAS(trainError(ds(R"("sparse_attention": {"attention":
                              "unidirectional",
                              "horizontal_global_attention": true})")),
             "horizontal_global_attention needs attention");
  EXPECT_HAS(trainError(ds(R"("sparse_attention": {"mode": "variable",
                              "global_block_indices": [2],
                              "global_block_end_indices": [2]})")),
             "global_block_indices[0] (2) must be smaller than "
             "global_block_end_indices[0] (2)");
  EXPECT_HAS(trainError(ds(R"("sparse_attention": {"mode": "bslongformer",
                              "global_block_indices": [0, 1],
                              "global_block_end_indices": [3]})")),
             "global_block_end_indices has 1 entries but");
  EXPECT_HAS(trainError(ds(R"("sparse_attention": {"local_window_blocks": []})")),
             "sparse_attention.local_window_blocks: [] is not allowed");
  EXPECT_HAS(trainError(ds(R"("sparse_attention": {"mode": "user"})")),
             "mode \"user\" needs layout_file");
}

TEST(TrainConfig, Remat) {
  RematConfig r = train(ds("")).remat;
  EXPECT_EQ(r.policy, "none");
  EXPECT_TRUE(r.recomputeCheap);
  // DeepSpeed's switches select the deepspeed policy.
  r = train(ds(R"("transformer_kernel": {"gelu_checkpoint": true,
                  "attn_dropout_checkpoint": true})")).remat;
  EXPECT_EQ(r.policy, "deepspeed");
  EXPECT_TRUE(r.geluCheckpoint && r.attnDropoutCheckpoint && !r.perLayer);
  r = train(ds(R"("transformer_kernel": {"gelu_checkpoint": false})")).remat;
  EXPECT_EQ(r.policy, "none");
  // The activation_checkpointing section means per-layer checkpointing.
  r = train(ds(R"("activation_checkpointing": {"partition_activations":
                  false, "contiguous_memory_optimization": true,
                  "number_checkpoints": 12, "profile": false})")).remat;
  EXPECT_EQ(r.policy, "deepspeed");
  EXPECT_TRUE(r.perLayer);
  EXPECT_HAS(trainError(ds(R"("activation_checkpointing":
                              {"cpu_checkpointing": true})")),
             "activation_checkpointing.cpu_checkpointing: true is not "
             "supported yet (offloading");
  EXPECT_HAS(trainError(ds(R"("activation_checkpointing":
                              {"number_checkpoints": 0})")),
             "activation_checkpointing.number_checkpoints: 0 is not allowed");
  // dsc.remat.
  r = train(ds(R"("dsc": {"remat": {"memory_budget_bytes": 12737225984,
                  "recompute_cheap": false}})")).remat;
  EXPECT_EQ(r.policy, "budget");
  EXPECT_EQ(r.memoryBudgetBytes, 12737225984);
  EXPECT_FALSE(r.recomputeCheap);
  EXPECT_EQ(train(ds(R"("dsc": {"remat": {"policy": "deepspeed"}})"))
                .remat.policy,
            "deepspeed");
  EXPECT_HAS(trainError(ds(R"("dsc": {"remat": {"policy": "budget"}})")),
             "dsc.remat.policy: \"budget\" needs "
             "dsc.remat.memory_budget_bytes");
  EXPECT_HAS(trainError(ds(R"("dsc": {"remat": {"policy": "all"}})")),
             "dsc.remat.policy: \"all\" is not allowed");
  EXPECT_HAS(trainError(ds(R"("dsc": {"remat": {"memory_budget_bytes": 0}})")),
             "dsc.remat.memory_budget_bytes: 0 is not allowed");
  EXPECT_HAS(trainError(ds(R"("dsc": {"remat": {"policy": "none",
                  "memory_budget_bytes": 5}})")),
             "only used by policy \"budget\"");
  EXPECT_HAS(trainError(ds(R"("dsc": {"remat": {"policy": "budget",
                  "memory_budget_bytes": 5}}, "transformer_kernel":
                  {"gelu_checkpoint": true})")),
             "dsc.remat.policy: \"budget\" conflicts with");
  EXPECT_HAS(trainError(ds(R"("dsc": {"remat": {"budget": 5}})")),
             "dsc.remat.budget");
}

TEST(TrainConfig, TransformerKernel) {
  TrainConfig t = train(ds(""));
  EXPECT_FALSE(t.kernel.normalizeInvertible);
  t = train(ds(R"("transformer_kernel": {"normalize_invertible": true,
                  "stochastic_mode": false})"));
  EXPECT_TRUE(t.kernel.normalizeInvertible);
  EXPECT_HAS(trainError(ds(R"("transformer_kernel":
                              {"stochastic_mode": true})")),
             "transformer_kernel.stochastic_mode: true is not supported");
  EXPECT_HAS(trainError(ds(R"("transformer_kernel":
                              {"normalize_invertible": "yes"})")),
             "transformer_kernel.normalize_invertible");
}

TEST(TrainConfig, MalformedAndDuplicate) {
  EXPECT_HAS(trainError("{\"train_batch_size\": 8,,}"),
             "ds.json: malformed JSON: parse error at line 1");
  EXPECT_HAS(trainError(R"({"train_micro_batch_size_per_gpu": 2,
      "optimizer": {"type": "AdamW", "params": {"lr": 1, "lr": 2}}})"),
             "ds.json: optimizer.params.lr: duplicate key");
  // Paths through arrays and back out of nested objects.
  EXPECT_HAS(trainError(R"({"optimizer": {"params": {"betas": [{"x": 1, "x": 2}]}}})"),
             "ds.json: optimizer.params.betas[].x: duplicate key");
  EXPECT_HAS(trainError(R"({"optimizer": {"params": {"lr": 1}, "type": "Adam"},
      "dsc": {"seed": 1}, "optimizer": {}})"),
             "ds.json: optimizer: duplicate key");
}

//===----------------------------------------------------------------------===//
// Cross-checks
//===----------------------------------------------------------------------===//

TEST(ValidateConfigs, SeqLenAndMaskToken) {
  ModelConfig gpt2 = parseModelConfigText(
      R"({"model_type": "gpt2", "n_positions": 64})", "m");
  TrainConfig t = train(ds(R"("dsc": {"seq_len": 64})"));
  validateConfigs(gpt2, t);
  t.seqLen = 65;
  EXPECT_EQ(errorOf([&] { validateConfigs(gpt2, t); }),
            "dsc.seq_len (65) exceeds the model's n_positions (64)");

  ModelConfig bert = parseModelConfigText(
      R"({"model_type": "bert", "vocab_size": 100})", "m");
  t = train(ds(""));
  EXPECT_HAS(errorOf([&] { validateConfigs(bert, t); }),
             "dsc.mask_token_id is not set and the default 103");
  t.maskTokenId = 100;
  EXPECT_HAS(errorOf([&] { validateConfigs(bert, t); }),
             "dsc.mask_token_id (100) must be less than the model's "
             "vocab_size (100)");
  t.maskTokenId = 99;
  validateConfigs(bert, t);
  t.seqLen = 513;
  EXPECT_HAS(errorOf([&] { validateConfigs(bert, t); }),
             "exceeds the model's max_position_embeddings (512)");
  // bert-base: the default [MASK] id 103 is inside the vocabulary.
  bert = parseModelConfigText(R"({"model_type": "bert"})", "m");
  validateConfigs(bert, train(ds("")));
}

//===----------------------------------------------------------------------===//
// Shipped examples
//===----------------------------------------------------------------------===//

TEST(Examples, Parse) {
  std::string dir = examplesDir();
  ModelConfig g = parseModelConfig(dir + "/gpt2-tiny.json");
  EXPECT_EQ(g.type, ModelType::GPT2);
  EXPECT_EQ(g.vocabSize, 256);
  EXPECT_EQ(g.maxPositions, 64);
  EXPECT_EQ(g.hidden, 64);
  EXPECT_EQ(g.numLayers, 2);
  EXPECT_EQ(g.numHeads, 4);
  EXPECT_EQ(g.intermediate, 256);
  EXPECT_DOUBLE_EQ(g.embdDropout + g.residDropout + g.attnDropout, 0.0);

  ModelConfig b = parseModelConfig(dir + "/bert-tiny.json");
  EXPECT_EQ(b.type, ModelType::BERT);
  EXPECT_EQ(b.vocabSize, 256);

  ModelConfig small = parseModelConfig(dir + "/gpt2-small.json");
  EXPECT_EQ(small.vocabSize, 50257);
  EXPECT_EQ(small.hidden, 768);
  EXPECT_EQ(small.gelu, GeluApprox::Tanh);
  ModelConfig base = parseModelConfig(dir + "/bert-base.json");
  EXPECT_EQ(base.vocabSize, 30522);
  EXPECT_EQ(base.gelu, GeluApprox::Erf);
  EXPECT_DOUBLE_EQ(base.layerNormEps, 1e-12);

  TrainConfig t = parseTrainConfig(dir + "/ds_config.json");
  EXPECT_EQ(t.optimizer.type, OptimizerType::AdamW);
  EXPECT_DOUBLE_EQ(t.optimizer.lr, 1e-3);
  EXPECT_EQ(t.scheduler.type, SchedulerType::WarmupLR);
  EXPECT_EQ(t.microBatch, 8);
  EXPECT_EQ(t.gradAccum, 1);
  EXPECT_DOUBLE_EQ(t.gradClip, 1.0);
  validateConfigs(g, t);
  validateConfigs(small, t);

  TrainConfig tb = parseTrainConfig(dir + "/ds_config_bert.json");
  EXPECT_GE(tb.maskTokenId, 0);
  EXPECT_LT(tb.maskTokenId, b.vocabSize);
  validateConfigs(b, tb);
  validateConfigs(base, tb);
}

} // namespace

TEST(TrainConfig, MixedPrecision) {
  TrainConfig d = train(ds(R"("fp16": {"enabled": true})"));
  EXPECT_TRUE(d.precision.fp16);
  EXPECT_FALSE(d.precision.bf16);
  // DeepSpeed's defaults.
  EXPECT_EQ(d.precision.lossScale, 0.0);
  EXPECT_EQ(d.precision.initialScalePower, 16);
  EXPECT_EQ(d.precision.lossScaleWindow, 1000);
  EXPECT_EQ(d.precision.hysteresis, 2);
  EXPECT_EQ(d.precision.minLossScale, 1.0);
  EXPECT_FALSE(d.precision.consecutiveHysteresis);
  TrainConfig t = train(ds(R"("fp16": {"enabled": true, "loss_scale": 128,
      "initial_scale_power": 20, "loss_scale_window": 50, "hysteresis": 4,
      "min_loss_scale": 0.5, "consecutive_hysteresis": true})"));
  EXPECT_EQ(t.precision.lossScale, 128.0);
  EXPECT_EQ(t.precision.initialScalePower, 20);
  EXPECT_EQ(t.precision.lossScaleWindow, 50);
  EXPECT_EQ(t.precision.hysteresis, 4);
  EXPECT_EQ(t.precision.minLossScale, 0.5);
  EXPECT_TRUE(t.precision.consecutiveHysteresis);
  EXPECT_TRUE(train(ds(R"("bf16": {"enabled": true})")).precision.bf16);
  EXPECT_TRUE(train(ds(R"("bfloat16": {"enabled": true})")).precision.bf16);
  // Both names at once: refused whatever the key order (DeepSpeed would
  // read bf16; a key-order choice was silently wrong before).
  EXPECT_HAS(trainError(ds(R"("bfloat16": {"enabled": true}, "bf16": {"enabled": false})")),
             "bf16 and bfloat16 are the same section under two names");
  EXPECT_FALSE(train(ds(R"("fp16": {"enabled": false})")).precision.fp16);
  EXPECT_HAS(trainError(ds(R"("fp16": {"enabled": true}, "bf16": {"enabled": true})")),
             "fp16.enabled and bf16.enabled cannot both be true");
  EXPECT_HAS(trainError(ds(R"("fp16": {"enabled": true, "hysteresis": 0})")),
             "fp16.hysteresis");
  EXPECT_HAS(trainError(ds(R"("fp16": {"enabled": true, "min_loss_scale": 0})")),
             "fp16.min_loss_scale");
  EXPECT_HAS(trainError(ds(R"("fp16": {"enabled": true, "loss_scale": -1})")),
             "fp16.loss_scale");
  EXPECT_HAS(trainError(ds(R"("fp16": {"enabled": true, "initial_scale_power": 101})")),
             "fp16.initial_scale_power");
  EXPECT_HAS(trainError(ds(R"("fp16": {"enabled": true, "auto_cast": true})")),
             "fp16.auto_cast: true is not supported by dsc");
  EXPECT_HAS(trainError(ds(R"("fp16": {"enabled": "yes"})")), "fp16.enabled");
}

//===----------------------------------------------------------------------===//
// LLaMA family
//===----------------------------------------------------------------------===//

TEST(ModelConfig, LlamaDefaultsAreTransformers) {
  ModelConfig m = parseModelConfigText(R"({"model_type": "llama"})", "m");
  EXPECT_EQ(m.type, ModelType::LLaMA);
  EXPECT_EQ(m.typeName, "llama");
  EXPECT_EQ(m.vocabSize, 32000);
  EXPECT_EQ(m.hidden, 4096);
  EXPECT_EQ(m.intermediate, 11008);
  EXPECT_EQ(m.numHeads, 32);
  EXPECT_EQ(m.numKvHeads, 32); // null: as many as query heads
  EXPECT_EQ(m.headDim, 128);
  EXPECT_EQ(m.layerNormEps, 1e-6);
  EXPECT_FALSE(m.tieEmbeddings);
  EXPECT_FALSE(m.qkvBias || m.outBias || m.mlpBias);
  EXPECT_EQ(m.rope.theta, 10000.0);
  EXPECT_EQ(m.rope.scaling, RopeScaling::None);
  EXPECT_EQ(m.attnDropout, 0.0);
}

TEST(ModelConfig, LlamaKeys) {
  ModelConfig m = parseModelConfigText(R"({
    "model_type": "llama", "vocab_size": 97, "hidden_size": 46,
    "intermediate_size": 70, "num_hidden_layers": 3,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 12,
    "hidden_act": "silu", "max_position_embeddings": 64,
    "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
    "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
                     "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 16},
    "attention_bias": true, "mlp_bias": true, "tie_word_embeddings": true,
    "attention_dropout": 0.1, "pretraining_tp": 1,
    "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "bfloat16",
    "architectures": ["LlamaForCausalLM"]})",
                                       "m");
  EXPECT_EQ(m.numKvHeads, 2);
  EXPECT_EQ(m.headDim, 12);
  EXPECT_EQ(m.attentionWidth(), 48);
  EXPECT_TRUE(m.qkvBias && m.outBias && m.mlpBias && m.tieEmbeddings);
  EXPECT_EQ(m.rope.scaling, RopeScaling::Llama3);
  EXPECT_EQ(m.rope.factor, 8.0);
  EXPECT_EQ(m.rope.originalMaxPositions, 16);
  EXPECT_EQ(m.attnDropout, 0.1);
}

TEST(ModelConfig, Qwen2AndMistral) {
  ModelConfig q = parseModelConfigText(
      R"({"model_type": "qwen2", "use_sliding_window": false,
          "sliding_window": 4096, "max_window_layers": 28,
          "rope_scaling": {"type": "linear", "factor": 2.0}})",
      "m");
  EXPECT_EQ(q.typeName, "qwen2");
  EXPECT_TRUE(q.qkvBias);
  EXPECT_FALSE(q.outBias || q.mlpBias);
  EXPECT_EQ(q.slidingWindow, 0);
  EXPECT_EQ(q.rope.scaling, RopeScaling::Linear);
  EXPECT_EQ(q.rope.factor, 2.0);
  ModelConfig m = parseModelConfigText(
      R"({"model_type": "mistral", "sliding_window": null})", "m");
  EXPECT_EQ(m.numKvHeads, 8);
  EXPECT_EQ(m.slidingWindow, 0);
  EXPECT_FALSE(m.qkvBias);
}

TEST(ModelConfig, Qwen3) {
  // Qwen3Config's defaults: head_dim 128, no biases, untied; q_norm and
  // k_norm on every layer; the sliding window only with use_sliding_window.
  ModelConfig m = parseModelConfigText(
      R"({"model_type": "qwen3", "hidden_size": 2048,
          "num_attention_heads": 16, "num_key_value_heads": 8,
          "sliding_window": null, "use_sliding_window": false,
          "max_window_layers": 28, "layer_types": ["full_attention"],
          "architectures": ["Qwen3ForCausalLM"]})",
      "m.json");
  EXPECT_EQ(m.type, ModelType::LLaMA);
  EXPECT_EQ(m.typeName, "qwen3");
  EXPECT_EQ(m.headDim, 128);
  EXPECT_EQ(m.attentionWidth(), 16 * 128);
  EXPECT_EQ(m.vocabSize, 151936);
  EXPECT_EQ(m.maxPositions, 32768);
  EXPECT_TRUE(m.qkNorm);
  EXPECT_FALSE(m.qkvBias || m.outBias || m.mlpBias || m.tieEmbeddings);
  EXPECT_EQ(m.slidingWindow, 0);
  EXPECT_TRUE(m.notes.empty());
  m = parseModelConfigText(
      R"({"model_type": "qwen3", "attention_bias": true, "head_dim": null,
          "hidden_size": 64, "num_attention_heads": 4,
          "sliding_window": 4096})",
      "m.json");
  EXPECT_TRUE(m.qkvBias && m.outBias);
  EXPECT_FALSE(m.mlpBias);
  EXPECT_EQ(m.headDim, 16);
  EXPECT_EQ(m.slidingWindow, 0);
  // pretraining_tp is not a Qwen3Config key: kept unread, so noted.
  m = parseModelConfigText(R"({"model_type": "qwen3", "pretraining_tp": 1})",
                           "m.json");
  ASSERT_EQ(m.notes.size(), 1u);
  EXPECT_NE(m.notes[0].find("pretraining_tp: not a key of transformers' "
                            "qwen3 configuration"),
            std::string::npos);
  // A config without model_type takes it from the model class.
  EXPECT_EQ(parseModelConfigText(R"({"architectures": ["Qwen3ForCausalLM"]})",
                                 "m.json")
                .typeName,
            "qwen3");
  // Other model types have no q/k norms.
  EXPECT_FALSE(
      parseModelConfigText(R"({"model_type": "qwen2"})", "m.json").qkNorm);
}

TEST(ModelConfig, Qwen3ErrorsNameTheKey) {
  EXPECT_HAS(
      modelError(R"({"model_type": "qwen3", "use_sliding_window": true})"),
      "m.json: use_sliding_window: true is not supported; dsc attends "
      "to the whole sequence");
  EXPECT_HAS(modelError(R"({"model_type": "qwen3", "head_dim": 0})"),
             "m.json: head_dim: 0 is not allowed");
  EXPECT_HAS(modelError(R"({"model_type": "qwen3", "head_dim": -64})"),
             "m.json: head_dim: -64 is not allowed");
  EXPECT_HAS(modelError(R"({"model_type": "qwen3", "head_dim": 127})"),
             "head_dim (127) must be even");
  EXPECT_HAS(modelError(R"({"model_type": "qwen3", "num_attention_heads": 16,
                            "num_key_value_heads": 6})"),
             "num_attention_heads (16) must be divisible by "
             "num_key_value_heads (6)");
  EXPECT_HAS(modelError(R"({"model_type": "qwen3", "mlp_bias": true})"),
             "unknown key 'mlp_bias' in model config: a key of llama");
  EXPECT_HAS(modelError(R"({"model_type": "qwen3", "architectures":
                            ["Qwen2ForCausalLM"]})"),
             "for model_type \"qwen3\" dsc builds Qwen3ForCausalLM");
  EXPECT_HAS(modelError(R"({"model_type": "qwen3",
                            "rope_scaling": {"rope_type": "yarn", "factor": 4}})"),
             "rope_scaling.rope_type: \"yarn\" is not supported");
  EXPECT_HAS(modelError(R"({"model_type": "qwen3_moe", "num_experts": 4,
                            "num_experts_per_tok": 5})"),
             "num_experts_per_tok (5) exceeds num_experts (4)");
}

TEST(ModelConfig, Qwen3MoeDefaults) {
  // Qwen3MoeConfig (transformers 4.51): 128 experts of 768, top-8,
  // unnormalised, no shared expert; Qwen3's per-head q/k norms with
  // head_dim null (hidden_size / heads, not Qwen3Config's 128).
  ModelConfig m = parseModelConfigText(R"({"model_type": "qwen3_moe"})", "m.json");
  EXPECT_EQ(m.numExperts, 128);
  EXPECT_EQ(m.expertsPerToken, 8);
  EXPECT_EQ(m.expertIntermediate, 768);
  EXPECT_EQ(m.sharedExpertIntermediate, 0);
  EXPECT_FALSE(m.normTopk);
  EXPECT_TRUE(m.qkNorm);
  EXPECT_FALSE(m.qkvBias);
  EXPECT_EQ(m.headDim, 2048 / 32);
  EXPECT_EQ(m.numKvHeads, 4);
  EXPECT_EQ(m.numMoeLayers(), 24);
  ModelConfig q2 = parseModelConfigText(
      R"({"model_type": "qwen2_moe", "num_hidden_layers": 4,
          "decoder_sparse_step": 2, "mlp_only_layers": [3]})", "m.json");
  EXPECT_TRUE(q2.qkvBias);
  EXPECT_EQ(q2.sharedExpertIntermediate, 5632);
  EXPECT_FALSE(q2.isMoeLayer(0));
  EXPECT_TRUE(q2.isMoeLayer(1));
  EXPECT_FALSE(q2.isMoeLayer(3)); // listed in mlp_only_layers
  EXPECT_EQ(q2.numMoeLayers(), 1);
}

TEST(ModelConfig, Gemma) {
  // GemmaConfig's defaults: head_dim 256, a tied head, the LLaMA graph
  // with scaled embeddings, (1 + weight) RMSNorms and a GELU gate.
  ModelConfig m = parseModelConfigText(
      R"({"model_type": "gemma", "hidden_size": 64, "num_attention_heads": 2,
          "hidden_act": "gelu"})",
      "m.json");
  EXPECT_EQ(m.type, ModelType::LLaMA);
  EXPECT_EQ(m.headDim, 256);
  EXPECT_EQ(m.numKvHeads, 2);
  EXPECT_TRUE(m.tieEmbeddings);
  EXPECT_TRUE(m.embedScale && m.normPlusOne && m.geluMlp);
  EXPECT_EQ(m.gelu, GeluApprox::Tanh); // hidden_act is not read
  ASSERT_EQ(m.notes.size(), 1u);
  EXPECT_EQ(m.notes[0].rfind("model config: hidden_act \"gelu\" is not "
                             "read",
                             0),
            0u);
  m = parseModelConfigText(
      R"({"model_type": "gemma", "hidden_activation": "gelu"})", "m.json");
  EXPECT_EQ(m.gelu, GeluApprox::Erf);
  EXPECT_TRUE(m.notes.empty());
  EXPECT_HAS(modelError(R"({"model_type": "gemma", "rope_scaling":
                            {"rope_type": "linear", "factor": 2.0}})"),
             "rope_scaling: {\"factor\":2.0,\"rope_type\":\"linear\"} is not "
             "supported for model_type \"gemma\"");
  EXPECT_HAS(modelError(R"({"model_type": "gemma", "mlp_bias": true})"),
             "unknown key 'mlp_bias' in model config: a key of llama");
  EXPECT_HAS(modelError(R"({"model_type": "gemma", "architectures":
                            ["LlamaForCausalLM"]})"),
             "for model_type \"gemma\" dsc builds GemmaForCausalLM");
  // Other model types keep the LLaMA graph.
  m = parseModelConfigText(R"({"model_type": "llama"})", "m.json");
  EXPECT_FALSE(m.embedScale || m.normPlusOne || m.geluMlp);
}

TEST(ModelConfig, LlamaErrorsNameTheKey) {
  EXPECT_HAS(modelError(R"({"model_type": "llama", "hidden_act": "gelu"})"),
             "hidden_act: \"gelu\" is not supported; expected \"silu\"");
  EXPECT_HAS(modelError(R"({"model_type": "llama",
                            "rope_scaling": {"rope_type": "yarn", "factor": 4}})"),
             "rope_scaling.rope_type: \"yarn\" is not supported");
  EXPECT_HAS(modelError(R"({"model_type": "llama",
                            "rope_scaling": {"rope_type": "linear"}})"),
             "rope_scaling.factor: missing");
  EXPECT_HAS(modelError(R"({"model_type": "llama",
                            "rope_scaling": {"rope_type": "linear", "factor": 2,
                                             "low_freq_factor": 1}})"),
             "rope_scaling.low_freq_factor: unknown key");
  EXPECT_HAS(modelError(R"({"model_type": "llama",
                            "rope_scaling": {"rope_type": "llama3", "factor": 8,
                              "low_freq_factor": 4, "high_freq_factor": 1,
                              "original_max_position_embeddings": 8192}})"),
             "rope_scaling.high_freq_factor (1) must be greater than "
             "low_freq_factor (4)");
  EXPECT_HAS(modelError(R"({"model_type": "llama", "num_attention_heads": 6,
                            "num_key_value_heads": 4, "hidden_size": 48})"),
             "num_attention_heads (6) must be divisible by "
             "num_key_value_heads (4)");
  EXPECT_HAS(modelError(R"({"model_type": "llama", "hidden_size": 45,
                            "num_attention_heads": 5})"),
             "head_dim (9) must be even");
  EXPECT_HAS(modelError(R"({"model_type": "qwen2", "use_sliding_window": true})"),
             "use_sliding_window: true is not supported");
  // attention_bias is LlamaConfig's; Qwen2 fixes its biases.
  EXPECT_HAS(modelError(R"({"model_type": "qwen2", "attention_bias": true})"),
             "unknown key 'attention_bias'");
  EXPECT_HAS(modelError(R"({"model_type": "llama", "rope_theta": 0.5})"),
             "rope_theta: 0.5 is not allowed");
  EXPECT_HAS(modelError(R"({"model_type": "falcon"})"),
             "model_type: \"falcon\" is not supported");
}

TEST(ModelConfig, SlidingWindowShorterThanSequenceIsRefused) {
  ModelConfig m = parseModelConfigText(
      R"({"model_type": "mistral", "sliding_window": 16,
          "max_position_embeddings": 64, "hidden_size": 64,
          "num_attention_heads": 4, "num_key_value_heads": 2,
          "num_hidden_layers": 1, "vocab_size": 100,
          "intermediate_size": 128})",
      "m");
  TrainConfig t = train(ds("\"dsc\": {\"seq_len\": 32}"));
  EXPECT_HAS(errorOf([&] { validateConfigs(m, t); }),
             "sliding_window (16) is shorter than the sequence (32)");
  t = train(ds("\"dsc\": {\"seq_len\": 16}"));
  validateConfigs(m, t);
}

TEST(LoraConfig, Section) {
  TrainConfig t = train(ds(R"("lora": {"r": 16, "lora_alpha": 32,
      "lora_dropout": 0.05, "target_modules": ["q_proj", "v_proj"],
      "bias": "lora_only", "use_rslora": true, "task_type": "CAUSAL_LM"})"));
  EXPECT_TRUE(t.lora.enabled);
  EXPECT_EQ(t.lora.rank, 16);
  EXPECT_EQ(t.lora.alpha, 32.0);
  EXPECT_EQ(t.lora.dropout, 0.05);
  EXPECT_EQ(t.lora.targetModules,
            (std::vector<std::string>{"q_proj", "v_proj"}));
  EXPECT_EQ(t.lora.bias, "lora_only");
  EXPECT_TRUE(t.lora.useRslora);
  // PEFT's defaults: r 8, lora_alpha 8, target_modules by model type.
  TrainConfig d = train(ds(R"("lora": {})"));
  EXPECT_TRUE(d.lora.enabled);
  EXPECT_EQ(d.lora.rank, 8);
  EXPECT_EQ(d.lora.alpha, 8.0);
  EXPECT_TRUE(d.lora.targetModules.empty());
  EXPECT_EQ(defaultLoraTargets(ModelType::LLaMA),
            (std::vector<std::string>{"q_proj", "v_proj"}));
  EXPECT_EQ(defaultLoraTargets(ModelType::GPT2),
            (std::vector<std::string>{"c_attn"}));
  EXPECT_FALSE(train(ds("")).lora.enabled);
  // A string is PEFT's regex form, except "all-linear".
  EXPECT_EQ(train(ds(R"("lora": {"target_modules": ".*proj"})")).lora.targetRegex,
            ".*proj");
  EXPECT_EQ(train(ds(R"("lora": {"target_modules": "all-linear"})"))
                .lora.targetModules,
            (std::vector<std::string>{"all-linear"}));
}

TEST(LoraConfig, Errors) {
  EXPECT_EQ(trainError(ds(R"("lora": {"r": 0})")),
            "ds.json: lora.r: 0 is not allowed; expected an integer in [1, 65536]");
  EXPECT_EQ(trainError(ds(R"("lora": {"lora_alpha": -1})")),
            "ds.json: lora.lora_alpha: -1 is not allowed; expected a number > 0");
  EXPECT_EQ(trainError(ds(R"("lora": {"lora_dropout": 1.0})")),
            "ds.json: lora.lora_dropout: 1.0 is not allowed; expected a number in [0, 1)");
  EXPECT_EQ(trainError(ds(R"("lora": {"bias": "some"})")),
            "ds.json: lora.bias: \"some\" is not allowed; expected \"none\", "
            "\"all\" or \"lora_only\"");
  EXPECT_EQ(trainError(ds(R"("lora": {"target_modules": []})")),
            "ds.json: lora.target_modules: [] is not allowed; expected a list "
            "of module names, \"all-linear\" or a regular expression");
  EXPECT_EQ(trainError(ds(R"("lora": {"use_dora": true})")),
            "ds.json: lora.use_dora: true is not supported (dsc implements "
            "plain LoRA on the targeted linear layers)");
  EXPECT_EQ(trainError(ds(R"("lora": {"modules_to_save": ["lm_head"]})")),
            "ds.json: lora.modules_to_save: [\"lm_head\"] is not supported "
            "(dsc implements plain LoRA on the targeted linear layers)");
  EXPECT_EQ(trainError(ds(R"("lora": {"init_lora_weights": "gaussian"})")),
            "ds.json: lora.init_lora_weights: only PEFT's default "
            "initialisation (true) is supported");
  EXPECT_EQ(trainError(ds(R"("lora": {"peft_type": "IA3"})")),
            "ds.json: lora.peft_type: \"IA3\" is not allowed; expected \"LORA\"");
  EXPECT_NE(trainError(ds(R"("lora": {"rank": 4})"))
                .find("ds.json: lora.rank: unknown key"),
            std::string::npos);
  // PEFT's defaults of what dsc does not do are accepted.
  EXPECT_TRUE(train(ds(R"("lora": {"use_dora": false, "modules_to_save": null,
      "rank_pattern": {}, "layers_to_transform": null})")).lora.enabled);
}

TEST(LoraConfig, AdapterConfigFile) {
  LoraConfig l = parseAdapterConfigText(
      R"({"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": 4,
          "lora_alpha": 16, "target_modules": ["v_proj", "q_proj"],
          "base_model_name_or_path": "meta-llama/Llama-3.2-1B",
          "revision": null, "inference_mode": true, "fan_in_fan_out": false})",
      "adapter_config.json");
  EXPECT_EQ(l.rank, 4);
  EXPECT_EQ(l.alpha, 16.0);
  EXPECT_EQ(l.targetModules, (std::vector<std::string>{"v_proj", "q_proj"}));
  EXPECT_EQ(errorOf([] {
              parseAdapterConfigText(R"({"r": 4})", "adapter_config.json");
            }),
            "adapter_config.json: peft_type: missing; expected \"LORA\" (a "
            "PEFT adapter_config.json)");
  EXPECT_EQ(errorOf([] {
              parseAdapterConfigText(R"({"peft_type": "LORA", "r": "4"})",
                                     "adapter_config.json");
            }),
            "adapter_config.json: r: \"4\" is not allowed; expected an "
            "integer in [1, 65536]");
}

//===----------------------------------------------------------------------===//
// Users' DeepSpeed configs as they are (issue 38)
//===----------------------------------------------------------------------===//

bool hasNote(const TrainConfig &t, const std::string &part) {
  for (const std::string &n : t.notes)
    if (n.find(part) != std::string::npos)
      return true;
  return false;
}

TEST(DeepSpeedCompat, WholeFloatsAreIntegers) {
  TrainConfig t = train(R"({"train_batch_size": 8e0,
      "zero_optimization": {"stage": 2, "reduce_bucket_size": 5e8,
                            "allgather_bucket_size": 2e8}})");
  EXPECT_EQ(t.trainBatchSize, 8);
  EXPECT_EQ(t.reduceBucketSize, 500000000);
  EXPECT_EQ(t.allgatherBucketSize, 200000000);
  EXPECT_NE(t.resolvedJson.find("\"reduce_bucket_size\": 500000000"),
            std::string::npos);
  EXPECT_EQ(trainError(R"({"train_batch_size": 8,
      "zero_optimization": {"reduce_bucket_size": 5.5e0}})"),
            "ds.json: zero_optimization.reduce_bucket_size: 5.5e0 is not "
            "allowed; expected an integer >= 0");
  EXPECT_HAS(trainError(R"({"train_batch_size": 1e400})"), "malformed JSON");
}

TEST(DeepSpeedCompat, AutoAsTheHfTrainer) {
  ModelConfig m = parseModelConfigText(
      R"({"model_type": "gpt2", "n_embd": 64, "n_head": 2, "n_layer": 1,
          "torch_dtype": "bfloat16"})", "m.json");
  TrainConfigInputs in;
  in.worldSize = 4;
  in.model = &m;
  in.steps = 100;
  TrainConfig t = parseTrainConfigText(R"({
      "train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto",
      "gradient_accumulation_steps": "auto", "gradient_clipping": "auto",
      "optimizer": {"type": "AdamW", "params": {"lr": 3e-4, "betas": "auto",
                    "eps": "auto", "weight_decay": "auto"}},
      "scheduler": {"type": "WarmupDecayLR", "params": {
          "warmup_min_lr": "auto", "warmup_max_lr": "auto",
          "warmup_num_steps": "auto", "total_num_steps": "auto"}},
      "bf16": {"enabled": "auto"}, "fp16": {"enabled": "auto"},
      "zero_optimization": {"stage": 3, "reduce_bucket_size": "auto",
          "stage3_prefetch_bucket_size": "auto",
          "stage3_param_persistence_threshold": "auto"}})",
                                       "ds.json", in);
  EXPECT_EQ(t.microBatch, 8);
  EXPECT_EQ(t.gradAccum, 1);
  EXPECT_EQ(t.trainBatchSize, 32);
  EXPECT_EQ(t.gradClip, 1.0);
  EXPECT_EQ(t.optimizer.lr, 3e-4);
  EXPECT_EQ(t.optimizer.eps, 1e-8);
  EXPECT_EQ(t.scheduler.warmupMaxLr, 3e-4);
  EXPECT_EQ(t.scheduler.totalNumSteps, 100);
  EXPECT_TRUE(t.precision.bf16);
  EXPECT_FALSE(t.precision.fp16);
  EXPECT_EQ(t.reduceBucketSize, 64 * 64);
  EXPECT_EQ(t.zeroPersistenceThreshold, 640);
  EXPECT_TRUE(hasNote(t, "ds_config: train_batch_size \"auto\" -> 32 (world "
                         "size 4 x micro-batch 8 x accumulation 1"));
  EXPECT_TRUE(hasNote(t, "stage3_prefetch_bucket_size \"auto\" -> 3686 "));
  EXPECT_TRUE(hasNote(t, "bf16.enabled \"auto\" -> true (the model config's "
                         "dtype is \"bfloat16\""));
  // Without the step count or the model, those keys alone are refused.
  EXPECT_HAS(trainError(R"({"train_batch_size": 8, "scheduler": {"type":
      "WarmupDecayLR", "params": {"total_num_steps": "auto"}}})"),
             "scheduler.params.total_num_steps: \"auto\" is the run's number "
             "of steps");
  EXPECT_HAS(trainError(R"({"train_batch_size": 8, "zero_optimization":
      {"reduce_bucket_size": "auto"}})"),
             "zero_optimization.reduce_bucket_size: \"auto\" is computed from "
             "the model's hidden_size");
}

TEST(DeepSpeedCompat, KeyTable) {
  TrainConfig t = train(R"({"train_batch_size": 8,
      "zero_allow_untested_optimizer": true, "prescale_gradients": false,
      "data_types": {"grad_accum_dtype": "fp32"},
      "bf16": {"enabled": true, "loss_scale": 0, "initial_scale_power": 16},
      "tensorboard": {"enabled": false, "output_path": "x"},
      "zero_optimization": {"stage": 3, "max_live_parameters": 1e9,
          "gather_16bit_weights_on_model_save": true,
          "offload_optimizer": {"device": "none"}}})");
  EXPECT_TRUE(hasNote(t, "zero_allow_untested_optimizer: accepted; no effect "
                         "in dsc:"));
  EXPECT_TRUE(hasNote(t, "bf16.loss_scale: accepted; no effect in dsc: "
                         "DeepSpeed's bf16 mode does not scale the loss"));
  EXPECT_TRUE(hasNote(t, "zero_optimization.max_live_parameters: accepted"));
  EXPECT_FALSE(hasNote(t, "tensorboard"));
  // prescale_gradients moves the mean's division; refused where DeepSpeed
  // refuses it (ZeRO-2/3 with reduce_scatter).
  EXPECT_TRUE(hasNote(train(R"({"train_batch_size": 8,
      "prescale_gradients": true, "gradient_predivide_factor": 4})",
                            2),
                      "prescale_gradients: accepted; no effect in dsc"));
  EXPECT_EQ(trainError(R"({"train_batch_size": 8, "gradient_predivide_factor":
      2.0, "zero_optimization": {"stage": 3}})",
                       2),
            "ds.json: gradient_predivide_factor: 2.0 with "
            "zero_optimization.stage 3 and reduce_scatter true is refused by "
            "DeepSpeed (\"gradient_predivide_factor != 1.0 is not yet "
            "supported with ZeRO-3 with reduce scatter enabled\"); set "
            "reduce_scatter false or drop it");
  EXPECT_HAS(trainError(R"({"train_batch_size": 8,
      "wandb": {"enabled": true, "project": "p"}})"),
             "ds.json: wandb.enabled: true is not supported by dsc: sending "
             "training metrics to this service");
  // torch.compile settings: dsc compiles the step itself.
  EXPECT_TRUE(hasNote(train(R"({"train_batch_size": 8,
      "compile": {"enabled": true, "backend": "inductor"}})"),
                      "compile.enabled: accepted; no effect in dsc: "
                      "torch.compile of the model"));
  EXPECT_HAS(trainError(R"({"train_batch_size": 8,
      "compile": {"offload_opt_states": true}})"),
             "compile.offload_opt_states: true is not supported by dsc");
  // Switched-off sections: keys checked; ignored ones noted where
  // DeepSpeed ignores them, unknown where it refuses them.
  EXPECT_HAS(trainError(R"({"train_batch_size": 8,
      "eigenvalue": {"enabled": false, "max_iter": "many"}})"),
             "eigenvalue.max_iter: \"many\" is not allowed; expected an "
             "integer");
  EXPECT_TRUE(hasNote(train(R"({"train_batch_size": 8,
      "elasticity": {"enabled": false, "note": 1}})"),
                      "elasticity.note: not a key of DeepSpeed's elasticity "
                      "section; ignored"));
  EXPECT_HAS(trainError(R"({"train_batch_size": 8,
      "wandb": {"enabled": false, "entity": "me"}})"),
             "wandb.entity: unknown key; allowed here: enabled, group, team, "
             "project");
  EXPECT_HAS(trainError(R"({"train_batch_size": 8,
      "data_types": {"grad_accum_dtype": "bf16"}})"),
             "data_types.grad_accum_dtype: \"bf16\" is not supported by dsc");
  EXPECT_HAS(trainError(R"({"train_batch_size": 8, "flops_profilr": {}})"),
             "flops_profilr: unknown key (did you mean 'flops_profiler'?)");
  // Every table path is unique, and every refusal says why.
  std::set<std::string> paths;
  for (const DeepSpeedKey &k : deepSpeedKeys()) {
    EXPECT_TRUE(paths.insert(k.path).second) << k.path;
    if (k.treatment != KeyTreatment::Implemented) {
      EXPECT_STRNE(k.why, "") << k.path;
    }
  }
}

TEST(DeepSpeedCompat, LossScaleRange) {
  // 1.8e308 is beyond a double: the JSON reader refuses it as malformed.
  EXPECT_HAS(trainError(ds(R"("fp16": {"loss_scale": 1.8e308})")),
             "number overflow parsing '1.8e308'");
  for (const char *v : {"1e39", "1.7e308", "-1", "-2.5e0"})
    EXPECT_HAS(trainError(ds(std::string(R"("fp16": {"enabled": true, "loss_scale": )") +
                             v + "}")),
               std::string("fp16.loss_scale: ") + v + " is not allowed");
  EXPECT_EQ(train(ds(R"("fp16": {"enabled": true, "loss_scale": 3e38})"))
                .precision.lossScale,
            3e38);
  EXPECT_HAS(trainError(ds(R"("fp16": {"enabled": true, "min_loss_scale": 1e39})")),
             "fp16.min_loss_scale: 1e39 is not allowed");
}

TEST(DeepSpeedCompat, ModelDtypeAndArchitectures) {
  EXPECT_EQ(parseModelConfigText(R"({"model_type": "gpt2", "dtype": "float16"})",
                                 "m.json").dtype, "float16");
  EXPECT_EQ(parseModelConfigText(
                R"({"model_type": "gpt2", "torch_dtype": "bfloat16",
                    "dtype": "bfloat16"})", "m.json").dtype, "bfloat16");
  EXPECT_HAS(modelError(R"({"model_type": "gpt2", "torch_dtype": "float32",
                            "dtype": "bfloat16"})"),
             "torch_dtype (\"float32\") and dtype (\"bfloat16\")");
  EXPECT_EQ(modelError(R"({"model_type": "bert",
                           "architectures": ["BertForSequenceClassification"]})"),
            "m.json: architectures: \"BertForSequenceClassification\" is not "
            "supported: for model_type \"bert\" dsc builds BertForMaskedLM "
            "(BertModel trains with that head)");
  parseModelConfigText(R"({"model_type": "bert", "architectures": ["BertModel"]})",
                       "m.json");
  EXPECT_HAS(modelError(R"({"model_type": "llama",
                            "architectures": ["LlamaForSequenceClassification"]})"),
             "\"LlamaForSequenceClassification\" is not supported");
}

// qgZ's nodes: a node of L ranks holds L / autotp_size consecutive data
// ranks (ranks number tensor-fastest); two hops only when the data axis
// spans several such nodes.
TEST(TrainConfig, QgzNodeRanksFollowTheRankLayout) {
  auto nodes = [](int64_t world, int64_t tensor, int64_t perNode, bool qgz) {
    TrainConfig t;
    t.worldSize = world;
    t.parallel.tensor = tensor;
    t.zeroQuantizedGradients = qgz;
    t.setNodeRanks(perNode);
    return t.qgzNodeRanks;
  };
  EXPECT_EQ(nodes(8, 1, 4, true), 4);  // 2 nodes of 4 data ranks
  EXPECT_EQ(nodes(16, 2, 4, true), 2); // 4 nodes of 2 data ranks
  EXPECT_EQ(nodes(8, 1, 8, true), 0);  // one node
  EXPECT_EQ(nodes(8, 2, 3, true), 0);  // a node splits a tensor group
  EXPECT_EQ(nodes(8, 1, 1, true), 0);  // one rank per node: one hop
  EXPECT_EQ(nodes(8, 1, 4, false), 0); // no qgZ
  TrainConfig t;
  t.worldSize = 8;
  t.zeroQuantizedGradients = true;
  t.setNodeRanks(4);
  EXPECT_EQ(t.dataInner(), 4);
}
