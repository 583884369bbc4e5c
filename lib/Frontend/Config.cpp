//===- Config.cpp - Model and training configuration parsing --------------===//
//
// Strict readers for a Hugging Face config.json (GPT-2, BERT) and a DeepSpeed
// ds_config.json subset plus the `dsc` section. Every error is a ConfigError
// with a one-line message "<origin>: <key path>: <what is wrong>".
//
// Decisions worth knowing (see also the comments at each place):
//  * Optimizer "Adam" follows DeepSpeed, not PyTorch: DeepSpeed builds Adam
//    with params.adam_w_mode defaulting to true, i.e. decoupled weight decay
//    (AdamW). A ds_config written for DeepSpeed must train the same here, so
//    type "Adam" resolves to OptimizerType::AdamW unless params.adam_w_mode is
//    false, which gives OptimizerType::Adam (torch.optim.Adam: L2 decay added
//    to the gradient). "AdamW" is always AdamW; "AdamW" with adam_w_mode false
//    is rejected as contradictory. The enum holds the resolved semantics.
//  * Batch sizes follow DeepSpeed: any two of train_batch_size,
//    train_micro_batch_size_per_gpu, gradient_accumulation_steps determine the
//    third; all three must satisfy tb = micro * accum * world size. Where
//    DeepSpeed would floor-divide and then fail its own assertion, we report
//    the indivisibility directly.
//  * warmup_num_steps is stored as max(2, value), as DeepSpeed's WarmupLR /
//    WarmupDecayLR / WarmupCosineLR do in their constructors, so a consumer
//    that implements DeepSpeed's formulas reproduces its learning rates.
//  * Hugging Face files carry bookkeeping keys that do not change the
//    architecture; they are accepted and ignored (lists below). Keys that do
//    change the architecture are accepted only at the value dsc implements
//    (e.g. scale_attn_weights must be true, is_decoder must be false).
//
//===----------------------------------------------------------------------===//

#include "dsc/Frontend/Config.h"
#include "dsc/Support/Files.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <optional>

namespace dsc {
namespace {

using json = nlohmann::json;

/// Largest value accepted for sizes (dimensions, batch sizes, steps): keeps
/// every product the compiler forms well inside int64.
constexpr int64_t kMaxSize = (int64_t(1) << 31) - 1;
// Model dimensions and layer counts: far above any real model, far below
// what would overflow the byte counts derived from them (or build IR until
// memory runs out).
constexpr int64_t kMaxDimension = int64_t(1) << 24;
constexpr int64_t kMaxLayers = 4096;
// What one training step may plan, all buffers together (4 PiB).
constexpr double kMaxStepBytes = double(int64_t(1) << 52);

std::string oneLine(std::string s) {
  for (char &c : s)
    if (c == '\n' || c == '\r' || c == '\t')
      c = ' ';
  return s;
}

/// A JSON value as the user wrote it, kept short and on one line.
std::string show(const json &v) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 64)
    s = s.substr(0, 60) + "...";
  return s;
}

std::string join(const std::vector<std::string> &names) {
  std::string out;
  for (const std::string &n : names)
    out += (out.empty() ? "" : ", ") + n;
  return out;
}

std::string path(const std::string &prefix, const std::string &key) {
  return prefix.empty() ? key : prefix + "." + key;
}

std::string lower(std::string s) {
  for (char &c : s)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

size_t editDistance(const std::string &a, const std::string &b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1,
                         diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

/// " (did you mean 'x'?)" when a known name is close to `key`.
std::string suggest(const std::string &key,
                    const std::vector<std::string> &known) {
  std::string best;
  size_t bestDist = 3; // accept distance <= 2
  for (const std::string &k : known) {
    size_t d = editDistance(lower(key), lower(k));
    if (d < bestDist) {
      bestDist = d;
      best = k;
    }
  }
  return best.empty() ? "" : " (did you mean '" + best + "'?)";
}

/// The text of every floating-point number of a JSON document, by key path
/// ("a.b", "a.b[1]"): messages quote a number as the user wrote it (5.5e0,
/// not 5.5). A second, SAX pass over a document parseStrictJson accepted.
class NumberTexts : public nlohmann::json_sax<json> {
public:
  explicit NumberTexts(std::map<std::string, std::string> &out) : out(out) {}
  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t &s) override {
    out[here()] = s;
    return value();
  }
  bool string(string_t &) override { return value(); }
  bool binary(binary_t &) override { return value(); }
  bool start_object(std::size_t) override {
    stack.push_back({true, "", 0});
    return true;
  }
  bool key(string_t &k) override {
    stack.back().key = k;
    return true;
  }
  bool end_object() override { return end(); }
  bool start_array(std::size_t) override {
    stack.push_back({false, "", 0});
    return true;
  }
  bool end_array() override { return end(); }
  bool parse_error(std::size_t, const std::string &,
                   const nlohmann::detail::exception &) override {
    return false;
  }

private:
  struct Level {
    bool object;
    std::string key;
    size_t index;
  };
  std::string here() const {
    std::string p;
    for (size_t i = 1; i < stack.size(); ++i) {
      const Level &l = stack[i - 1];
      if (l.object)
        p += (p.empty() ? "" : ".") + l.key;
      else
        p += "[" + std::to_string(l.index) + "]";
    }
    const Level &l = stack.back();
    return l.object ? (p.empty() ? "" : p + ".") + l.key
                    : p + "[" + std::to_string(l.index) + "]";
  }
  bool value() {
    if (!stack.empty() && !stack.back().object)
      ++stack.back().index;
    return true;
  }
  bool end() {
    stack.pop_back();
    return value();
  }
  std::map<std::string, std::string> &out;
  std::vector<Level> stack;
};

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

  /// "ds_config: <text>", once.
  void note(const std::string &text) const {
    const std::string line = "ds_config: " + text;
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
  std::map<std::string, std::string> numberTexts;
  /// Integer keys written as floats, by path: written as integers in the
  /// resolved config.
  mutable std::vector<std::pair<std::string, int64_t>> wholeFloats;
  mutable std::vector<std::string> notes;
};

/// Real configs are a few KiB and nest 3 levels; these bounds keep a hostile
/// file from costing more than a fraction of a second.
constexpr uint64_t kMaxConfigBytes = 16ull << 20; // 16 MiB
constexpr int kMaxConfigDepth = 64;

std::string readFile(const std::string &file) {
  try {
    return readRegularFile(file, kMaxConfigBytes, "a config file");
  } catch (const FileError &e) {
    throw ConfigError(oneLine(e.what()));
  }
}

/// Parses strict JSON (no comments, no NaN, at most kMaxConfigDepth levels)
/// and rejects duplicate keys, which nlohmann::json would otherwise resolve
/// silently (last one wins).
json parseJson(const std::string &text, Ctx &c) {
  json j;
  try {
    j = parseStrictJson(text, kMaxConfigDepth);
  } catch (const JsonError &e) {
    c.fail(e.what());
  }
  if (!j.is_object())
    c.fail(std::string("expected a JSON object at the top level, got ") +
           j.type_name());
  NumberTexts texts(c.numberTexts);
  json::sax_parse(text, &texts);
  return j;
}

//===----------------------------------------------------------------------===//
// Model config (Hugging Face config.json)
//===----------------------------------------------------------------------===//

/// A key accepted and ignored, optionally only at one value (`required`, a
/// JSON literal) because other values would change the architecture.
struct IgnoredKey {
  const char *name;
  const char *required; // nullptr: any value
  const char *why;      // shown when `required` is violated
};

/// PretrainedConfig keys common to all models: serialisation bookkeeping,
/// task heads, tokenizer ids and generation defaults. None changes the
/// pre-training architecture dsc builds (embeddings, blocks, LM/MLM head).
const std::vector<IgnoredKey> kCommonIgnored = {
    {"_name_or_path", nullptr, nullptr},
    {"_commit_hash", nullptr, nullptr},
    {"_attn_implementation", nullptr, nullptr},
    {"_attn_implementation_autoset", nullptr, nullptr},
    {"architectures", nullptr, nullptr},
    {"transformers_version", nullptr, nullptr},
    {"torch_dtype", nullptr, nullptr},     // read by readDtype
    {"dtype", nullptr, nullptr},           // transformers >= 4.56's name
    {"use_bfloat16", nullptr, nullptr},
    {"bos_token_id", nullptr, nullptr},
    {"eos_token_id", nullptr, nullptr},
    {"pad_token_id", nullptr, nullptr},
    {"sep_token_id", nullptr, nullptr},
    {"decoder_start_token_id", nullptr, nullptr},
    {"use_cache", nullptr, nullptr},       // inference KV cache
    {"output_past", nullptr, nullptr},     // old name of use_cache
    {"task_specific_params", nullptr, nullptr},
    {"id2label", nullptr, nullptr},
    {"label2id", nullptr, nullptr},
    {"num_labels", nullptr, nullptr},
    {"_num_labels", nullptr, nullptr},
    {"finetuning_task", nullptr, nullptr},
    {"problem_type", nullptr, nullptr},
    {"classifier_dropout", nullptr, nullptr}, // classification heads only
    {"tokenizer_class", nullptr, nullptr},
    {"prefix", nullptr, nullptr},
    {"return_dict", nullptr, nullptr},
    {"output_hidden_states", nullptr, nullptr},
    {"output_attentions", nullptr, nullptr},
    {"torchscript", nullptr, nullptr},
    {"tf_legacy_loss", nullptr, nullptr},
    {"chunk_size_feed_forward", nullptr, nullptr}, // same math, chunked
    {"gradient_checkpointing", nullptr, nullptr},  // HF training switch
    {"tie_encoder_decoder", nullptr, nullptr},
    {"cross_attention_hidden_size", nullptr, nullptr},
    // Generation defaults (inference only).
    {"max_length", nullptr, nullptr},
    {"min_length", nullptr, nullptr},
    {"do_sample", nullptr, nullptr},
    {"early_stopping", nullptr, nullptr},
    {"num_beams", nullptr, nullptr},
    {"num_beam_groups", nullptr, nullptr},
    {"diversity_penalty", nullptr, nullptr},
    {"temperature", nullptr, nullptr},
    {"top_k", nullptr, nullptr},
    {"top_p", nullptr, nullptr},
    {"typical_p", nullptr, nullptr},
    {"repetition_penalty", nullptr, nullptr},
    {"length_penalty", nullptr, nullptr},
    {"no_repeat_ngram_size", nullptr, nullptr},
    {"encoder_no_repeat_ngram_size", nullptr, nullptr},
    {"bad_words_ids", nullptr, nullptr},
    {"num_return_sequences", nullptr, nullptr},
    {"output_scores", nullptr, nullptr},
    {"return_dict_in_generate", nullptr, nullptr},
    {"forced_bos_token_id", nullptr, nullptr},
    {"forced_eos_token_id", nullptr, nullptr},
    {"remove_invalid_values", nullptr, nullptr},
    {"exponential_decay_length_penalty", nullptr, nullptr},
    {"suppress_tokens", nullptr, nullptr},
    {"begin_suppress_tokens", nullptr, nullptr},
    // Accepted only at the value that keeps the plain encoder / decoder.
    {"is_decoder", "false", "a causal BERT decoder is not supported"},
    {"add_cross_attention", "false", "cross-attention is not supported"},
    {"is_encoder_decoder", "false", "encoder-decoder models are not supported"},
    {"pruned_heads", "{}", "pruned attention heads are not supported"},
};

/// GPT2Config keys beyond the architecture ones parsed explicitly.
const std::vector<IgnoredKey> kGpt2Ignored = {
    {"summary_type", nullptr, nullptr}, // GPT2DoubleHeadsModel head only
    {"summary_use_proj", nullptr, nullptr},
    {"summary_activation", nullptr, nullptr},
    {"summary_proj_to_labels", nullptr, nullptr},
    {"summary_first_dropout", nullptr, nullptr},
    {"reorder_and_upcast_attn", nullptr, nullptr}, // fp16 precision detail
    {"predict_special_tokens", nullptr, nullptr},
    {"scale_attn_weights", "true",
     "attention without 1/sqrt(head_dim) scaling is not supported"},
    {"scale_attn_by_inverse_layer_idx", "false",
     "per-layer attention scaling is not supported"},
    {"n_special", "0", "extra special-token embeddings are not supported"},
};

/// BertConfig keys beyond the architecture ones parsed explicitly (legacy
/// keys from the original TF checkpoints' configs, unused by transformers).
const std::vector<IgnoredKey> kBertIgnored = {
    {"directionality", nullptr, nullptr},
    {"pooler_fc_size", nullptr, nullptr},
    {"pooler_num_attention_heads", nullptr, nullptr},
    {"pooler_num_fc_layers", nullptr, nullptr},
    {"pooler_size_per_head", nullptr, nullptr},
    {"pooler_type", nullptr, nullptr},
};

/// Returns true when `key` is an ignored key (checking its required value).
bool handleIgnored(const Ctx &c, const std::string &key, const json &v,
                   const std::vector<IgnoredKey> &table) {
  for (const IgnoredKey &k : table) {
    if (key != k.name)
      continue;
    if (k.required && v != json::parse(k.required))
      c.fail(key + ": " + show(v) + " is not supported; expected " +
             k.required + " (" + k.why + ")");
    return true;
  }
  return false;
}

GeluApprox parseGelu(const Ctx &c, const std::string &key, const json &v) {
  const char *expected = "one of \"gelu_new\", \"gelu_pytorch_tanh\", "
                         "\"gelu_fast\" (tanh approximation), \"gelu\", "
                         "\"gelu_python\" (exact erf)";
  const std::string &s = c.string(key, v, expected);
  // transformers' ACT2FN: gelu_new, gelu_pytorch_tanh and gelu_fast are the
  // same tanh approximation written three ways; gelu / gelu_python are erf.
  if (s == "gelu_new" || s == "gelu_pytorch_tanh" || s == "gelu_fast")
    return GeluApprox::Tanh;
  if (s == "gelu" || s == "gelu_python")
    return GeluApprox::Erf;
  c.bad(key, v, expected);
}

[[noreturn]] void unknownModelKey(const Ctx &c, const std::string &key,
                                  const std::vector<std::string> &archKeys) {
  c.fail("unknown key '" + key + "' in model config" + suggest(key, archKeys));
}

/// dsc ties the output head to the word embeddings; an untied head is not
/// implemented, so `false` is an error rather than silently trained tied.
void requireTiedEmbeddings(const Ctx &c, const std::string &key, const json &v) {
  if (!c.boolean(key, v))
    c.fail(key + ": false (an output head of its own) is not supported yet; "
                 "dsc ties the head to the word embeddings");
}

void checkDivisible(const Ctx &c, const char *hiddenKey, int64_t hidden,
                    const char *headsKey, int64_t heads) {
  if (hidden % heads != 0)
    c.fail(std::string(hiddenKey) + " (" + std::to_string(hidden) +
           ") must be divisible by " + headsKey + " (" +
           std::to_string(heads) + ")");
}

ModelConfig parseGpt2(const Ctx &c, const json &j) {
  // Defaults of transformers' GPT2Config.
  ModelConfig m;
  m.type = ModelType::GPT2;
  m.vocabSize = 50257;
  m.maxPositions = 1024;
  m.hidden = 768;
  m.numLayers = 12;
  m.numHeads = 12;
  m.intermediate = 0; // n_inner null: 4 * n_embd, set below
  m.typeVocabSize = 0;
  m.layerNormEps = 1e-5;
  m.initializerRange = 0.02;
  m.embdDropout = m.residDropout = m.attnDropout = 0.1;
  m.gelu = GeluApprox::Tanh; // activation_function "gelu_new"
  std::optional<int64_t> nCtx;

  static const std::vector<std::string> archKeys = {
      "model_type",        "vocab_size",        "n_positions",
      "n_ctx",             "n_embd",            "n_layer",
      "n_head",            "n_inner",           "activation_function",
      "resid_pdrop",       "embd_pdrop",        "attn_pdrop",
      "layer_norm_epsilon", "initializer_range", "tie_word_embeddings"};
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string &k = it.key();
    const json &v = it.value();
    if (k == "model_type")
      continue;
    else if (k == "vocab_size")
      m.vocabSize = c.dimension(k, v);
    else if (k == "n_positions")
      m.maxPositions = c.dimension(k, v);
    else if (k == "n_ctx")
      nCtx = c.dimension(k, v);
    else if (k == "n_embd")
      m.hidden = c.dimension(k, v);
    else if (k == "n_layer")
      m.numLayers = c.layerCount(k, v);
    else if (k == "n_head")
      m.numHeads = c.dimension(k, v);
    else if (k == "n_inner")
      m.intermediate = v.is_null() ? 0 : c.integer(k, v, 1, kMaxDimension,
                                                   "null or a positive integer "
                                                   "(at most " +
                                                       std::to_string(kMaxDimension) +
                                                       ")");
    else if (k == "activation_function")
      m.gelu = parseGelu(c, k, v);
    else if (k == "resid_pdrop")
      m.residDropout = c.probability(k, v);
    else if (k == "embd_pdrop")
      m.embdDropout = c.probability(k, v);
    else if (k == "attn_pdrop")
      m.attnDropout = c.probability(k, v);
    else if (k == "layer_norm_epsilon")
      m.layerNormEps = c.positiveNumber(k, v);
    else if (k == "initializer_range")
      m.initializerRange = c.nonNegativeNumber(k, v);
    else if (k == "tie_word_embeddings")
      requireTiedEmbeddings(c, k, v);
    else if (!handleIgnored(c, k, v, kCommonIgnored) &&
             !handleIgnored(c, k, v, kGpt2Ignored))
      unknownModelKey(c, k, archKeys);
  }
  if (m.intermediate == 0)
    m.intermediate = 4 * m.hidden;
  checkDivisible(c, "n_embd", m.hidden, "n_head", m.numHeads);
  // transformers sizes the position table and the causal mask from
  // n_positions and ignores n_ctx; a different n_ctx is almost surely a bug.
  if (nCtx && *nCtx != m.maxPositions)
    c.fail("n_ctx (" + std::to_string(*nCtx) + ") must equal n_positions (" +
           std::to_string(m.maxPositions) +
           "); transformers sizes the model from n_positions");
  return m;
}

