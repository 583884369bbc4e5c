//===- SparseAttentionConfig.cpp - sparse_attention section ---------------===//
//
// The sparse_attention section of a ds_config.json.
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

} // namespace config_reader

} // namespace dsc
