//===- IO.cpp - Token files, safetensors, atomic writes -------------------===//

#include "dsc/Runtime/IO.h"
#include "dsc/Support/Files.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <map>
#include <tuple>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace dsc::rt {

namespace {

constexpr int32_t kLlmcMagic = 20240520;       // uint16 tokens
constexpr int32_t kLlmcLlama3Magic = 20240801; // uint32 tokens
constexpr int64_t kLlmcHeaderBytes = 256 * 4;
constexpr uint64_t kMaxHeaderBytes = 100ull << 20; // 100 MB

/// Reads a whole regular file (dsc::readRegularFile) as an rt::Error.
std::string readWholeFile(const std::string &path) {
  try {
    return readRegularFile(path);
  } catch (const FileError &e) {
    throw Error(e.what());
  }
}

bool endsWith(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

template <typename T> T loadLE(const char *p) {
  T v;
  std::memcpy(&v, p, sizeof(T)); // x86-64 is little-endian
  return v;
}

} // namespace

//===----------------------------------------------------------------------===//
// Token files
//===----------------------------------------------------------------------===//

TokenFile TokenFile::open(const std::string &path) {
  return parse(readWholeFile(path), path);
}

TokenFile TokenFile::parse(std::string_view bytes, const std::string &path) {
  TokenFile tf;
  tf.path = path;
  const int64_t size = int64_t(bytes.size());
  if (endsWith(path, ".txt")) {
    tf.tokens.resize(bytes.size());
    for (size_t i = 0; i < bytes.size(); ++i)
      tf.tokens[i] = int32_t(static_cast<unsigned char>(bytes[i]));
    return tf;
  }
  const char *data = bytes.data();
  int64_t first = 0, count = 0, width = 2;
  const int32_t magic = size >= 4 ? loadLE<int32_t>(data) : 0;
  const bool llmc = magic == kLlmcMagic || magic == kLlmcLlama3Magic;
  // A .bin file is llm.c's format: without its magic number it is another
  // file (or a corrupt one), not raw tokens to be read silently.
  if (!llmc && endsWith(path, ".bin"))
    throw Error(path + ": not an llm.c token file: it starts with " +
                (size >= 4 ? std::to_string(magic)
                           : std::to_string(size) + " bytes") +
                ", not the magic number " + std::to_string(kLlmcMagic) +
                " (uint16 tokens) or " + std::to_string(kLlmcLlama3Magic) +
                " (uint32 tokens); raw uint16 tokens: give the file another "
                "extension, such as .u16");
  if (llmc) {
    if (size < kLlmcHeaderBytes)
      throw Error(path + ": truncated llm.c header (" + std::to_string(size) +
                  " bytes, need " + std::to_string(kLlmcHeaderBytes) + ")");
    // llm.c's GPT-2 files are version 1 with uint16 tokens, its LLaMA 3
    // files version 7 with uint32 tokens (dev/data/data_common.py).
    const int32_t expected = magic == kLlmcMagic ? 1 : 7;
    width = magic == kLlmcMagic ? 2 : 4;
    int32_t version = loadLE<int32_t>(data + 4);
    if (version != expected)
      throw Error(path + ": unsupported llm.c token file version " +
                  std::to_string(version) + " (expected " +
                  std::to_string(expected) + " after magic " +
                  std::to_string(magic) + ")");
    int64_t header = loadLE<int32_t>(data + 8);
    if (header < 0)
      throw Error(path + ": llm.c header has a negative token count " +
                  std::to_string(header));
    int64_t holds = (size - kLlmcHeaderBytes) / width;
    if (holds < header)
      throw Error(path + ": truncated (header says " + std::to_string(header) +
                  " tokens, file holds " + std::to_string(holds) + ")");
    if (size != kLlmcHeaderBytes + width * header)
      throw Error(path + ": size mismatch (header says " +
                  std::to_string(header) + " tokens, file holds " +
                  std::to_string(size - kLlmcHeaderBytes) +
                  " bytes of tokens)");
    first = kLlmcHeaderBytes;
    count = header;
  } else {
    if (size % 2 != 0)
      throw Error(path + ": raw uint16 token file has an odd byte length (" +
                  std::to_string(size) + ")");
    count = size / 2;
  }
  tf.tokens.resize(size_t(count));
  const char *tokens = data + first;
  for (int64_t i = 0; i < count; ++i) {
    const uint32_t t = width == 2 ? loadLE<uint16_t>(tokens + 2 * i)
                                  : loadLE<uint32_t>(tokens + 4 * i);
    if (t > uint32_t(INT32_MAX))
      throw Error(path + ": token " + std::to_string(i) + " is " +
                  std::to_string(t) + ", beyond any vocabulary (2^31 - 1)");
    tf.tokens[size_t(i)] = int32_t(t);
  }
  return tf;
}

int32_t TokenFile::maxToken() const {
  int32_t m = -1;
  for (int32_t t : tokens)
    m = std::max(m, t);
  return m;
}

void TokenFile::batch(int64_t step, int64_t slice, int64_t slices,
                      int64_t B, int64_t T, int32_t *inputs,
                      int32_t *targets) const {
  if (B <= 0 || T <= 0 || slices <= 0 || step < 0 || slice < 0 ||
      slice >= slices)
    throw Error("batch: invalid arguments (B=" + std::to_string(B) +
                ", T=" + std::to_string(T) + ", slice " +
                std::to_string(slice) + " of " + std::to_string(slices) + ")");
  using u128 = unsigned __int128;
  const int64_t N = size(), BT = B * T;
  const u128 global = u128(uint64_t(BT)) * uint64_t(slices);
  if (u128(uint64_t(N)) < global + 2)
    throw Error("data file " + path + " has " + std::to_string(N) +
                " tokens; need at least " + std::to_string(uint64_t(global + 2)) +
                " (train_batch_size*seq_len+2) for a global batch of " +
                std::to_string(B * slices) + " rows of seq-len " +
                std::to_string(T));
  const u128 span = u128(uint64_t(N)) - global - 1;
  const uint64_t first = uint64_t(u128(uint64_t(step)) * global % span);
  const int32_t *src = tokens.data() + first + uint64_t(slice) * uint64_t(BT);
  std::memcpy(inputs, src, size_t(BT) * sizeof(int32_t));
  std::memcpy(targets, src + 1, size_t(BT) * sizeof(int32_t));
}

void writeTokenFile(const std::string &path, const std::vector<int32_t> &toks) {
  std::string out(size_t(kLlmcHeaderBytes) + 2 * toks.size(), '\0');
  int32_t header[256] = {};
  header[0] = kLlmcMagic;
  header[1] = 1;
  if (toks.size() > size_t(INT32_MAX))
    throw Error(path + ": too many tokens for an llm.c file");
  header[2] = int32_t(toks.size());
  std::memcpy(out.data(), header, sizeof(header));
  for (size_t i = 0; i < toks.size(); ++i) {
    if (toks[i] < 0 || toks[i] > 65535)
      throw Error(path + ": token " + std::to_string(toks[i]) +
                  " does not fit in uint16");
    uint16_t v = uint16_t(toks[i]);
    std::memcpy(out.data() + kLlmcHeaderBytes + 2 * i, &v, 2);
  }
  writeFileAtomic(path, out);
}

//===----------------------------------------------------------------------===//
// safetensors
//===----------------------------------------------------------------------===//

namespace {
const char *stDtypeName(DType t) {
  switch (t) {
  case DType::F32:
    return "F32";
  case DType::F16:
    return "F16";
  case DType::BF16:
    return "BF16";
  case DType::I32:
    return "I32";
  case DType::I64:
    return "I64";
  case DType::I8:
    return "I8";
  case DType::U8:
    return "U8";
  }
  return "?";
}
} // namespace

/// IEEE binary16 or bfloat16 little-endian values as F32 bytes.
static std::vector<char> widenHalf(const char *src, uint64_t n, bool bf16) {
  std::vector<char> out(size_t(n) * 4);
  for (uint64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    uint32_t bits;
    if (bf16) {
      bits = uint32_t(h) << 16;
    } else {
      uint32_t sign = uint32_t(h & 0x8000) << 16, exp = (h >> 10) & 0x1f,
               mant = h & 0x3ff;
      if (exp == 0x1f) { // inf / nan
        bits = sign | 0x7f800000u | (mant << 13);
      } else if (exp != 0) { // normal
        bits = sign | ((exp + 112) << 23) | (mant << 13);
      } else if (mant == 0) { // zero
        bits = sign;
      } else { // subnormal: normalise into an F32 normal
        int shift = 0;
        while (!(mant & 0x400)) {
          mant <<= 1;
          ++shift;
        }
        bits = sign | (uint32_t(113 - shift) << 23) | ((mant & 0x3ff) << 13);
      }
    }
    std::memcpy(out.data() + 4 * i, &bits, 4);
  }
  return out;
}

namespace {
/// Bits per element of every dtype the safetensors format defines (its
/// reference implementation's `Dtype::bitsize`); 0 for an unknown name.
unsigned stDtypeBits(const std::string &d) {
  static const std::map<std::string, unsigned> bits = {
      {"BOOL", 8},     {"U8", 8},       {"I8", 8},       {"F8_E5M2", 8},
      {"F8_E4M3", 8},  {"F8_E8M0", 8},  {"I16", 16},     {"U16", 16},
      {"F16", 16},     {"BF16", 16},    {"I32", 32},     {"U32", 32},
      {"F32", 32},     {"F64", 64},     {"I64", 64},     {"U64", 64},
      {"C64", 64},     {"F4", 4},       {"F6_E2M3", 6},  {"F6_E3M2", 6}};
  auto it = bits.find(d);
  return it == bits.end() ? 0 : it->second;
}

/// A tensor's place in the data section, for the coverage check.
struct Span {
  uint64_t begin, end;
  std::string name;
};
} // namespace

Safetensors Safetensors::read(const std::string &path, bool withU8) {
  return parse(readWholeFile(path), path, withU8);
}

Safetensors Safetensors::parse(std::string_view bytes,
                               const std::string &path, bool withU8) {
  const uint64_t size = bytes.size();
  if (size < 8)
    throw Error(path + ": truncated safetensors file (" +
                std::to_string(size) + " bytes, no header length)");
  const uint64_t n = loadLE<uint64_t>(bytes.data());
  if (n > size - 8)
    throw Error(path + ": safetensors header length " + std::to_string(n) +
                " exceeds the file size " + std::to_string(size));
  if (n >= kMaxHeaderBytes)
    throw Error(path + ": safetensors header length " + std::to_string(n) +
                " is over the 100MB limit");
  // The header nests three levels (tensor, entry, shape); duplicate keys are
  // refused rather than resolved (the last one would win silently).
  nlohmann::json header;
  try {
    header = parseStrictJson(std::string_view(bytes.data() + 8, n),
                             /*maxDepth=*/16);
  } catch (const JsonError &e) {
    if (e.kind == JsonError::Malformed)
      throw Error(path + ": invalid safetensors header JSON: " +
                  std::string(e.what()).substr(strlen("malformed JSON: ")));
    if (e.kind == JsonError::DuplicateKey)
      throw Error(path + ": safetensors header has the key '" + e.keyPath +
                  "' twice");
    throw Error(path + ": safetensors header: " + e.what());
  }
  if (!header.is_object())
    throw Error(path + ": safetensors header is not a JSON object");
  const uint64_t dataStart = 8 + n, dataSize = size - dataStart;
  Safetensors st;
  std::vector<Span> spans;
  // Pass 1: every entry (skipped dtypes included) is well formed and its
  // byte range matches its shape and dtype.
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string &name = it.key();
    const nlohmann::json &v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object())
        throw Error(path + ": __metadata__ must be an object of strings");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string())
          throw Error(path + ": __metadata__ value '" + m.key() +
                      "' is not a string");
        st.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    auto bad = [&](const std::string &what) {
      return Error(path + ": tensor '" + name + "': " + what);
    };
    if (!v.is_object())
      throw bad("entry is not an object");
    auto dt = v.find("dtype");
    auto sh = v.find("shape");
    auto off = v.find("data_offsets");
    if (dt == v.end() || !dt->is_string())
      throw bad("missing or non-string dtype");
    if (sh == v.end() || !sh->is_array())
      throw bad("missing or non-array shape");
    if (off == v.end() || !off->is_array() || off->size() != 2 ||
        !(*off)[0].is_number_unsigned() || !(*off)[1].is_number_unsigned())
      throw bad("data_offsets must be two non-negative integers");
    const std::string &dts = dt->get_ref<const std::string &>();
    const unsigned bits = stDtypeBits(dts);
    if (bits == 0)
      throw bad("unknown dtype '" + dts + "'");
    uint64_t numel = 1;
    for (const auto &d : *sh) {
      if (!d.is_number_unsigned())
        throw bad("shape entries must be non-negative integers");
      uint64_t dim = d.get<uint64_t>();
      if (dim != 0 && numel > (uint64_t(1) << 56) / dim)
        throw bad("shape is too large");
      numel *= dim;
    }
    uint64_t b = (*off)[0].get<uint64_t>(), e = (*off)[1].get<uint64_t>();
    if (b > e)
      throw bad("data_offsets [" + std::to_string(b) + ", " +
                std::to_string(e) + "] end before they begin");
    if (e > dataSize)
      throw bad("data_offsets [" + std::to_string(b) + ", " +
                std::to_string(e) + "] outside the data section of " +
                std::to_string(dataSize) + " bytes");
    if (numel * bits % 8 != 0)
      throw bad(std::to_string(numel) + " elements of " + dts +
                " do not fill whole bytes");
    uint64_t want = numel * bits / 8;
    if (e - b != want)
      throw bad("data_offsets span " + std::to_string(e - b) +
                " bytes but shape and dtype need " + std::to_string(want));
    spans.push_back({b, e, name});
  }
  // Pass 2: as the reference implementation requires, the tensors tile the
  // data section exactly: in offset order each begins where the previous
  // ended, and the last ends at the end of the file. Overlapping tensors
  // (aliases), unclaimed gaps and trailing bytes are all refused.
  std::sort(spans.begin(), spans.end(), [](const Span &x, const Span &y) {
    return std::tie(x.begin, x.end, x.name) < std::tie(y.begin, y.end, y.name);
  });
  uint64_t covered = 0;
  for (size_t i = 0; i < spans.size(); ++i) {
    const Span &s = spans[i];
    if (s.begin < covered)
      throw Error(path + ": tensors '" + spans[i - 1].name + "' and '" +
                  s.name + "' overlap in the data section (bytes " +
                  std::to_string(s.begin) + " to " +
                  std::to_string(std::min(covered, s.end)) + ")");
    if (s.begin > covered)
      throw Error(path + ": bytes " + std::to_string(covered) + " to " +
                  std::to_string(s.begin) +
                  " of the data section belong to no tensor (a gap before "
                  "tensor '" + s.name + "')");
    covered = s.end;
  }
  if (covered != dataSize)
    throw Error(path + ": " + std::to_string(dataSize - covered) +
                " trailing bytes after the last tensor's data (the data "
                "section is " + std::to_string(dataSize) +
                " bytes, the tensors cover " + std::to_string(covered) + ")");
  // Pass 3: the tensors dsc loads.
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string &name = it.key();
    if (name == "__metadata__")
      continue;
    const nlohmann::json &v = it.value();
    const std::string &dts = v.at("dtype").get_ref<const std::string &>();
    Tensor t;
    // Half-precision tensors are widened to F32 on load (exactly: every
    // F16/BF16 value is representable in F32).
    const bool half = dts == "F16" || dts == "BF16";
    if (dts == "F32" || half)
      t.dtype = DType::F32;
    else if (dts == "I32")
      t.dtype = DType::I32;
    else if (dts == "I64")
      t.dtype = DType::I64;
    else if (dts == "U8" && withU8)
      t.dtype = DType::U8;
    else {
      // Left out; a caller that needs it reports the dtype (see `skipped`).
      st.skipped[name] = dts;
      continue;
    }
    uint64_t numel = 1;
    for (const auto &d : v.at("shape")) {
      numel *= d.get<uint64_t>();
      t.shape.push_back(int64_t(d.get<uint64_t>()));
    }
    const uint64_t b = v.at("data_offsets")[0].get<uint64_t>(),
                   e = v.at("data_offsets")[1].get<uint64_t>();
    if (half)
      t.bytes = widenHalf(bytes.data() + dataStart + b, numel, dts == "BF16");
    else
      t.bytes.assign(bytes.begin() + int64_t(dataStart + b),
                     bytes.begin() + int64_t(dataStart + e));
    st.tensors.emplace(name, std::move(t));
  }
  return st;
}