ModelConfig parseBert(const Ctx &c, const json &j) {
  // Defaults of transformers' BertConfig.
  ModelConfig m;
  m.type = ModelType::BERT;
  m.typeName = "bert";
  m.vocabSize = 30522;
  m.hidden = 768;
  m.numLayers = 12;
  m.numHeads = 12;
  m.intermediate = 3072;
  m.maxPositions = 512;
  m.typeVocabSize = 2;
  m.layerNormEps = 1e-12;
  m.initializerRange = 0.02;
  m.embdDropout = m.residDropout = m.attnDropout = 0.1;
  m.gelu = GeluApprox::Erf; // hidden_act "gelu"

  static const std::vector<std::string> archKeys = {
      "model_type",
      "vocab_size",
      "hidden_size",
      "num_hidden_layers",
      "num_attention_heads",
      "intermediate_size",
      "hidden_act",
      "hidden_dropout_prob",
      "attention_probs_dropout_prob",
      "max_position_embeddings",
      "type_vocab_size",
      "initializer_range",
      "layer_norm_eps",
      "position_embedding_type",
      "tie_word_embeddings"};
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string &k = it.key();
    const json &v = it.value();
    if (k == "model_type")
      continue;
    else if (k == "vocab_size")
      m.vocabSize = c.dimension(k, v);
    else if (k == "hidden_size")
      m.hidden = c.dimension(k, v);
    else if (k == "num_hidden_layers")
      m.numLayers = c.layerCount(k, v);
    else if (k == "num_attention_heads")
      m.numHeads = c.dimension(k, v);
    else if (k == "intermediate_size")
      m.intermediate = c.dimension(k, v);
    else if (k == "hidden_act")
      m.gelu = parseGelu(c, k, v);
    else if (k == "hidden_dropout_prob")
      m.embdDropout = m.residDropout = c.probability(k, v);
    else if (k == "attention_probs_dropout_prob")
      m.attnDropout = c.probability(k, v);
    else if (k == "max_position_embeddings")
      m.maxPositions = c.dimension(k, v);
    else if (k == "type_vocab_size")
      m.typeVocabSize = c.dimension(k, v);
    else if (k == "initializer_range")
      m.initializerRange = c.nonNegativeNumber(k, v);
    else if (k == "layer_norm_eps")
      m.layerNormEps = c.positiveNumber(k, v);
    else if (k == "position_embedding_type") {
      if (!v.is_string() || v.get_ref<const std::string &>() != "absolute")
        c.bad(k, v, "\"absolute\" (relative position embeddings are not "
                    "supported)");
    } else if (k == "tie_word_embeddings")
      requireTiedEmbeddings(c, k, v);
    else if (!handleIgnored(c, k, v, kCommonIgnored) &&
             !handleIgnored(c, k, v, kBertIgnored))
      unknownModelKey(c, k, archKeys);
  }
  checkDivisible(c, "hidden_size", m.hidden, "num_attention_heads",
                 m.numHeads);
  return m;
}

/// rope_scaling: null, or {"rope_type" (or the older "type"): "default" |
/// "linear" | "llama3", "factor", and llama3's low_freq_factor,
/// high_freq_factor and original_max_position_embeddings}.
RopeConfig parseRopeScaling(const Ctx &c, const json &v, RopeConfig rope) {
  if (v.is_null())
    return rope;
  c.object("rope_scaling", v);
  const char *types = "\"default\", \"linear\" or \"llama3\"";
  auto typeIt = v.find("rope_type");
  if (typeIt == v.end())
    typeIt = v.find("type");
  if (typeIt == v.end())
    c.fail(std::string("rope_scaling.rope_type: missing; expected ") + types);
  const std::string &t = c.string("rope_scaling.rope_type", *typeIt, types);
  std::vector<std::string> allowed = {"rope_type", "type"};
  if (t == "default")
    rope.scaling = RopeScaling::None;
  else if (t == "linear")
    rope.scaling = RopeScaling::Linear;
  else if (t == "llama3")
    rope.scaling = RopeScaling::Llama3;
  else
    c.fail("rope_scaling.rope_type: " + show(*typeIt) +
           " is not supported; expected " + types);
  if (rope.scaling != RopeScaling::None)
    allowed.push_back("factor");
  if (rope.scaling == RopeScaling::Llama3)
    allowed.insert(allowed.end(),
                   {"low_freq_factor", "high_freq_factor",
                    "original_max_position_embeddings"});
  c.checkKeys("rope_scaling", v, allowed);
  auto required = [&](const char *key) -> const json & {
    auto it = v.find(key);
    if (it == v.end())
      c.fail(std::string("rope_scaling.") + key + ": missing (rope_type " +
             t + " needs it)");
    return *it;
  };
  if (rope.scaling == RopeScaling::None)
    return rope;
  rope.factor = c.number("rope_scaling.factor", required("factor"),
                         [](double x) { return x >= 1; }, "a number >= 1");
  if (rope.scaling == RopeScaling::Llama3) {
    rope.lowFreqFactor = c.positiveNumber("rope_scaling.low_freq_factor",
                                          required("low_freq_factor"));
    rope.highFreqFactor = c.positiveNumber("rope_scaling.high_freq_factor",
                                           required("high_freq_factor"));
    rope.originalMaxPositions =
        c.dimension("rope_scaling.original_max_position_embeddings",
                    required("original_max_position_embeddings"));
    if (rope.highFreqFactor <= rope.lowFreqFactor)
      c.fail("rope_scaling.high_freq_factor (" +
             show(v["high_freq_factor"]) +
             ") must be greater than low_freq_factor (" +
             show(v["low_freq_factor"]) + ")");
  }
  return rope;
}

