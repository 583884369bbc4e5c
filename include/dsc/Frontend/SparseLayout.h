//===- SparseLayout.h - Block-sparse attention layouts ---------*- C++ -*-===//
//
// The heads x blocks x blocks layout of a `sparse_attention` section: which
// key block each query block of each head attends to. The modes follow
// DeepSpeed's SparsityConfig.make_layout (deepspeed/ops/sparse_attention/
// sparsity_config.py) block for block, with two deliberate differences:
//  - unidirectional layouts are strictly block-causal (no block above the
//    diagonal; DeepSpeed's Fixed with num_global_blocks > 1 and Variable
//    with global ranges set some, which would let a causal model see the
//    future), and a unidirectional row draws its random blocks among the
//    blocks it may see;
//  - random blocks come from Philox keyed by the training seed, not from
//    Python's `random`, so every rank and every run gets the same layout.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_FRONTEND_SPARSELAYOUT_H
#define DSC_FRONTEND_SPARSELAYOUT_H

#include "dsc/Frontend/Config.h"

#include <cstdint>
#include <string>
#include <vector>

namespace dsc {

struct BlockLayout {
  int64_t heads = 0, blocks = 0;
  std::vector<uint8_t> bits; ///< [heads][blocks][blocks], 0 or 1

  uint8_t &at(int64_t h, int64_t row, int64_t col) {
    return bits[size_t((h * blocks + row) * blocks + col)];
  }
  uint8_t at(int64_t h, int64_t row, int64_t col) const {
    return bits[size_t((h * blocks + row) * blocks + col)];
  }
  int64_t nonzero() const;
};

/// The most heads x blocks x blocks a layout may have (64 MiB).
constexpr int64_t kMaxLayoutEntries = int64_t(1) << 26;

/// The layout for `seqLen` tokens and `heads` heads. Throws ConfigError
/// naming the key when the layout would have more than kMaxLayoutEntries
/// blocks, the sequence is not a multiple of `block`, a count does not
/// fit the number of blocks, or a user layout file does not match
/// (its shape, a block above the diagonal of a unidirectional layout, a
/// row attending to nothing).
BlockLayout makeSparseLayout(const SparseAttentionConfig &config,
                             int64_t seqLen, int64_t heads, uint64_t seed);

/// {"layout": [[[0, 1, ...], ...], ...]}, one head per line.
std::string layoutJson(const BlockLayout &layout);
/// Each head as rows of '#' (attended) and '.', with its density.
std::string layoutText(const BlockLayout &layout);

} // namespace dsc

#endif // DSC_FRONTEND_SPARSELAYOUT_H
