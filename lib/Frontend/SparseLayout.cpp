//===- SparseLayout.cpp - Block-sparse attention layouts ------------------===//
//
// makeSparseLayout: DeepSpeed's five sparsity modes (and user layout files)
// as a heads x blocks x blocks 0/1 array. Each mode's code follows the
// order of DeepSpeed's make_layout (random, local, global) so the two can
// be read side by side; slices use Python's bounds (pySlice) because
// DeepSpeed's last-window arithmetic can produce a negative start.
//
//===----------------------------------------------------------------------===//

#include "dsc/Frontend/SparseLayout.h"

#include "dsc/Support/Philox.h"
#include "dsc/Support/Files.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <numeric>
#include <sstream>

namespace dsc {

namespace {

const std::string kKey = "sparse_attention";

[[noreturn]] void fail(const std::string &msg) {
  throw ConfigError(kKey + msg);
}

std::string str(int64_t v) { return std::to_string(v); }

/// Python's `a[start:stop]` bounds on an axis of length n.
std::pair<int64_t, int64_t> pySlice(int64_t start, int64_t stop, int64_t n) {
  auto norm = [n](int64_t x) {
    return std::clamp<int64_t>(x < 0 ? x + n : x, 0, n);
  };
  return {norm(start), norm(stop)};
}

/// Sets layout[h, rows, cols] for Python slices rows = r0:r1, cols = c0:c1.
void fill(BlockLayout &l, int64_t h, int64_t r0, int64_t r1, int64_t c0,
          int64_t c1) {
  auto [rs, re] = pySlice(r0, r1, l.blocks);
  auto [cs, ce] = pySlice(c0, c1, l.blocks);
  for (int64_t r = rs; r < re; ++r)
    for (int64_t c = cs; c < ce; ++c)
      l.at(h, r, c) = 1;
}

/// The Philox stream of layout draws (distinct from every op's dropout
/// stream, which are small integers).
constexpr uint32_t kLayoutStream = 0x4C41594Fu; // "LAYO"

/// `k` distinct blocks among the first `n` of row `row` of head `h`: a
/// partial Fisher-Yates shuffle driven by Philox(seed; row, h, stream, i).
void setRandomBlocks(BlockLayout &l, int64_t h, int64_t row, int64_t n,
                     int64_t k, uint64_t seed) {
  std::vector<int64_t> cols(static_cast<size_t>(n));
  std::iota(cols.begin(), cols.end(), 0);
  for (int64_t i = 0; i < std::min(k, n); ++i) {
    PhiloxBlock r = philox4x32_10(
        {uint32_t(row), uint32_t(h), kLayoutStream, uint32_t(i)},
        philoxKey(seed));
    const int64_t j = i + int64_t(r[0] % uint32_t(n - i));
    std::swap(cols[size_t(i)], cols[size_t(j)]);
    l.at(h, row, cols[size_t(i)]) = 1;
  }
}

/// DeepSpeed's local windows: consecutive windows of the given sizes (the
/// last size repeats), full within a window, lower-triangular when
/// unidirectional.
void setLocalWindows(BlockLayout &l, int64_t h,
                     const std::vector<int64_t> &sizes, bool uni) {
  const int64_t nb = l.blocks;
  auto window = [&](int64_t start, int64_t end) {
    for (int64_t row = start; row < end; ++row)
      for (int64_t col = start; col < (uni ? row + 1 : end); ++col)
        l.at(h, row, col) = 1;
  };
  int64_t start = 0, end = 0;
  for (int64_t size : sizes) {
    end = std::min(end + size, nb);
    window(start, end);
    start += size;
  }
  for (int64_t i = start; i < nb; i += sizes.back())
    window(i, std::min(i + sizes.back(), nb));
}

void requireBlocks(int64_t have, int64_t want, const std::string &key) {
  if (want > have)
    fail("." + key + " (" + str(want) + ") exceeds the " + str(have) +
         " blocks of a row");
}

void fixedLayout(const SparseAttentionConfig &s, BlockLayout &l, int64_t h) {
  const int64_t nb = l.blocks, nlb = s.numLocalBlocks, ngb = s.numGlobalBlocks;
  const bool uni = s.unidirectional;
  setLocalWindows(l, h, {nlb}, uni);
  // Global: block(s) `first` of every full window (counted back from the
  // window's end, a different pattern per head), then of the short last
  // window, if any.
  const int64_t first = nlb - (1 + h % s.numDifferentGlobalPatterns) * ngb;
  const int64_t end = nb - nb % nlb;
  auto global = [&](int64_t start, int64_t stop) {
    fill(l, h, uni ? start : 0, nb, start, stop);
    if (s.horizontalGlobalAttention)
      fill(l, h, start, stop, 0, nb);
  };
  for (int64_t i = first; i < end; i += nlb)
    global(i, i + ngb);
  if (end < nb) {
    const int64_t start = std::min(end + first, nb - ngb);
    global(start, start + ngb);
  }
}

/// Variable and BSLongformer: global_block_indices, each a single block or,
/// with global_block_end_indices, a range.
void globalRanges(const SparseAttentionConfig &s, BlockLayout &l, int64_t h,
                  bool horizontal, bool uni) {
  const int64_t nb = l.blocks;
  for (size_t i = 0; i < s.globalBlockIndices.size(); ++i) {
    const int64_t start = s.globalBlockIndices[i];
    if (start >= nb)
      continue;
    const int64_t stop = s.globalBlockEndIndices.empty()
                             ? start + 1
                             : std::min(s.globalBlockEndIndices[i], nb);
    if (horizontal)
      fill(l, h, start, stop, 0, nb);
    fill(l, h, uni ? start : 0, nb, start, stop);
  }
}

/// num_random_blocks per row (Variable, BigBird): among all blocks, or
/// among those a unidirectional row may see.
void randomRows(const SparseAttentionConfig &s, BlockLayout &l, int64_t h,
                uint64_t seed) {
  const int64_t nb = l.blocks;
  requireBlocks(nb, s.numRandomBlocks, "num_random_blocks");
  for (int64_t row = 0; row < nb; ++row)
    setRandomBlocks(l, h, row, s.unidirectional ? row + 1 : nb,
                    s.numRandomBlocks, seed);
}

void variableLayout(const SparseAttentionConfig &s, BlockLayout &l, int64_t h,
                    uint64_t seed) {
  randomRows(s, l, h, seed);
  setLocalWindows(l, h, s.localWindowBlocks, s.unidirectional);
  globalRanges(s, l, h, s.horizontalGlobalAttention, s.unidirectional);
}

void slidingWindow(const SparseAttentionConfig &s, BlockLayout &l,
                   int64_t h) {
  const int64_t nb = l.blocks, w = s.numSlidingWindowBlocks / 2;
  requireBlocks(nb, s.numSlidingWindowBlocks, "num_sliding_window_blocks");
  for (int64_t row = 0; row < nb; ++row)
    fill(l, h, row, row + 1, std::max<int64_t>(0, row - w),
         std::min(row + w + 1, nb));
}

void bigBirdLayout(const SparseAttentionConfig &s, BlockLayout &l, int64_t h,
                   uint64_t seed) {
  const int64_t nb = l.blocks;
  randomRows(s, l, h, seed);
  slidingWindow(s, l, h);
  requireBlocks(nb, s.numGlobalBlocks, "num_global_blocks");
  fill(l, h, 0, s.numGlobalBlocks, 0, nb);
  fill(l, h, 0, nb, 0, s.numGlobalBlocks);
}

void bsLongformerLayout(const SparseAttentionConfig &s, BlockLayout &l,
                        int64_t h) {
  slidingWindow(s, l, h);
  globalRanges(s, l, h, /*horizontal=*/true, /*uni=*/false);
}

/// {"layout": heads (or 1, shared) x blocks x blocks of 0/1}.
void userLayout(const SparseAttentionConfig &s, BlockLayout &l) {
  const std::string key = "." + std::string("layout_file");
  nlohmann::json j;
  try {
    j = parseStrictJson(readRegularFile(s.layoutFile, 256ull << 20,
                                        "a layout file"),
                        8);
  } catch (const std::exception &e) {
    fail(key + ": " + s.layoutFile + ": " + e.what());
  }
  const std::string where = key + " " + s.layoutFile;
  if (!j.is_object() || !j.contains("layout") || !j["layout"].is_array())
    fail(where + ": expected {\"layout\": [[[0|1, ...], ...], ...]}");
  for (const auto &[k, v] : j.items())
    if (k != "layout")
      fail(where + ": unknown key '" + k +
           "' (the file holds \"layout\" only)");
  const nlohmann::json &heads = j["layout"];
  if (heads.size() != size_t(l.heads) && heads.size() != 1)
    fail(where + ": " + str(int64_t(heads.size())) + " heads, expected " +
         str(l.heads) + " (or 1, shared by all heads)");
  for (size_t h = 0; h < heads.size(); ++h) {
    const nlohmann::json &rows = heads[h];
    if (!rows.is_array() || rows.size() != size_t(l.blocks))
      fail(where + ": head " + str(int64_t(h)) + " needs " + str(l.blocks) +
           " rows (sequence / block)");
    for (size_t r = 0; r < rows.size(); ++r) {
      const nlohmann::json &cols = rows[r];
      if (!cols.is_array() || cols.size() != size_t(l.blocks))
        fail(where + ": head " + str(int64_t(h)) + " row " +
             str(int64_t(r)) + " needs " + str(l.blocks) + " entries");
      for (size_t c = 0; c < cols.size(); ++c) {
        if (!cols[c].is_number_integer() ||
            (cols[c].get<int64_t>() != 0 && cols[c].get<int64_t>() != 1))
          fail(where + ": entry [" + str(int64_t(h)) + "][" +
               str(int64_t(r)) + "][" + str(int64_t(c)) + "] is not 0 or 1");
        if (cols[c].get<int64_t>() == 1 && s.unidirectional && c > r)
          fail(where + ": block [" + str(int64_t(h)) + "][" +
               str(int64_t(r)) + "][" + str(int64_t(c)) +
               "] is above the diagonal of a unidirectional layout");
        l.at(int64_t(h), int64_t(r), int64_t(c)) = uint8_t(cols[c].get<int64_t>());
      }
    }
  }
  if (heads.size() == 1)
    for (int64_t h = 1; h < l.heads; ++h)
      std::copy_n(l.bits.begin(), l.blocks * l.blocks,
                  l.bits.begin() + h * l.blocks * l.blocks);
}

} // namespace

int64_t BlockLayout::nonzero() const {
  return std::count(bits.begin(), bits.end(), uint8_t(1));
}

BlockLayout makeSparseLayout(const SparseAttentionConfig &s, int64_t seqLen,
                             int64_t heads, uint64_t seed) {
  if (seqLen % s.block != 0)
    fail(".block: the sequence length " + str(seqLen) +
         " is not a multiple of the block size " + str(s.block));
  BlockLayout l;
  l.heads = heads;
  l.blocks = seqLen / s.block;
  // One byte per (head, block, block), also carried by the IR and the
  // kernels: bounded before anything is allocated (a block of 1 at 65,536
  // tokens asked for 4 GiB per head).
  if (l.blocks > kMaxLayoutEntries / l.blocks ||
      heads > kMaxLayoutEntries / (l.blocks * l.blocks))
    fail(".block: a layout of " + str(heads) + " x " + str(l.blocks) + " x " +
         str(l.blocks) + " blocks (heads x (sequence " + str(seqLen) +
         " / block " + str(s.block) +
         ")^2) is larger than 2^26 blocks; use a larger block");
  l.bits.assign(size_t(heads * l.blocks * l.blocks), 0);
  const int64_t layoutHeads = s.differentLayoutPerHead ? heads : 1;
  switch (s.mode) {
  case SparsityMode::Dense:
    std::fill(l.bits.begin(), l.bits.end(), uint8_t(1));
    break;
  case SparsityMode::Fixed:
    for (int64_t h = 0; h < layoutHeads; ++h)
      fixedLayout(s, l, h);
    break;
  case SparsityMode::Variable:
    for (int64_t h = 0; h < layoutHeads; ++h)
      variableLayout(s, l, h, seed);
    break;
  case SparsityMode::BigBird:
    for (int64_t h = 0; h < layoutHeads; ++h)
      bigBirdLayout(s, l, h, seed);
    break;
  case SparsityMode::BSLongformer:
    for (int64_t h = 0; h < layoutHeads; ++h)
      bsLongformerLayout(s, l, h);
    break;
  case SparsityMode::User:
    userLayout(s, l);
    break;
  }
  const int64_t area = l.blocks * l.blocks;
  if (s.mode != SparsityMode::User && s.mode != SparsityMode::Dense)
    for (int64_t h = layoutHeads; h < heads; ++h)
      std::copy_n(l.bits.begin(), area, l.bits.begin() + h * area);
  // Strictly block-causal: DeepSpeed's BigBird and BSLongformer do this
  // (torch.tril); its Fixed and Variable globals do not (see the header).
  if (s.unidirectional)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t r = 0; r < l.blocks; ++r)
        for (int64_t c = r + 1; c < l.blocks; ++c)
          l.at(h, r, c) = 0;
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t r = 0; r < l.blocks; ++r)
      if (std::none_of(&l.at(h, r, 0), &l.at(h, r, 0) + l.blocks,
                       [](uint8_t b) { return b != 0; }))
        fail(": row " + str(r) + " of head " + str(h) +
             " attends to no block (every query block needs at least one)");
  return l;
}