/// LlamaForCausalLM and the model types whose keys map onto its graph:
/// MistralForCausalLM (no sliding window shorter than the sequence) and
/// Qwen2ForCausalLM (biases on q, k and v; no sliding window).
ModelConfig parseLlama(const Ctx &c, const json &j, const std::string &type) {
  const bool mistral = type == "mistral", qwen2 = type == "qwen2";
  // Defaults of transformers' LlamaConfig / MistralConfig / Qwen2Config.
  ModelConfig m;
  m.type = ModelType::LLaMA;
  m.typeName = type;
  m.vocabSize = qwen2 ? 151936 : 32000;
  m.hidden = 4096;
  m.intermediate = mistral ? 14336 : qwen2 ? 22016 : 11008;
  m.numLayers = 32;
  m.numHeads = 32;
  std::optional<int64_t> kvHeads;
  if (mistral)
    kvHeads = 8;
  m.maxPositions = mistral ? 4096 * 32 : qwen2 ? 32768 : 2048;
  m.layerNormEps = 1e-6;
  m.initializerRange = 0.02;
  m.embdDropout = m.residDropout = m.attnDropout = 0.0;
  m.tieEmbeddings = false;
  m.qkvBias = qwen2;
  m.slidingWindow = mistral ? 4096 : 0;
  bool qwenSlidingWindow = false;

  std::vector<std::string> archKeys = {
      "model_type",        "vocab_size",          "hidden_size",
      "intermediate_size", "num_hidden_layers",   "num_attention_heads",
      "num_key_value_heads", "head_dim",          "hidden_act",
      "max_position_embeddings", "rms_norm_eps",  "rope_theta",
      "rope_scaling",      "tie_word_embeddings", "attention_dropout",
      "initializer_range", "pretraining_tp"};
  if (mistral)
    archKeys.push_back("sliding_window");
  else if (qwen2)
    archKeys.insert(archKeys.end(),
                    {"sliding_window", "use_sliding_window",
                     "max_window_layers"});
  else
    archKeys.insert(archKeys.end(), {"attention_bias", "mlp_bias"});
  auto known = [&](const std::string &k) {
    return std::find(archKeys.begin(), archKeys.end(), k) != archKeys.end();
  };
  json ropeScaling;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string &k = it.key();
    const json &v = it.value();
    if (k == "model_type")
      continue;
    if (!known(k)) {
      if (!handleIgnored(c, k, v, kCommonIgnored))
        unknownModelKey(c, k, archKeys);
      continue;
    }
    if (k == "vocab_size")
      m.vocabSize = c.dimension(k, v);
    else if (k == "hidden_size")
      m.hidden = c.dimension(k, v);
    else if (k == "intermediate_size")
      m.intermediate = c.dimension(k, v);
    else if (k == "num_hidden_layers")
      m.numLayers = c.layerCount(k, v);
    else if (k == "num_attention_heads")
      m.numHeads = c.dimension(k, v);
    else if (k == "num_key_value_heads")
      kvHeads = v.is_null() ? std::optional<int64_t>()
                            : std::optional<int64_t>(c.dimension(k, v));
    else if (k == "head_dim")
      m.headDim = v.is_null() ? 0 : c.dimension(k, v);
    else if (k == "hidden_act") {
      // transformers' ACT2FN: "silu" and "swish" are both SiLU.
      const std::string &act = c.string(k, v, "\"silu\"");
      if (act != "silu" && act != "swish")
        c.fail(k + ": " + show(v) + " is not supported; expected \"silu\" "
                                    "(SwiGLU)");
    } else if (k == "max_position_embeddings")
      m.maxPositions = c.dimension(k, v);
    else if (k == "rms_norm_eps")
      m.layerNormEps = c.positiveNumber(k, v);
    else if (k == "rope_theta")
      m.rope.theta = c.number(k, v, [](double x) { return x > 1; },
                              "a number > 1");
    else if (k == "rope_scaling")
      ropeScaling = v;
    else if (k == "tie_word_embeddings")
      m.tieEmbeddings = c.boolean(k, v);
    else if (k == "attention_dropout")
      m.attnDropout = c.probability(k, v);
    else if (k == "initializer_range")
      m.initializerRange = c.nonNegativeNumber(k, v);
    else if (k == "pretraining_tp") {
      // Only a different (sliced) way to compute the same projections.
      c.integer(k, v, 1, kMaxDimension, "a positive integer");
    } else if (k == "attention_bias")
      m.qkvBias = m.outBias = c.boolean(k, v);
    else if (k == "mlp_bias")
      m.mlpBias = c.boolean(k, v);
    else if (k == "sliding_window")
      m.slidingWindow = v.is_null() ? 0 : c.dimension(k, v);
    else if (k == "use_sliding_window")
      qwenSlidingWindow = c.boolean(k, v);
    else if (k == "max_window_layers")
      c.integer(k, v, 0, kMaxLayers, "an integer >= 0");
  }
  m.rope = parseRopeScaling(c, ropeScaling, m.rope);
  // Qwen2 slides its window only when use_sliding_window is true.
  if (qwen2) {
    if (qwenSlidingWindow)
      c.fail("use_sliding_window: true is not supported; dsc attends to the "
             "whole sequence");
    m.slidingWindow = 0;
  }
  m.numKvHeads = kvHeads ? *kvHeads : m.numHeads;
  if (m.numHeads % m.numKvHeads != 0)
    c.fail("num_attention_heads (" + std::to_string(m.numHeads) +
           ") must be divisible by num_key_value_heads (" +
           std::to_string(m.numKvHeads) + ")");
  if (!m.headDim)
    checkDivisible(c, "hidden_size", m.hidden, "num_attention_heads",
                   m.numHeads);
  int64_t headDim = m.headDim ? m.headDim : m.hidden / m.numHeads;
  if (headDim % 2 != 0)
    c.fail("head_dim (" + std::to_string(headDim) +
           ") must be even: rotary embeddings rotate pairs of dimensions");
  m.headDim = headDim;
  return m;
}

//===----------------------------------------------------------------------===//
// Training config (DeepSpeed ds_config.json subset + dsc section)
//===----------------------------------------------------------------------===//

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
  if (type == "bool")
    c.boolean(p, v);
  else if (type == "int")
    c.integer(p, v, std::numeric_limits<int64_t>::min(),
              std::numeric_limits<int64_t>::max(), "an integer");
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

void parseOptimizer(const Ctx &c, const json &sec, OptimizerConfig &o) {
  c.object("optimizer", sec);
  c.checkKeys("optimizer", sec, {"type", "params"});
  const char *types = "one of \"Adam\", \"AdamW\", \"Lamb\", \"SGD\", "
                      "\"OneBitAdam\", \"ZeroOneAdam\", \"OneBitLamb\" "
                      "(case-insensitive)";
  auto typeIt = sec.find("type");
  if (typeIt == sec.end())
    c.fail(std::string("optimizer.type: missing; expected ") + types);
  const std::string &typeName = c.string("optimizer.type", *typeIt, types);
  // DeepSpeed lower-cases the names of its own optimizers.
  std::string t = lower(typeName);
  bool adamLike = t == "adam" || t == "adamw";
  if (adamLike)
    o.type = OptimizerType::AdamW; // refined by adam_w_mode below
  else if (t == "onebitadam")
    o.type = OptimizerType::OneBitAdam;
  else if (t == "zerooneadam")
    o.type = OptimizerType::ZeroOneAdam;
  else if (t == "onebitlamb")
    o.type = OptimizerType::OneBitLamb;
  else if (t == "lamb")
    o.type = OptimizerType::Lamb;
  else if (t == "sgd")
    o.type = OptimizerType::SGD;
  else
    c.bad("optimizer.type", *typeIt, types);

  std::vector<std::string> allowed = {"lr", "weight_decay"};
  if (adamLike)
    allowed.insert(allowed.end(), {"betas", "eps", "bias_correction",
                                   "adam_w_mode", "torch_adam", "amsgrad"});
  else if (o.type == OptimizerType::Lamb)
    allowed.insert(allowed.end(), {"betas", "eps", "bias_correction",
                                   "max_coeff", "min_coeff"});
  else if (o.type == OptimizerType::OneBitAdam)
    allowed.insert(allowed.end(),
                   {"betas", "eps", "bias_correction", "amsgrad",
                    "freeze_step", "cuda_aware", "comm_backend_name",
                    "eps_inside_sqrt", "max_grad_norm"});
  else if (o.type == OptimizerType::OneBitLamb)
    allowed.insert(allowed.end(),
                   {"betas", "eps", "bias_correction", "amsgrad",
                    "freeze_step", "max_coeff", "min_coeff", "coeff_beta",
                    "factor_max", "factor_min", "factor_threshold",
                    "cuda_aware", "comm_backend_name", "eps_inside_sqrt",
                    "max_grad_norm"});
  else if (o.type == OptimizerType::ZeroOneAdam)
    allowed.insert(allowed.end(),
                   {"betas", "eps", "bias_correction", "amsgrad",
                    "var_freeze_step", "var_update_scaler",
                    "local_step_scaler", "local_step_clipper", "cuda_aware",
                    "comm_backend_name", "eps_inside_sqrt", "max_grad_norm"});
  else
    allowed.insert(allowed.end(), {"momentum", "dampening", "nesterov"});
  static const std::vector<std::string> allKnown = {
      "lr",        "weight_decay", "betas",      "eps",      "bias_correction",
      "adam_w_mode", "torch_adam", "amsgrad",    "max_coeff", "min_coeff",
      "momentum",  "dampening",    "nesterov",   "freeze_step", "cuda_aware",
      "comm_backend_name", "eps_inside_sqrt", "max_grad_norm",
      "var_freeze_step", "var_update_scaler", "local_step_scaler",
      "local_step_clipper", "coeff_beta", "factor_max", "factor_min",
      "factor_threshold"};

  std::optional<bool> adamWMode;
  auto paramsIt = sec.find("params");
  if (paramsIt != sec.end()) {
    const json &params = c.object("optimizer.params", *paramsIt);
    for (auto it = params.begin(); it != params.end(); ++it) {
      const std::string &k = it.key();
      const json &v = it.value();
      std::string p = "optimizer.params." + k;
      if (std::find(allowed.begin(), allowed.end(), k) == allowed.end()) {
        if (std::find(allKnown.begin(), allKnown.end(), k) != allKnown.end())
          c.fail(p + ": not a parameter of optimizer type '" + typeName +
                 "'; allowed: " + join(allowed));
        c.unknownKey("optimizer.params", k, allowed);
      }
      if (k == "lr")
        o.lr = c.nonNegativeNumber(p, v);
      else if (k == "weight_decay")
        o.weightDecay = c.nonNegativeNumber(p, v);
      else if (k == "betas") {
        const char *exp = "an array of two numbers in [0, 1)";
        if (!v.is_array() || v.size() != 2)
          c.bad(p, v, exp);
        auto ok = [](double x) { return x >= 0 && x < 1; };
        o.beta1 = c.number(p + "[0]", v[0], ok, "a number in [0, 1)");
        o.beta2 = c.number(p + "[1]", v[1], ok, "a number in [0, 1)");
      } else if (k == "eps")
        o.eps = c.positiveNumber(p, v);
      else if (k == "bias_correction")
        o.biasCorrection = c.boolean(p, v);
      else if (k == "adam_w_mode")
        adamWMode = c.boolean(p, v);
      else if (k == "torch_adam")
        c.boolean(p, v); // picks DeepSpeed's implementation; same math
      else if (k == "amsgrad") {
        if (c.boolean(p, v))
          c.fail(p + ": true is not supported yet (AMSGrad)");
      } else if (k == "max_coeff")
        o.maxCoeff = c.positiveNumber(p, v);
      else if (k == "min_coeff")
        o.minCoeff = c.nonNegativeNumber(p, v);
      else if (k == "momentum")
        o.momentum = c.nonNegativeNumber(p, v);
      else if (k == "dampening")
        o.dampening = c.nonNegativeNumber(p, v);
      else if (k == "nesterov")
        o.nesterov = c.boolean(p, v);
      // At least one full step: frozen at zero, the variance would hold
      // every weight still (DeepSpeed's would divide by eps instead).
      else if (k == "freeze_step" || k == "var_freeze_step")
        (k == "freeze_step" ? o.freezeStep : o.varFreezeStep) =
            c.integer(p, v, 1, kMaxSize,
                      "an integer >= 1 (the variance freezes after that many "
                      "full-precision steps) and at most 2^31-1");
      else if (k == "var_update_scaler")
        o.varUpdateScaler = c.positive(p, v);
      else if (k == "local_step_scaler")
        o.localStepScaler = c.positive(p, v);
      else if (k == "local_step_clipper")
        o.localStepClipper = c.positive(p, v);
      else if (k == "coeff_beta")
        o.coeffBeta = c.number(p, v, [](double x) { return x >= 0 && x < 1; },
                               "a number in [0, 1)");
      else if (k == "factor_max")
        o.factorMax = c.positiveNumber(p, v);
      else if (k == "factor_min")
        o.factorMin = c.positiveNumber(p, v);
      else if (k == "factor_threshold")
        o.factorThreshold = c.nonNegativeNumber(p, v);
      else if (k == "cuda_aware")
        c.boolean(p, v); // GPU buffers go to NCCL directly either way
      else if (k == "comm_backend_name") {
        const char *backends = "\"nccl\" or \"mpi\"";
        o.commBackend = c.string(p, v, backends);
        if (o.commBackend != "nccl" && o.commBackend != "mpi")
          c.bad(p, v, backends);
      } else if (k == "eps_inside_sqrt") {
        if (c.boolean(p, v))
          c.fail(p + ": true is not supported (DeepSpeed's 1-bit "
                 "optimizers ignore it; dsc adds eps outside the square "
                 "root)");
      } else if (k == "max_grad_norm") {
        if (c.nonNegativeNumber(p, v) != 0)
          c.fail(p + ": not supported (DeepSpeed's 1-bit optimizers "
                 "ignore it); clip with the top-level gradient_clipping");
      }
    }
  }

  if (adamLike) {
    // DeepSpeed: effective_adam_w_mode = (type == "adamw") || adam_w_mode,
    // with adam_w_mode defaulting to true. So "Adam" is AdamW unless
    // adam_w_mode is false; see the file comment.
    if (t == "adamw" && adamWMode && !*adamWMode)
      c.fail("optimizer.params.adam_w_mode: false contradicts optimizer.type '" +
             typeName + "'; use type \"Adam\" with adam_w_mode false for "
             "L2-coupled weight decay (torch.optim.Adam)");
    o.type = (t == "adam" && adamWMode && !*adamWMode) ? OptimizerType::Adam
                                                         : OptimizerType::AdamW;
  }
  // DeepSpeed's OnebitAdam, ZeroOneAdam and OnebitLamb accept
  // bias_correction and never correct.
  if (o.type == OptimizerType::OneBitAdam ||
      o.type == OptimizerType::ZeroOneAdam ||
      o.type == OptimizerType::OneBitLamb)
    o.biasCorrection = false;
  if (o.type == OptimizerType::OneBitLamb && o.factorMin > o.factorMax)
    c.fail("optimizer.params.factor_min (" + show(json(o.factorMin)) +
           ") must not exceed factor_max (" + show(json(o.factorMax)) + ")");
  if ((o.type == OptimizerType::Lamb || o.type == OptimizerType::OneBitLamb) &&
      o.minCoeff > o.maxCoeff)
    c.fail("optimizer.params.min_coeff (" + show(json(o.minCoeff)) +
           ") must not exceed max_coeff (" + show(json(o.maxCoeff)) + ")");
  // torch.optim.SGD's rule.
  if (o.type == OptimizerType::SGD && o.nesterov &&
      (o.momentum <= 0 || o.dampening != 0))
    c.fail("optimizer.params.nesterov: true requires momentum > 0 and "
           "dampening 0 (got momentum " + show(json(o.momentum)) +
           ", dampening " + show(json(o.dampening)) + ")");
}