//===----------------------------------------------------------------------===//
// Checkpoint metadata
//===----------------------------------------------------------------------===//

namespace {
const std::string &
checkpointMeta(const std::map<std::string, std::string> &metadata,
               const std::string &path, const std::string &key) {
  auto it = metadata.find(key);
  if (it == metadata.end())
    throw Error(path + ": not a dsc checkpoint (no '" + key +
                "' in its metadata)");
  return it->second;
}
} // namespace

void checkCheckpointFormat(const std::map<std::string, std::string> &metadata,
                           const std::string &path) {
  if (checkpointMeta(metadata, path, "format") != "dsc-checkpoint")
    throw Error(path + ": not a dsc checkpoint");
}

CheckpointCounters
parseCheckpointCounters(const std::map<std::string, std::string> &metadata,
                        const std::string &path) {
  // Counters are plain decimal digits: "2x" or "-1" is a damaged file, not 2.
  // The seed is any uint64.
  auto counter = [&](const std::string &key, const std::string &text,
                     uint64_t max) {
    const bool digits = !text.empty() && text.size() <= 19 &&
                        std::all_of(text.begin(), text.end(), ::isdigit);
    if (!digits)
      throw Error(path + ": checkpoint metadata '" + key + "' is '" + text +
                  "', not a non-negative integer");
    const uint64_t v = std::stoull(text);
    if (v > max)
      throw Error(path + ": checkpoint metadata '" + key + "' is '" + text +
                  "', more than " + std::to_string(max));
    return v;
  };
  // The step counter feeds the optimizer's bias corrections and the LR
  // schedules as a double, exact up to 2^53; a larger one is a damaged file
  // (and INT64_MAX would wrap negative at the next step).
  constexpr uint64_t kMaxSteps = uint64_t(1) << 53;
  CheckpointCounters c;
  c.step = int64_t(
      counter("step", checkpointMeta(metadata, path, "step"), kMaxSteps));
  c.seed = counter("seed", checkpointMeta(metadata, path, "seed"), UINT64_MAX);
  // Absent in checkpoints written before fp16 support: nothing skipped.
  auto it = metadata.find("skipped_steps");
  c.skipped = it == metadata.end()
                  ? 0
                  : int64_t(counter("skipped_steps", it->second, kMaxSteps));
  if (c.skipped > c.step)
    throw Error(path + ": checkpoint metadata says " +
                std::to_string(c.skipped) + " skipped steps of " +
                std::to_string(c.step));
  return c;
}