std::string layoutJson(const BlockLayout &l) {
  std::ostringstream os;
  os << "{\"layout\": [";
  for (int64_t h = 0; h < l.heads; ++h) {
    os << (h ? ",\n  [" : "\n  [");
    for (int64_t r = 0; r < l.blocks; ++r) {
      os << (r ? ", [" : "[");
      for (int64_t c = 0; c < l.blocks; ++c)
        os << (c ? ", " : "") << int(l.at(h, r, c));
      os << "]";
    }
    os << "]";
  }
  os << "\n]}\n";
  return os.str();
}

std::string layoutText(const BlockLayout &l) {
  std::ostringstream os;
  const int64_t area = l.blocks * l.blocks;
  for (int64_t h = 0; h < l.heads; ++h) {
    const int64_t n = std::count(l.bits.begin() + h * area,
                                 l.bits.begin() + (h + 1) * area, uint8_t(1));
    os << "head " << h << ": " << n << " of " << area << " blocks ("
       << (100.0 * double(n) / double(area)) << "%)\n";
    for (int64_t r = 0; r < l.blocks; ++r) {
      for (int64_t c = 0; c < l.blocks; ++c)
        os << (l.at(h, r, c) ? '#' : '.');
      os << '\n';
    }
  }
  return os.str();
}

} // namespace dsc