void parseScheduler(const Ctx &c, const json &sec, SchedulerConfig &s) {
  c.object("scheduler", sec);
  c.checkKeys("scheduler", sec, {"type", "params"});
  const char *types = "one of \"WarmupLR\", \"WarmupDecayLR\", "
                      "\"WarmupCosineLR\"";
  auto typeIt = sec.find("type");
  if (typeIt == sec.end())
    c.fail(std::string("scheduler.type: missing; expected ") + types);
  const std::string &t = c.string("scheduler.type", *typeIt, types);
  std::vector<std::string> allowed;
  if (t == "WarmupLR") {
    s.type = SchedulerType::WarmupLR;
    allowed = {"warmup_min_lr", "warmup_max_lr", "warmup_num_steps",
               "warmup_type"};
  } else if (t == "WarmupDecayLR") {
    s.type = SchedulerType::WarmupDecayLR;
    allowed = {"total_num_steps", "warmup_min_lr", "warmup_max_lr",
               "warmup_num_steps", "warmup_type"};
  } else if (t == "WarmupCosineLR") {
    s.type = SchedulerType::WarmupCosineLR;
    allowed = {"total_num_steps", "warmup_min_ratio", "warmup_num_steps",
               "cos_min_ratio", "warmup_type"};
  } else if (t == "OneCycle" || t == "LRRangeTest") {
    c.fail("scheduler.type '" + t + "' is not supported yet");
  } else {
    // DeepSpeed looks scheduler classes up by exact name.
    std::string hint;
    for (const char *n : {"WarmupLR", "WarmupDecayLR", "WarmupCosineLR"})
      if (lower(t) == lower(n))
        hint = std::string(" (names are case-sensitive: '") + n + "')";
    c.fail("scheduler.type: " + show(*typeIt) + " is not allowed; expected " +
           types + hint);
  }

  // DeepSpeed defaults (deepspeed/runtime/lr_schedules.py); the struct's
  // initial values are those defaults.
  bool haveTotal = false;
  int64_t warmupSteps = s.warmupNumSteps;
  auto paramsIt = sec.find("params");
  if (paramsIt != sec.end()) {
    const json &params = c.object("scheduler.params", *paramsIt);
    c.checkKeys("scheduler.params", params, allowed);
    for (auto it = params.begin(); it != params.end(); ++it) {
      const std::string &k = it.key();
      const json &v = it.value();
      std::string p = "scheduler.params." + k;
      if (k == "warmup_min_lr")
        s.warmupMinLr = c.nonNegativeNumber(p, v);
      else if (k == "warmup_max_lr")
        s.warmupMaxLr = c.nonNegativeNumber(p, v);
      else if (k == "warmup_num_steps")
        warmupSteps = c.nonNegative(p, v);
      else if (k == "total_num_steps") {
        s.totalNumSteps = c.positive(p, v);
        haveTotal = true;
      } else if (k == "warmup_type") {
        const char *exp = "\"log\" or \"linear\"";
        const std::string &w = c.string(p, v, exp);
        if (w != "log" && w != "linear")
          c.bad(p, v, exp);
        s.warmupLog = w == "log";
      } else if (k == "warmup_min_ratio")
        s.warmupMinRatio = c.number(
            p, v, [](double x) { return x >= 0 && x <= 1; },
            "a number in [0, 1]");
      else if (k == "cos_min_ratio")
        s.cosMinRatio = c.number(
            p, v, [](double x) { return x >= 0 && x <= 1; },
            "a number in [0, 1]");
    }
  }
  if ((s.type == SchedulerType::WarmupDecayLR ||
       s.type == SchedulerType::WarmupCosineLR) &&
      !haveTotal)
    c.fail("scheduler.params.total_num_steps: missing; required by " + t);
  if (haveTotal && s.totalNumSteps < warmupSteps)
    c.fail("scheduler.params.total_num_steps (" +
           std::to_string(s.totalNumSteps) +
           ") must be at least warmup_num_steps (" +
           std::to_string(warmupSteps) + ")");
  // The cosine phase divides by total - warmup (DeepSpeed would raise
  // ZeroDivisionError at the first step after warmup).
  if (s.type == SchedulerType::WarmupCosineLR && haveTotal &&
      s.totalNumSteps == warmupSteps)
    c.fail("scheduler.params.total_num_steps (" +
           std::to_string(s.totalNumSteps) +
           ") must exceed warmup_num_steps (" + std::to_string(warmupSteps) +
           ", at least 2) for WarmupCosineLR");
  if (s.type != SchedulerType::WarmupCosineLR &&
      s.warmupMinLr > s.warmupMaxLr)
    c.fail("scheduler.params.warmup_min_lr (" + show(json(s.warmupMinLr)) +
           ") must not exceed warmup_max_lr (" + show(json(s.warmupMaxLr)) +
           ")");
  // DeepSpeed's schedulers clamp the warmup length to at least 2 steps.
  s.warmupNumSteps = std::max<int64_t>(2, warmupSteps);
}

/// The largest float32: a loss scale is a float32 on every backend, and a
/// larger one would be inf (every step skipped).
constexpr double kMaxFloat32 = 3.4028234663852886e38;

/// DeepSpeed's fp16 section (deepspeed/runtime/precision_config.py
/// defaults); its other keys come from the table.
void parseFp16(const Ctx &c, const std::string &name, const json &sec,
               MixedPrecisionConfig &mp) {
  c.object(name, sec);
  checkSectionKeys(c, name, sec,
                   {"enabled", "loss_scale", "initial_scale_power",
                    "loss_scale_window", "hysteresis",
                    "consecutive_hysteresis", "min_loss_scale"});
  auto scale = [&](const std::string &p, const json &v, double min,
                   const char *expected) {
    return c.number(p, v,
                    [&](double x) { return x >= min && x <= kMaxFloat32; },
                    expected);
  };
  for (auto it = sec.begin(); it != sec.end(); ++it) {
    const std::string &k = it.key();
    const std::string p = name + "." + k;
    const json &v = it.value();
    if (k == "enabled")
      mp.fp16 = c.boolean(p, v); // DeepSpeed: defaults to false
    else if (k == "loss_scale")
      mp.lossScale = scale(p, v, 0,
                           "0 (dynamic scaling) or a static scale in (0, "
                           "3.4e38], the float32 range");
    else if (k == "initial_scale_power")
      // 2^100 is well inside float32 (2^127 is its largest power of two).
      mp.initialScalePower =
          c.integer(p, v, 0, 100, "an integer in [0, 100]");
    else if (k == "loss_scale_window")
      mp.lossScaleWindow = c.positive(p, v);
    else if (k == "hysteresis")
      mp.hysteresis = c.positive(p, v);
    else if (k == "min_loss_scale") {
      mp.minLossScale = scale(p, v, 0, "a number in (0, 3.4e38]");
      if (mp.minLossScale == 0)
        c.bad(p, v, "a number in (0, 3.4e38]");
    } else if (k == "consecutive_hysteresis")
      mp.consecutiveHysteresis = c.boolean(p, v);
  }
}

void parseBf16(const Ctx &c, const std::string &name, const json &sec,
               MixedPrecisionConfig &mp) {
  c.object(name, sec);
  // bfloat16 is the old name of the same section: the same keys.
  for (auto it = sec.begin(); it != sec.end(); ++it) {
    if (it.key() == "enabled")
      mp.bf16 = c.boolean(name + ".enabled", it.value());
    else if (!handleTableKey(c, "bf16", it.key(), it.value()))
      c.unknownKey(name, it.key(),
                   merged({"enabled"}, deepSpeedKeysIn("bf16")));
  }
}

/// zero_optimization: stage 0 to 3 (-dsc-zero), stage 3's parameter
/// persistence threshold and the bucket sizes of the gradient reductions
/// and shard gathers (-dsc-bucket-collectives). Its other keys are
/// DeepSpeed's tuning knobs, accepted without effect, or requests for what
/// dsc does not do (offload, ZeRO++), refused: both from the key table.
void parseZero(const Ctx &c, const json &sec, TrainConfig &t) {
  // Old DeepSpeed accepted a bare boolean (true meaning stage 1).
  if (sec.is_boolean()) {
    t.zeroStage = sec.get<bool>() ? 1 : 0;
    return;
  }
  c.object("zero_optimization", sec);
  const std::string name = "zero_optimization";
  checkSectionKeys(c, name, sec,
                   {"stage", "reduce_bucket_size", "allgather_bucket_size",
                    "stage3_param_persistence_threshold",
                    "param_persistence_threshold"});
  // DeepSpeed's field and its stage3_ alias name one setting.
  if (sec.contains("stage3_param_persistence_threshold") &&
      sec.contains("param_persistence_threshold"))
    c.fail("zero_optimization.stage3_param_persistence_threshold and "
           "param_persistence_threshold are one setting under two names; "
           "give one");
  for (const char *key : {"stage3_param_persistence_threshold",
                          "param_persistence_threshold"})
    if (auto it = sec.find(key); it != sec.end())
      t.zeroPersistenceThreshold =
          c.integer(name + "." + key, *it, 0,
                    std::numeric_limits<int64_t>::max(), "an integer >= 0");
  if (auto it = sec.find("reduce_bucket_size"); it != sec.end())
    t.reduceBucketSize =
        c.integer("zero_optimization.reduce_bucket_size", *it, 0,
                  std::numeric_limits<int64_t>::max(), "an integer >= 0");
  if (auto it = sec.find("allgather_bucket_size"); it != sec.end())
    t.allgatherBucketSize =
        c.integer("zero_optimization.allgather_bucket_size", *it, 0,
                  std::numeric_limits<int64_t>::max(), "an integer >= 0");
  auto it = sec.find("stage");
  if (it == sec.end())
    return; // DeepSpeed default: stage 0
  t.zeroStage = c.integer("zero_optimization.stage", *it, 0, 3,
                          "an integer in [0, 3]");
}