void Safetensors::write(const std::string &path) const {
  writeFileAtomic(path, serialize(path));
}

std::string Safetensors::serialize(const std::string &path) const {
  // nlohmann::json objects are std::maps: keys come out sorted, and the data
  // section follows the same (sorted) order.
  nlohmann::json header = nlohmann::json::object();
  uint64_t offset = 0;
  for (const auto &[name, t] : tensors) {
    if (name == "__metadata__")
      throw Error(path + ": '__metadata__' is not a valid tensor name");
    uint64_t numel = 1;
    for (int64_t d : t.shape) {
      if (d < 0)
        throw Error(path + ": tensor '" + name + "' has a negative dimension");
      numel *= uint64_t(d);
    }
    uint64_t nbytes = numel * dtypeSize(t.dtype);
    if (nbytes != t.bytes.size())
      throw Error(path + ": tensor '" + name + "' holds " +
                  std::to_string(t.bytes.size()) + " bytes but shape and " +
                  "dtype need " + std::to_string(nbytes));
    header[name] = {{"dtype", stDtypeName(t.dtype)},
                    {"shape", t.shape},
                    {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
  }
  if (!metadata.empty()) {
    nlohmann::json meta = nlohmann::json::object();
    for (const auto &[k, v] : metadata)
      meta[k] = v;
    header["__metadata__"] = meta;
  }
  std::string h = header.dump();
  // Pad with spaces (valid JSON whitespace) so the data starts 8-aligned.
  h.append((8 - h.size() % 8) % 8, ' ');
  std::string out;
  out.reserve(8 + h.size() + offset);
  uint64_t n = h.size();
  out.append(reinterpret_cast<const char *>(&n), 8);
  out += h;
  for (const auto &[name, t] : tensors)
    out.append(t.bytes.data(), t.bytes.size());
  return out;
}

} // namespace dsc::rt
