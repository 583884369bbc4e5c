//===- IO.h - Tokens, safetensors and checkpoints --------------*- C++ -*-===//
//
// File formats of DESIGN.md "Data and weights". Every reader validates sizes
// before trusting them and throws rt::Error naming the file; every writer
// writes a temporary file in the same directory and renames it over the
// target, so a failure never leaves a half-written file behind.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_IO_H
#define DSC_RUNTIME_IO_H

#include "dsc/Support/OutputFile.h"
#include "dsc/Program/Program.h"

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace dsc::rt {

/// A token file: llm.c .bin (256 x int32 header: magic, version, token
/// count; then the tokens: magic 20240520 version 1 uint16, as llm.c writes
/// GPT-2's; magic 20240801 version 7 uint32, as it writes LLaMA 3's), raw
/// uint16 (any extension but .bin and .txt), or UTF-8 text (.txt, one token
/// per byte).
class TokenFile {
public:
  static TokenFile open(const std::string &path);
  /// The format checks of open() on bytes already in memory; `path` picks
  /// the format (.txt) and names the file in errors.
  static TokenFile parse(std::string_view bytes, const std::string &path);
  int64_t size() const { return int64_t(tokens.size()); }
  const std::vector<int32_t> &data() const { return tokens; }
  int32_t maxToken() const;
  /// Slice `slice` of the global batch of `step`. The global batch is the
  /// G = slices*B*T consecutive tokens starting at (step*G) mod (N - G - 1),
  /// what one rank with micro-batch slices*B would read; slice s is its
  /// rows [s*B, (s+1)*B): B*T inputs, and the B*T tokens after each as
  /// targets. A data-parallel rank r with A micro-batches reads slices
  /// r*A + m, so every world size and accumulation trains on the same
  /// tokens. Throws if N < G + 2.
  void batch(int64_t step, int64_t slice, int64_t slices, int64_t B,
             int64_t T, int32_t *inputs, int32_t *targets) const;
  std::string path;

private:
  std::vector<int32_t> tokens;
};

/// Writes an llm.c-format token file (used by tests and the demo).
void writeTokenFile(const std::string &path, const std::vector<int32_t> &toks);

struct Tensor {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<char> bytes;
};

/// safetensors: u64 header length, JSON header, raw little-endian data.
struct Safetensors {
  std::map<std::string, Tensor> tensors;
  std::map<std::string, std::string> metadata; ///< "__metadata__"
  /// Tensors left out by read() because dsc has no such dtype (U8, F64, ...),
  /// name -> dtype. F16 and BF16 tensors are read and widened to F32.
  std::map<std::string, std::string> skipped;
  /// With `withU8` (checkpoints: 8-bit Adam's moments) U8 tensors are
  /// loaded as they are; otherwise they are left out like other dtypes.
  static Safetensors read(const std::string &path, bool withU8 = false);
  /// What read() checks and returns, on the file's bytes already in memory;
  /// `name` (the path) prefixes every error.
  static Safetensors parse(std::string_view bytes, const std::string &name,
                           bool withU8 = false);
  void write(const std::string &path) const; ///< atomic
  /// The file's bytes, as write() writes them (`name` prefixes errors).
  std::string serialize(const std::string &name) const;
};

/// The counters of a dsc checkpoint's metadata (Trainer::saveCheckpoint).
struct CheckpointCounters {
  int64_t step = 0;
  uint64_t seed = 0;
  int64_t skipped = 0; ///< absent in files before fp16 support: 0
};

/// Throws rt::Error naming `path` unless `metadata` marks a dsc checkpoint
/// ("format": "dsc-checkpoint").
void checkCheckpointFormat(const std::map<std::string, std::string> &metadata,
                           const std::string &path);

/// The counters of a checkpoint's metadata, strictly: plain decimal digits
/// ("2x", "-1" and "+1" are damaged files, not numbers), step counts within
/// int64, and skipped steps at most the steps. Throws rt::Error naming
/// `path` and the key.
CheckpointCounters
parseCheckpointCounters(const std::map<std::string, std::string> &metadata,
                        const std::string &path);

} // namespace dsc::rt

#endif // DSC_RUNTIME_IO_H