/// tensor_parallel: DeepSpeed's AutoTP training section.
void parseTensorParallel(const Ctx &c, const json &sec, ParallelConfig &p) {
  c.object("tensor_parallel", sec);
  c.checkKeys("tensor_parallel", sec, {"autotp_size"});
  if (auto it = sec.find("autotp_size"); it != sec.end())
    p.tensor = c.integer("tensor_parallel.autotp_size", *it, 1, 1 << 16,
                         "an integer in [1, 65536]");
}

/// pipeline: DeepSpeed's keys (deepspeed/runtime/pipe, PipelineModule).
/// "auto" stages would come from the user's PipelineModule; dsc has none,
/// so it means one stage.
void parsePipeline(const Ctx &c, const json &sec, ParallelConfig &p) {
  c.object("pipeline", sec);
  c.checkKeys("pipeline", sec,
              {"stages", "partition", "seed_layers",
               "activation_checkpoint_interval", "pipe_partitioned",
               "grad_partitioned"});
  if (auto it = sec.find("stages"); it != sec.end()) {
    if (!(it->is_string() && it->get_ref<const std::string &>() == "auto"))
      p.pipeline = c.integer("pipeline.stages", *it, 1, 1 << 16,
                             "\"auto\" or an integer in [1, 65536]");
  }
  if (auto it = sec.find("partition"); it != sec.end()) {
    const std::string expected = "\"best\", \"parameters\" or \"uniform\"";
    p.partition = c.string("pipeline.partition", *it, expected);
    if (p.partition != "best" && p.partition != "parameters" &&
        p.partition != "uniform")
      c.bad("pipeline.partition", *it, expected);
  }
  if (auto it = sec.find("activation_checkpoint_interval"); it != sec.end())
    p.activationCheckpointInterval = c.nonNegative(
        "pipeline.activation_checkpoint_interval", *it);
  for (const char *k : {"seed_layers", "pipe_partitioned", "grad_partitioned"})
    if (auto it = sec.find(k); it != sec.end())
      c.boolean(std::string("pipeline.") + k, *it);
}

/// activation_checkpointing: DeepSpeed has no on/off key here; a model
/// uses checkpointing by calling deepspeed.checkpointing.checkpoint on its
/// layers, and includes this section exactly when it does. dsc has no model
/// code to call it, so the section's presence turns on per-layer
/// checkpointing (-dsc-remat per-layer: keep each layer's input, recompute
/// the layer in the backward, as Megatron's checkpoint_num_layers = 1).
void parseActivationCheckpointing(const Ctx &c, const json &sec,
                                  TrainConfig &t) {
  const std::string name = "activation_checkpointing";
  c.object(name, sec);
  c.checkKeys(name, sec,
              {"partition_activations", "contiguous_memory_optimization",
               "cpu_checkpointing", "number_checkpoints",
               "synchronize_checkpoint_boundary", "profile"});
  t.remat.perLayer = true;
  // Checkpoints split across the tensor-parallel ranks (nothing to split
  // without tensor slicing).
  if (auto it = sec.find("partition_activations"); it != sec.end())
    t.parallel.partitionActivations =
        c.boolean(name + ".partition_activations", *it);
  if (auto it = sec.find("cpu_checkpointing");
      it != sec.end() && c.boolean(name + ".cpu_checkpointing", *it))
    c.fail(name + ".cpu_checkpointing: true is not supported yet "
           "(offloading checkpoints to CPU memory is not implemented yet)");
  // The static arena already keeps checkpoints in one contiguous region,
  // sized by the planner: these only tune DeepSpeed's buffer.
  auto it = sec.find("number_checkpoints");
  if (it != sec.end() && !it->is_null())
    c.positive(name + ".number_checkpoints", *it);
  for (const char *k : {"contiguous_memory_optimization",
                        "synchronize_checkpoint_boundary", "profile"}) {
    auto jt = sec.find(k);
    if (jt != sec.end())
      c.boolean(name + "." + k, *jt);
  }
}

/// sparse_attention: DeepSpeed's keys with its JSON defaults. Like
/// DeepSpeed, every key is accepted in every mode (its documented example
/// lists them all with mode "fixed") and a mode reads only its own; the
/// checks that need the number of blocks run when the layout is made
/// (makeSparseLayout).
void parseSparseAttention(const Ctx &c, const json &sec,
                          SparseAttentionConfig &s) {
  const std::string name = "sparse_attention";
  c.object(name, sec);
  c.checkKeys(name, sec,
              {"mode", "block", "different_layout_per_head",
               "num_local_blocks", "num_global_blocks", "attention",
               "horizontal_global_attention", "num_different_global_patterns",
               "num_random_blocks", "local_window_blocks",
               "global_block_indices", "global_block_end_indices",
               "num_sliding_window_blocks", "layout_file"});
  s.enabled = true;
  auto indices = [&](const std::string &key, const json &v, bool positive) {
    const std::string p = name + "." + key;
    if (!v.is_array() || v.empty())
      c.bad(p, v, "a non-empty list of integers");
    std::vector<int64_t> out;
    for (const json &x : v)
      out.push_back(positive ? c.positive(p, x) : c.nonNegative(p, x));
    return out;
  };
  for (auto it = sec.begin(); it != sec.end(); ++it) {
    const std::string &k = it.key();
    const std::string p = name + "." + k;
    const json &v = it.value();
    if (k == "mode") {
      const std::string &m =
          c.string(p, v, "dense, fixed, variable, bigbird, bslongformer or user");
      if (m == "dense")
        s.mode = SparsityMode::Dense;
      else if (m == "fixed")
        s.mode = SparsityMode::Fixed;
      else if (m == "variable")
        s.mode = SparsityMode::Variable;
      else if (m == "bigbird")
        s.mode = SparsityMode::BigBird;
      else if (m == "bslongformer")
        s.mode = SparsityMode::BSLongformer;
      else if (m == "user")
        s.mode = SparsityMode::User;
      else
        c.bad(p, v, "dense, fixed, variable, bigbird, bslongformer or user");
    } else if (k == "block")
      s.block = c.positive(p, v);
    else if (k == "different_layout_per_head")
      s.differentLayoutPerHead = c.boolean(p, v);
    else if (k == "num_local_blocks")
      s.numLocalBlocks = c.positive(p, v);
    else if (k == "num_global_blocks")
      s.numGlobalBlocks = c.positive(p, v);
    else if (k == "attention") {
      const std::string &a =
          c.string(p, v, "\"unidirectional\" or \"bidirectional\"");
      if (a != "unidirectional" && a != "bidirectional")
        c.bad(p, v, "\"unidirectional\" or \"bidirectional\"");
      s.unidirectional = a == "unidirectional";
    } else if (k == "horizontal_global_attention")
      s.horizontalGlobalAttention = c.boolean(p, v);
    else if (k == "num_different_global_patterns")
      s.numDifferentGlobalPatterns = c.positive(p, v);
    else if (k == "num_random_blocks")
      s.numRandomBlocks = c.nonNegative(p, v);
    else if (k == "local_window_blocks")
      s.localWindowBlocks = indices(k, v, /*positive=*/true);
    else if (k == "global_block_indices")
      s.globalBlockIndices = indices(k, v, /*positive=*/false);
    else if (k == "global_block_end_indices") {
      if (!v.is_null())
        s.globalBlockEndIndices = indices(k, v, /*positive=*/false);
    } else if (k == "num_sliding_window_blocks")
      s.numSlidingWindowBlocks = c.positive(p, v);
    else
      s.layoutFile = c.string(p, v, "the path of a layout JSON file");
  }
  // DeepSpeed's constructor checks, in its words where it has them.
  const bool fixed = s.mode == SparsityMode::Fixed;
  if (fixed && s.numLocalBlocks % s.numGlobalBlocks != 0)
    c.fail(name + ".num_local_blocks (" + std::to_string(s.numLocalBlocks) +
           ") must be divisible by num_global_blocks (" +
           std::to_string(s.numGlobalBlocks) + ")");
  if ((fixed || s.mode == SparsityMode::Variable) &&
      s.horizontalGlobalAttention && s.unidirectional)
    c.fail(name + ".horizontal_global_attention needs attention "
                  "\"bidirectional\" (a global row would see the future)");
  if (fixed && s.numDifferentGlobalPatterns > 1 && !s.differentLayoutPerHead)
    c.fail(name + ".num_different_global_patterns > 1 needs "
                  "different_layout_per_head true (one layout serves all "
                  "heads otherwise)");
  if (fixed &&
      s.numDifferentGlobalPatterns > s.numLocalBlocks / s.numGlobalBlocks)
    c.fail(name + ".num_different_global_patterns (" +
           std::to_string(s.numDifferentGlobalPatterns) +
           ") cannot exceed num_local_blocks / num_global_blocks (" +
           std::to_string(s.numLocalBlocks / s.numGlobalBlocks) + ")");
  if ((s.mode == SparsityMode::Variable ||
       s.mode == SparsityMode::BSLongformer) &&
      !s.globalBlockEndIndices.empty()) {
    if (s.globalBlockEndIndices.size() != s.globalBlockIndices.size())
      c.fail(name + ".global_block_end_indices has " +
             std::to_string(int64_t(s.globalBlockEndIndices.size())) +
             " entries but global_block_indices has " +
             std::to_string(int64_t(s.globalBlockIndices.size())));
    for (size_t i = 0; i < s.globalBlockIndices.size(); ++i)
      if (s.globalBlockIndices[i] >= s.globalBlockEndIndices[i])
        c.fail(name + ".global_block_indices[" + std::to_string(int64_t(i)) + "] (" +
               std::to_string(s.globalBlockIndices[i]) +
               ") must be smaller than global_block_end_indices[" +
               std::to_string(int64_t(i)) + "] (" + std::to_string(s.globalBlockEndIndices[i]) +
               ")");
  }
  if ((s.mode == SparsityMode::User) != !s.layoutFile.empty())
    c.fail(s.mode == SparsityMode::User
               ? name + ": mode \"user\" needs layout_file"
               : name + ".layout_file belongs to mode \"user\"");
}

/// transformer_kernel: normalize_invertible runs -dsc-invertible;
/// stochastic_mode may only be false (no non-deterministic kernels exist);
/// gelu_checkpoint and attn_dropout_checkpoint select -dsc-remat's
/// recomputations.
void parseTransformerKernel(const Ctx &c, const json &sec, TrainConfig &t) {
  const std::string name = "transformer_kernel";
  c.object(name, sec);
  const std::vector<std::string> keys = {"stochastic_mode",
                                         "normalize_invertible",
                                         "gelu_checkpoint",
                                         "attn_dropout_checkpoint"};
  c.checkKeys(name, sec, keys);
  for (const std::string &k : keys) {
    auto it = sec.find(k);
    if (it == sec.end())
      continue;
    bool on = c.boolean(name + "." + k, *it);
    if (k == "normalize_invertible")
      t.kernel.normalizeInvertible = on;
    else if (k == "stochastic_mode") {
      if (on)
        c.fail(name + ".stochastic_mode: true is not supported: every dsc "
                      "kernel reduces in a fixed order (runs are "
                      "bit-identical) and no faster non-deterministic "
                      "variant is built; set it to false or remove it");
    } else if (k == "gelu_checkpoint")
      t.remat.geluCheckpoint = on;
    else
      t.remat.attnDropoutCheckpoint = on;
  }
}

/// dsc.remat: the -dsc-remat policy. An explicit policy is resolved against
/// the DeepSpeed switches in resolveRemat once the whole file is read.
void parseRemat(const Ctx &c, const json &sec, TrainConfig &t,
                std::string &policy) {
  const std::string name = "dsc.remat";
  c.object(name, sec);
  c.checkKeys(name, sec, {"policy", "memory_budget_bytes", "recompute_cheap"});
  for (auto it = sec.begin(); it != sec.end(); ++it) {
    const std::string p = name + "." + it.key();
    if (it.key() == "policy") {
      policy = c.string(p, it.value(), "\"none\", \"deepspeed\" or \"budget\"");
      if (policy != "none" && policy != "deepspeed" && policy != "budget")
        c.bad(p, it.value(), "\"none\", \"deepspeed\" or \"budget\"");
    } else if (it.key() == "memory_budget_bytes")
      t.remat.memoryBudgetBytes =
          c.integer(p, it.value(), 1, std::numeric_limits<int64_t>::max(),
                    "a positive integer (bytes)");
    else
      t.remat.recomputeCheap = c.boolean(p, it.value());
  }
}

void resolveRemat(const Ctx &c, const std::string &policy, RematConfig &r) {
  bool ds = r.geluCheckpoint || r.attnDropoutCheckpoint || r.perLayer;
  if (policy.empty())
    r.policy = r.memoryBudgetBytes > 0 ? "budget" : ds ? "deepspeed" : "none";
  else
    r.policy = policy;
  if (r.policy == "budget" && r.memoryBudgetBytes == 0)
    c.fail("dsc.remat.policy: \"budget\" needs dsc.remat.memory_budget_bytes");
  if (r.policy != "budget" && r.memoryBudgetBytes > 0)
    c.fail("dsc.remat.memory_budget_bytes: only used by policy \"budget\", "
           "but the policy is \"" + r.policy + "\"");
  if (r.policy != "deepspeed" && ds)
    c.fail("dsc.remat.policy: \"" + r.policy +
           "\" conflicts with transformer_kernel.gelu_checkpoint / "
           "attn_dropout_checkpoint / activation_checkpointing / "
           "pipeline.activation_checkpoint_interval, which select policy "
           "\"deepspeed\"");
}

/// dsc.fusion: one switch per graph fusion, all on by default.
void parseFusion(const Ctx &c, const json &sec, FusionConfig &f) {
  const std::string name = "dsc.fusion";
  c.object(name, sec);
  c.checkKeys(name, sec,
              {"qkv", "bias_gelu", "swiglu", "bias_dropout_add",
               "softmax_dropout", "residual_layer_norm", "residual_rms_norm",
               "attention", "cross_entropy"});
  for (auto it = sec.begin(); it != sec.end(); ++it) {
    bool on = c.boolean(name + "." + it.key(), it.value());
    if (it.key() == "qkv")
      f.qkv = on;
    else if (it.key() == "bias_gelu")
      f.biasGelu = on;
    else if (it.key() == "swiglu")
      f.swiglu = on;
    else if (it.key() == "softmax_dropout")
      f.softmaxDropout = on;
    else if (it.key() == "residual_layer_norm")
      f.residualLayerNorm = on;
    else if (it.key() == "residual_rms_norm")
      f.residualRmsNorm = on;
    else if (it.key() == "attention")
      f.attention = on;
    else if (it.key() == "cross_entropy")
      f.crossEntropy = on;
    else
      f.biasDropoutAdd = on;
  }
}

void parseDsc(const Ctx &c, const json &sec, TrainConfig &t,
              std::string &rematPolicy) {
  c.object("dsc", sec);
  c.checkKeys("dsc", sec,
              {"seed", "seq_len", "mlm_probability", "mask_token_id",
               "pad_token_id", "fusion", "remat", "pipeline_schedule",
               "pipeline_virtual_stages"});
  for (auto it = sec.begin(); it != sec.end(); ++it) {
    const std::string &k = it.key();
    const json &v = it.value();
    std::string p = "dsc." + k;
    if (k == "seed") {
      if (!v.is_number_unsigned())
        c.bad(p, v, "an integer in [0, 2^64)");
      t.seed = v.get<uint64_t>();
    } else if (k == "seq_len")
      t.seqLen = c.positive(p, v);
    else if (k == "mlm_probability")
      t.mlmProbability = c.number(p, v,
                                  [](double x) { return x > 0 && x < 1; },
                                  "a number in (0, 1)");
    else if (k == "mask_token_id")
      t.maskTokenId = c.nonNegative(p, v);
    else if (k == "pad_token_id")
      t.padTokenId = c.nonNegative(p, v);
    else if (k == "fusion")
      parseFusion(c, v, t.fusion);
    else if (k == "remat")
      parseRemat(c, v, t, rematPolicy);
    else if (k == "pipeline_schedule") {
      const std::string expected = "\"1f1b\", \"interleaved\" or \"gpipe\"";
      t.parallel.schedule = c.string(p, v, expected);
      if (t.parallel.schedule != "1f1b" &&
          t.parallel.schedule != "interleaved" &&
          t.parallel.schedule != "gpipe")
        c.bad(p, v, expected);
    } else if (k == "pipeline_virtual_stages")
      t.parallel.virtualStages = c.integer(p, v, 1, 1024,
                                           "an integer in [1, 1024]");
  }
}

/// PEFT's LoraConfig keys, for the training config's `lora` section and for
/// adapter_config.json alike. Keys that only describe the run (task_type,
/// base_model_name_or_path, ...) are accepted; those asking for what dsc
/// does not do are errors unless they hold PEFT's default.
void parseLora(const Ctx &c, const std::string &prefix, const json &sec,
               LoraConfig &l) {
  c.object(prefix.empty() ? "lora" : prefix, sec);
  static const std::vector<std::string> keys = {
      "r", "lora_alpha", "lora_dropout", "target_modules", "bias",
      "use_rslora", "fan_in_fan_out", "init_lora_weights", "peft_type",
      "task_type", "inference_mode", "base_model_name_or_path", "revision",
      "auto_mapping", "megatron_core", "modules_to_save",
      "layers_to_transform", "layers_pattern", "rank_pattern",
      "alpha_pattern", "use_dora", "lora_bias", "loftq_config",
      "megatron_config", "layer_replication", "exclude_modules",
      "eva_config", "corda_config", "trainable_token_indices"};
  c.checkKeys(prefix, sec, keys);
  l.enabled = true;
  auto p = [&](const std::string &k) { return path(prefix, k); };
  for (auto it = sec.begin(); it != sec.end(); ++it) {
    const std::string &k = it.key();
    const json &v = it.value();
    if (k == "r")
      l.rank = c.integer(p(k), v, 1, 1 << 16, "an integer in [1, 65536]");
    else if (k == "lora_alpha")
      l.alpha = c.positiveNumber(p(k), v);
    else if (k == "lora_dropout")
      l.dropout = c.probability(p(k), v);
    else if (k == "bias") {
      l.bias = c.string(p(k), v, "\"none\", \"all\" or \"lora_only\"");
      if (l.bias != "none" && l.bias != "all" && l.bias != "lora_only")
        c.bad(p(k), v, "\"none\", \"all\" or \"lora_only\"");
    } else if (k == "use_rslora")
      l.useRslora = c.boolean(p(k), v);
    else if (k == "fan_in_fan_out")
      c.boolean(p(k), v); // dsc knows each layer's layout from the model
    else if (k == "inference_mode")
      c.boolean(p(k), v);
    else if (k == "target_modules") {
      const std::string expected =
          "a list of module names, \"all-linear\" or a regular expression";
      if (v.is_null())
        continue; // PEFT's default for the model type
      if (v.is_string()) {
        const std::string &t = v.get_ref<const std::string &>();
        if (t.empty())
          c.bad(p(k), v, expected);
        if (t == "all-linear")
          l.targetModules = {t};
        else
          l.targetRegex = t;
        continue;
      }
      if (!v.is_array() || v.empty())
        c.bad(p(k), v, expected);
      for (const json &e : v) {
        if (!e.is_string() || e.get_ref<const std::string &>().empty())
          c.bad(p(k), v, expected);
        l.targetModules.push_back(e.get<std::string>());
      }
    } else if (k == "peft_type") {
      if (v != "LORA")
        c.bad(p(k), v, "\"LORA\"");
    } else if (k == "init_lora_weights") {
      if (v != true)
        c.fail(p(k) + ": only PEFT's default initialisation (true) is "
                      "supported");
    } else if (k == "task_type" || k == "base_model_name_or_path" ||
               k == "revision" || k == "megatron_core" ||
               k == "auto_mapping") {
      // Descriptions of the run; nothing to do.
    } else {
      // What PEFT can do and dsc cannot: only its default is accepted.
      const bool isDefault =
          v.is_null() || (v.is_boolean() && !v.get<bool>()) ||
          (v.is_object() && v.empty()) || (v.is_array() && v.empty());
      if (!isDefault)
        c.fail(p(k) + ": " + show(v) + " is not supported (dsc implements "
                      "plain LoRA on the targeted linear layers)");
    }
  }
}

std::string str(int64_t v) { return std::to_string(v); }

/// The value at key path `p` ("a.b", "a[1]") of `root`, or null.
json *atPath(json &root, const std::string &p) {
  json *at = &root;
  size_t i = 0;
  while (i < p.size()) {
    if (p[i] == '[') {
      size_t close = p.find(']', i);
      if (close == std::string::npos || !at->is_array())
        return nullptr;
      size_t index = std::stoul(p.substr(i + 1, close - i - 1));
      if (index >= at->size())
        return nullptr;
      at = &(*at)[index];
      i = close + 1;
      if (i < p.size() && p[i] == '.')
        ++i;
      continue;
    }
    size_t end = p.find_first_of(".[", i);
    if (end == std::string::npos)
      end = p.size();
    if (!at->is_object())
      return nullptr;
    auto it = at->find(p.substr(i, end - i));
    if (it == at->end())
      return nullptr;
    at = &*it;
    i = end < p.size() && p[end] == '.' ? end + 1 : end;
  }
  return at;
}

/// Resolves "auto" values as the Hugging Face Trainer's DeepSpeed
/// integration does (transformers' integrations/deepspeed.py,
/// HfTrainerDeepSpeedConfig.trainer_config_process and _finalize), from
/// what dsc knows: the defaults of TrainingArguments, the values the file
/// itself gives (the Trainer requires them to match its arguments), the
/// world size, the model config's hidden_size and dtype, the run's steps.
/// Each resolution becomes a note. "auto" anywhere else is left to fail
/// where the key is read.
void resolveAuto(json &j, const Ctx &c, const TrainConfigInputs &in) {
  auto isAuto = [](const json *v) {
    return v && v->is_string() && v->get_ref<const std::string &>() == "auto";
  };
  auto set = [&](const std::string &p, json value, const std::string &why) {
    json *v = atPath(j, p);
    if (!isAuto(v))
      return;
    c.note(p + " \"auto\" -> " + value.dump() + " (" + why + ")");
    *v = std::move(value);
  };
  // A number the file gives (not "auto"), else `dflt`.
  auto given = [&](const std::string &p, double dflt) {
    json *v = atPath(j, p);
    return v && v->is_number() ? v->get<double>() : dflt;
  };
  set("train_micro_batch_size_per_gpu", 8,
      "Hugging Face Trainer default per_device_train_batch_size");
  set("gradient_accumulation_steps", 1,
      "Hugging Face Trainer default gradient_accumulation_steps");
  if (isAuto(atPath(j, "train_batch_size"))) {
    // world size x micro x accumulation, over the data-parallel ranks
    // (the tensor and pipeline ranks hold one replica).
    const double tp = given("tensor_parallel.autotp_size", 1);
    json *stages = atPath(j, "pipeline.stages");
    const double pp = stages && stages->is_number() ? stages->get<double>() : 1;
    const double mb = given("train_micro_batch_size_per_gpu", 8),
                 ga = given("gradient_accumulation_steps", 1);
    const double dp = tp * pp >= 1 ? std::floor(double(in.worldSize) / (tp * pp))
                                   : double(in.worldSize);
    const double tb = dp * mb * ga;
    if (tb >= 1 && tb <= double(kMaxSize) && tb == std::floor(tb))
      set("train_batch_size", int64_t(tb),
          (tp * pp > 1 ? "data-parallel size " : "world size ") +
              str(int64_t(dp)) + " x micro-batch " + str(int64_t(mb)) +
              " x accumulation " + str(int64_t(ga)) +
              ", as the Hugging Face Trainer computes it");
  }
  set("gradient_clipping", 1.0,
      "Hugging Face Trainer default max_grad_norm");
  set("optimizer.params.lr", 5e-5,
      "Hugging Face Trainer default learning_rate");
  set("optimizer.params.betas", json::array({0.9, 0.999}),
      "Hugging Face Trainer defaults adam_beta1, adam_beta2");
  set("optimizer.params.eps", 1e-8,
      "Hugging Face Trainer default adam_epsilon");
  set("optimizer.params.weight_decay", 0.0,
      "Hugging Face Trainer default weight_decay");
  set("scheduler.params.warmup_min_lr", 0,
      "as the Hugging Face Trainer sets it");
  {
    json *lr = atPath(j, "optimizer.params.lr");
    set("scheduler.params.warmup_max_lr",
        lr && lr->is_number() ? *lr : json(5e-5),
        lr && lr->is_number()
            ? "the learning rate, optimizer.params.lr"
            : "the learning rate, Hugging Face Trainer default learning_rate");
  }
  set("scheduler.params.warmup_num_steps", 0,
      "Hugging Face Trainer defaults warmup_steps 0, warmup_ratio 0");
  if (isAuto(atPath(j, "scheduler.params.total_num_steps"))) {
    if (in.steps <= 0)
      c.fail("scheduler.params.total_num_steps: \"auto\" is the run's "
             "number of steps, which only dsc-run train --steps N gives; "
             "give --steps or write the number");
    set("scheduler.params.total_num_steps", in.steps, "dsc-run --steps");
  }
  // Mixed precision: the Trainer's --fp16 / --bf16 flags, which dsc does
  // not have; the model config's dtype says how the weights were trained.
  const std::string dtype = in.model ? in.model->dtype : "";
  const std::string from =
      dtype.empty() ? (in.model ? "the model config gives no torch_dtype"
                                : "no model config")
                    : "the model config's dtype is \"" + dtype + "\"";
  set("fp16.enabled", dtype == "float16",
      from + "; the Hugging Face Trainer takes it from --fp16, default off");
  for (const char *bf : {"bf16.enabled", "bfloat16.enabled"})
    set(bf, dtype == "bfloat16",
        from + "; the Hugging Face Trainer takes it from --bf16, default off");
  set("amp.enabled", false,
      "Hugging Face Trainer default: no --fp16 with the apex backend");
  set("amp.opt_level", "O1", "Hugging Face Trainer default fp16_opt_level");
  // ZeRO sizes from the model's width (trainer_config_finalize).
  for (const char *key : {"zero_optimization.reduce_bucket_size",
                          "zero_optimization.stage3_prefetch_bucket_size",
                          "zero_optimization.stage3_param_persistence_threshold"}) {
    if (!isAuto(atPath(j, key)))
      continue;
    if (!in.model)
      c.fail(std::string(key) + ": \"auto\" is computed from the model's "
             "hidden_size, and no model config was given; write the number");
    const int64_t h = in.model->hidden;
    const std::string k = key;
    if (k == "zero_optimization.reduce_bucket_size")
      set(k, h * h, "hidden_size^2 = " + str(h) + "^2");
    else if (k == "zero_optimization.stage3_prefetch_bucket_size")
      set(k, int64_t(0.9 * double(h) * double(h)),
          "0.9 * hidden_size^2, hidden_size " + str(h));
    else
      set(k, 10 * h, "10 * hidden_size, hidden_size " + str(h));
  }
}

/// The resolved config (TrainConfig::resolvedJson): integer keys written
/// as whole floats become integers, the batch sizes are filled in.
std::string resolvedText(json j, const Ctx &c, const TrainConfig &t) {
  for (const auto &[p, value] : c.wholeFloats)
    if (json *v = atPath(j, p))
      *v = value;
  j["train_batch_size"] = t.trainBatchSize;
  j["train_micro_batch_size_per_gpu"] = t.microBatch;
  j["gradient_accumulation_steps"] = t.gradAccum;
  return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

/// torch_dtype, or dtype (its name since transformers 4.56): a torch
/// dtype name, "auto" or null. Both may be given only with one value.
std::string readDtype(const Ctx &c, const json &j) {
  std::string dtype;
  for (const char *key : {"torch_dtype", "dtype"}) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null())
      continue;
    std::string d = c.string(key, *it, "a torch dtype name such as "
                                       "\"float32\" or \"bfloat16\"");
    if (d.rfind("torch.", 0) == 0)
      d = d.substr(6);
    if (!dtype.empty() && d != dtype)
      c.fail("torch_dtype (\"" + dtype + "\") and dtype (\"" + d +
             "\") are one setting under two names and disagree");
    dtype = d;
  }
  return dtype;
}

/// architectures: the model classes the checkpoint was saved from. dsc
/// builds the language-model head of each type (a bare backbone trains
/// with it); any other head (sequence classification, question
/// answering...) is refused rather than replaced.
void checkArchitectures(const Ctx &c, const json &j, const std::string &type) {
  auto it = j.find("architectures");
  if (it == j.end() || it->is_null())
    return;
  std::vector<std::string> built;
  if (type == "gpt2")
    built = {"GPT2LMHeadModel", "GPT2Model"};
  else if (type == "bert")
    built = {"BertForMaskedLM", "BertModel"};
  else if (type == "llama")
    built = {"LlamaForCausalLM", "LlamaModel"};
  else if (type == "mistral")
    built = {"MistralForCausalLM", "MistralModel"};
  else
    built = {"Qwen2ForCausalLM", "Qwen2Model"};
  const std::string expected = "a list of model class names";
  if (!it->is_array())
    c.bad("architectures", *it, expected);
  for (const json &a : *it) {
    const std::string &name = c.string("architectures", a, expected);
    if (std::find(built.begin(), built.end(), name) == built.end())
      c.fail("architectures: \"" + name + "\" is not supported: for "
             "model_type \"" + type + "\" dsc builds " + built[0] +
             " (" + built[1] + " trains with that head)");
  }
}

} // namespace

std::vector<std::string> defaultLoraTargets(ModelType type) {
  switch (type) {
  case ModelType::GPT2:
    return {"c_attn"};
  case ModelType::BERT:
    return {"query", "value"};
  case ModelType::LLaMA:
    return {"q_proj", "v_proj"};
  }
  return {};
}

LoraConfig parseAdapterConfigText(const std::string &text,
                                  const std::string &origin) {
  Ctx c(origin);
  json j = parseJson(text, c);
  if (!j.contains("peft_type"))
    c.fail("peft_type: missing; expected \"LORA\" (a PEFT "
           "adapter_config.json)");
  LoraConfig l;
  parseLora(c, "", j, l);
  return l;
}

LoraConfig parseAdapterConfig(const std::string &file) {
  return parseAdapterConfigText(readFile(file), file);
}

ModelConfig parseModelConfigText(const std::string &text,
                                 const std::string &origin) {
  Ctx c(origin);
  json j = parseJson(text, c);
  const char *types =
      "\"gpt2\", \"bert\", \"llama\", \"mistral\" or \"qwen2\"";
  auto it = j.find("model_type");
  if (it == j.end())
    c.fail(std::string("model_type: missing; expected ") + types);
  const std::string &t = c.string("model_type", *it, types);
  ModelConfig m;
  if (t == "gpt2")
    m = parseGpt2(c, j);
  else if (t == "bert")
    m = parseBert(c, j);
  else if (t == "llama" || t == "mistral" || t == "qwen2")
    m = parseLlama(c, j, t);
  else
    c.fail("model_type: " + show(*it) + " is not supported; expected " +
           types);
  m.dtype = readDtype(c, j);
  checkArchitectures(c, j, t);
  return m;
}

ModelConfig parseModelConfig(const std::string &file) {
  return parseModelConfigText(readFile(file), file);
}

TrainConfig parseTrainConfigText(const std::string &text,
                                 const std::string &origin,
                                 int64_t worldSize) {
  TrainConfigInputs in;
  in.worldSize = worldSize;
  return parseTrainConfigText(text, origin, in);
}

TrainConfig parseTrainConfigText(const std::string &text,
                                 const std::string &origin,
                                 const TrainConfigInputs &in) {
  Ctx c(origin);
  const int64_t worldSize = in.worldSize;
  if (worldSize < 1)
    c.fail("world size " + str(worldSize) + " is not allowed; expected >= 1");
  json j = parseJson(text, c);
  resolveAuto(j, c, in);
  TrainConfig t;
  t.worldSize = worldSize;
  std::optional<int64_t> tb, mb, ga;
  std::string rematPolicy; // dsc.remat.policy; empty: derived

  static const std::vector<std::string> topKeys = {
      "train_batch_size",
      "train_micro_batch_size_per_gpu",
      "gradient_accumulation_steps",
      "gradient_clipping",
      "steps_per_print",
      "optimizer",
      "scheduler",
      "fp16",
      "bf16",
      "bfloat16",
      "zero_optimization",
      "activation_checkpointing",
      "sparse_attention",
      "transformer_kernel",
      "lora",
      "tensor_parallel",
      "pipeline",
      "dsc"};
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string &k = it.key();
    const json &v = it.value();
    if (k == "train_batch_size")
      tb = c.positive(k, v);
    else if (k == "train_micro_batch_size_per_gpu")
      mb = c.positive(k, v);
    else if (k == "gradient_accumulation_steps")
      ga = c.positive(k, v);
    else if (k == "gradient_clipping")
      t.gradClip = c.nonNegativeNumber(k, v);
    else if (k == "steps_per_print")
      t.stepsPerPrint = c.positive(k, v);
    else if (k == "optimizer")
      parseOptimizer(c, v, t.optimizer);
    else if (k == "scheduler")
      parseScheduler(c, v, t.scheduler);
    else if (k == "fp16")
      parseFp16(c, k, v, t.precision);
    else if (k == "bf16" || k == "bfloat16") { // DeepSpeed accepts both names
      // ...and reads bf16 when both are there; neither is dropped silently.
      if (j.contains("bf16") && j.contains("bfloat16"))
        c.fail("bf16 and bfloat16 are the same section under two names; "
               "give one (DeepSpeed would read bf16 and ignore bfloat16)");
      parseBf16(c, k, v, t.precision);
    }
    else if (k == "zero_optimization")
      parseZero(c, v, t);
    else if (k == "activation_checkpointing")
      parseActivationCheckpointing(c, v, t);
    else if (k == "sparse_attention")
      // DeepSpeed has no "enabled" switch here: the section's presence
      // turns block-sparse attention on.
      parseSparseAttention(c, v, t.sparseAttention);
    else if (k == "transformer_kernel")
      parseTransformerKernel(c, v, t);
    else if (k == "dsc")
      parseDsc(c, v, t, rematPolicy);
    else if (k == "lora")
      parseLora(c, "lora", v, t.lora);
    else if (k == "tensor_parallel")
      parseTensorParallel(c, v, t.parallel);
    else if (k == "pipeline")
      parsePipeline(c, v, t.parallel);
    else if (k == "data_types")
      parseTableSection(c, k, v);
    else if (!handleTableKey(c, "", k, v))
      c.unknownKey("", k, merged(topKeys, deepSpeedKeysIn("")));
  }
  // DeepSpeed's PipelineModule checkpoints every `interval` layers: dsc's
  // per-layer checkpointing over groups of that many layers.
  if (t.parallel.activationCheckpointInterval >= 1) {
    t.remat.perLayer = true;
    t.remat.layerInterval = t.parallel.activationCheckpointInterval;
  }
  resolveRemat(c, rematPolicy, t.remat);
  // DeepSpeed asserts the same.
  if (t.precision.fp16 && t.precision.bf16)
    c.fail("fp16.enabled and bf16.enabled cannot both be true");
  // 1-bit Adam and 0/1 Adam with ZeRO: meaningless rather than missing.
  // Their compressed steps add each rank's own whole gradient to its own
  // whole momentum before anything is reduced, so neither gradients (stage
  // 2, 3) nor momenta can be sharded; ZeRO-1 could shard only the frozen
  // variance, and its sharded update would all-gather the parameters in
  // fp32 every step: 4 bytes per parameter against the compressed
  // exchange's 1/4 (the signs' all-to-all and all-gather), the 16x the
  // compression exists to save.
  auto compressedWithZero = [&](const char *optimizer) {
    c.fail("zero_optimization.stage " + str(t.zeroStage) +
           " with optimizer " + optimizer +
           ": its compressed steps add each rank's own whole gradient to "
           "its own whole momentum before any reduction, so " +
           (t.zeroStage >= 2
                ? std::string("gradients cannot be sharded")
                : std::string("only the frozen variance could be sharded, "
                              "and the sharded update's fp32 all-gather of "
                              "the parameters would send 16x the bytes the "
                              "compression saves")) +
           "; use stage 0");
  };
  if (t.zeroStage > 0 && t.optimizer.type == OptimizerType::OneBitAdam)
    compressedWithZero("OneBitAdam");
  if (t.optimizer.type == OptimizerType::OneBitLamb) {
    if (t.zeroStage > 0)
      c.fail("zero_optimization.stage " + str(t.zeroStage) +
             " with optimizer OneBitLamb: LAMB's trust ratio needs whole "
             "parameters, which ZeRO shards across ranks");
    if (t.precision.fp16)
      c.fail("fp16 with optimizer OneBitLamb is not supported yet (use "
             "bf16 or fp32: no step is ever skipped there)");
  }
  if (t.optimizer.type == OptimizerType::ZeroOneAdam) {
    if (t.zeroStage > 0)
      compressedWithZero("ZeroOneAdam");
    // A skipped step would have to leave the interval policy where it
    // was, which DeepSpeed's engine does by not calling the optimizer.
    if (t.precision.fp16)
      c.fail("fp16 with optimizer ZeroOneAdam is not supported yet (use "
             "bf16 or fp32: no step is ever skipped there)");
  }
  if (t.zeroStage > 0 && t.optimizer.type == OptimizerType::Lamb)
    c.fail("zero_optimization.stage " + str(t.zeroStage) +
           " with optimizer Lamb: LAMB's trust ratio needs whole "
           "parameters, which ZeRO shards across ranks");

  const ParallelConfig &par = t.parallel;
  if (par.tensor > 1) {
    const std::string tp =
        "tensor_parallel.autotp_size " + str(par.tensor) + " with ";
    if (t.optimizer.type == OptimizerType::Lamb ||
        t.optimizer.type == OptimizerType::OneBitLamb)
      c.fail(tp + "optimizer " +
             (t.optimizer.type == OptimizerType::Lamb ? "Lamb" : "OneBitLamb") +
             ": LAMB's trust ratio needs whole parameters, which tensor "
             "slicing splits across ranks");
  }
  if ((par.virtualStages > 1) != (par.schedule == "interleaved"))
    c.fail("dsc.pipeline_virtual_stages (" + str(par.virtualStages) +
           ") and dsc.pipeline_schedule (\"" + par.schedule +
           "\"): more than one virtual stage per rank is the interleaved "
           "schedule, and it needs more than one");
  const int64_t modelRanks = par.tensor * par.pipeline;
  if (worldSize % modelRanks != 0)
    c.fail("the world size (" + str(worldSize) +
           ") is not divisible by tensor_parallel.autotp_size (" +
           str(par.tensor) + ") * pipeline.stages (" + str(par.pipeline) +
           ") = " + str(modelRanks));

  // DeepSpeed's rule (DeepSpeedConfig._set_batch_related_parameters), over
  // the data-parallel ranks.
  using i128 = __int128;
  const int64_t w = worldSize / modelRanks;
  const std::string W =
      modelRanks == 1 ? "world size (" + str(w) + ")"
                      : "data-parallel size (" + str(w) + ")";
  auto need = [&](int64_t total, int64_t divisor, const std::string &what) {
    if (total % divisor != 0)
      c.fail("train_batch_size (" + str(total) + ") is not divisible by " +
             what + " = " + str(divisor));
  };
  if (tb && mb && ga) {
    if (i128(*mb) * *ga * w != *tb)
      c.fail("train_batch_size (" + str(*tb) +
             ") must equal train_micro_batch_size_per_gpu (" + str(*mb) +
             ") * gradient_accumulation_steps (" + str(*ga) + ") * " + W);
  } else if (tb && mb) {
    if (i128(*mb) * w > *tb)
      c.fail("train_batch_size (" + str(*tb) +
             ") is smaller than train_micro_batch_size_per_gpu (" + str(*mb) +
             ") * " + W);
    need(*tb, *mb * w,
         "train_micro_batch_size_per_gpu (" + str(*mb) + ") * " + W);
    ga = *tb / (*mb * w);
  } else if (tb && ga) {
    if (i128(*ga) * w > *tb)
      c.fail("train_batch_size (" + str(*tb) +
             ") is smaller than gradient_accumulation_steps (" + str(*ga) +
             ") * " + W);
    need(*tb, *ga * w,
         "gradient_accumulation_steps (" + str(*ga) + ") * " + W);
    mb = *tb / (*ga * w);
  } else if (mb && ga) {
    i128 total = i128(*mb) * *ga * w;
    if (total > std::numeric_limits<int64_t>::max())
      c.fail("train_micro_batch_size_per_gpu (" + str(*mb) +
             ") * gradient_accumulation_steps (" + str(*ga) + ") * " + W +
             " is too large");
    tb = int64_t(total);
  } else if (tb) {
    ga = 1;
    if (w > *tb)
      c.fail("train_batch_size (" + str(*tb) + ") is smaller than the " + W);
    need(*tb, w, W);
    mb = *tb / w;
  } else if (mb) {
    ga = 1;
    tb = *mb * w;
  } else {
    c.fail("train_batch_size or train_micro_batch_size_per_gpu must be set "
           "(train_batch_size = train_micro_batch_size_per_gpu * "
           "gradient_accumulation_steps * world size)");
  }
  t.trainBatchSize = *tb;
  t.microBatch = *mb;
  t.gradAccum = *ga;
  if (!j.contains("optimizer"))
    c.note("no optimizer section (DeepSpeed leaves the optimizer to the "
           "training script): dsc trains AdamW with lr 0.001, betas [0.9, "
           "0.999], eps 1e-8, weight_decay 0");
  t.resolvedJson = resolvedText(j, c, t);
  t.notes = std::move(c.notes);
  return t;
}

TrainConfig parseTrainConfig(const std::string &file, int64_t worldSize) {
  return parseTrainConfigText(readFile(file), file, worldSize);
}

TrainConfig parseTrainConfig(const std::string &file,
                             const TrainConfigInputs &inputs) {
  return parseTrainConfigText(readFile(file), file, inputs);
}

void validateConfigs(const ModelConfig &model, const TrainConfig &train) {
  // Mode dense is plain dense attention (no layout), whatever `attention`.
  if (train.sparseAttention.enabled &&
      train.sparseAttention.mode != SparsityMode::Dense) {
    // Causal language models need a causal layout; BERT attends both ways.
    const bool causal = model.type != ModelType::BERT;
    if (causal != train.sparseAttention.unidirectional)
      throw ConfigError(
          std::string("sparse_attention.attention: ") +
          (causal ? "this causal language model needs \"unidirectional\""
                  : "BERT attends both ways: it needs \"bidirectional\""));
  }
  bool gpt2 = model.type == ModelType::GPT2;
  const char *posKey = gpt2 ? "n_positions" : "max_position_embeddings";
  if (model.vocabSize <= 0 || model.maxPositions <= 0)
    throw ConfigError("model config: vocab_size and " + std::string(posKey) +
                      " must be positive");
  // Every dimension is bounded, but their products are not: refuse a step
  // whose buffers (parameters with gradients and Adam's two moments, each
  // layer's activations and attention scores, the logits) could not be
  // addressed, before building any IR. Doubles: no overflow here.
  const double d = double(model.hidden), V = double(model.vocabSize),
               L = double(model.numLayers), H = double(model.numHeads);
  const double ffn = double(model.intermediate ? model.intermediate
                                               : 4 * model.hidden);
  const double T = double(train.seqLen ? train.seqLen : model.maxPositions);
  const double B = double(train.microBatch);
  const bool llama = model.type == ModelType::LLaMA;
  // Attention projections: q and o over the heads' width, k and v over the
  // key/value heads' (all four d * d without grouped-query attention).
  const double attnWidth = double(model.attentionWidth());
  const double kvWidth =
      llama ? double(model.numKvHeads * model.headDim) : attnWidth;
  const double params =
      (V * (model.tieEmbeddings ? 1 : 2) +
       (llama ? 0.0 : double(model.maxPositions))) * d +
      L * (2 * d * attnWidth + 2 * d * kvWidth + (llama ? 3 : 2) * d * ffn);
  const double activations =
      L * B * T * (16 * d + (llama ? 4 : 2) * ffn + 3 * H * T);
  const double bytes = 4 * (4 * params + activations + 2 * B * T * V);
  if (bytes > kMaxStepBytes) {
    char text[64];
    std::snprintf(text, sizeof text, "%.3g", bytes);
    throw ConfigError(
        std::string("the model and batch need about ") + text +
        " bytes per training step (" + (gpt2 ? "n_layer" : "num_hidden_layers") +
        " " + str(model.numLayers) + ", " + (gpt2 ? "n_embd" : "hidden_size") +
        " " + str(model.hidden) + ", vocab_size " + str(model.vocabSize) +
        ", sequence " + str(int64_t(T)) + ", micro-batch " +
        str(train.microBatch) + "), over dsc's limit of 2^52 (4 PiB)");
  }
  const ParallelConfig &par = train.parallel;
  const int64_t kvHeads = model.numKvHeads ? model.numKvHeads : model.numHeads;
  if (model.numHeads % par.tensor != 0 || kvHeads % par.tensor != 0)
    throw ConfigError("tensor_parallel.autotp_size (" + str(par.tensor) +
                      ") must divide the model's attention heads (" +
                      str(model.numHeads) + ", key/value heads " +
                      str(kvHeads) + "): attention is split by heads");
  if (int64_t(ffn) % par.tensor != 0)
    throw ConfigError("tensor_parallel.autotp_size (" + str(par.tensor) +
                      ") must divide the MLP width (" + str(int64_t(ffn)) +
                      "): its GEMMs are split by columns and rows");
  if (par.pipeline * par.virtualStages > model.numLayers)
    throw ConfigError("pipeline.stages (" + str(par.pipeline) + ") * " +
                      "dsc.pipeline_virtual_stages (" +
                      str(par.virtualStages) + ") exceeds the model's " +
                      str(model.numLayers) + " layers");
  if (par.schedule == "interleaved" && train.gradAccum % par.pipeline != 0)
    throw ConfigError("the interleaved schedule needs "
                      "gradient_accumulation_steps (" +
                      str(train.gradAccum) +
                      ", the micro-batches) to be a multiple of "
                      "pipeline.stages (" + str(par.pipeline) + ")");
  if (train.seqLen > model.maxPositions)
    throw ConfigError("dsc.seq_len (" + str(train.seqLen) +
                      ") exceeds the model's " + posKey + " (" +
                      str(model.maxPositions) + ")");
  if (train.maskTokenId >= model.vocabSize)
    throw ConfigError("dsc.mask_token_id (" + str(train.maskTokenId) +
                      ") must be less than the model's vocab_size (" +
                      str(model.vocabSize) + ")");
  if (train.padTokenId >= model.vocabSize)
    throw ConfigError("dsc.pad_token_id (" + str(train.padTokenId) +
                      ") must be less than the model's vocab_size (" +
                      str(model.vocabSize) + ")");
  if (model.type == ModelType::BERT && train.padTokenId >= 0 &&
      train.padTokenId == (train.maskTokenId < 0 ? kBertMaskTokenId
                                                 : train.maskTokenId))
    throw ConfigError("dsc.pad_token_id (" + str(train.padTokenId) +
                      ") equals the mask token: a masked position would "
                      "read as padding");
  if (model.slidingWindow && T > double(model.slidingWindow))
    throw ConfigError("model config: sliding_window (" +
                      str(model.slidingWindow) + ") is shorter than the "
                      "sequence (" + str(int64_t(T)) + "); sliding-window "
                      "attention is not supported, so train with dsc.seq_len "
                      "<= sliding_window");
  if (model.type == ModelType::BERT && train.maskTokenId < 0 &&
      model.vocabSize <= kBertMaskTokenId)
    throw ConfigError(
        "dsc.mask_token_id is not set and the default " +
        str(kBertMaskTokenId) + " (bert-base [MASK]) "
        "is outside the model's vocab_size (" +
        str(model.vocabSize) + "); set dsc.mask_token_id in the training "
        "config");
}

} // namespace dsc
