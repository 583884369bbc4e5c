//===- KernelCache.cpp - NVRTC binaries cached on disk --------------------===//
//
// Entry layout (little-endian u64 lengths):
//   "DSCKC1\n" | len key | key | len source | source | len binary | binary
//   | checksum(binary)
// The file name is a hash of key and source; the stored key and source are
// compared byte for byte on a hit.
//
//===----------------------------------------------------------------------===//

#include "dsc/Codegen/KernelCache.h"
#include "dsc/Support/Hash.h"

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <unistd.h>

namespace dsc::cuda {

namespace {

const char kMagic[] = "DSCKC1\n";

std::string hex(uint64_t v) {
  static const char digits[] = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4)
    s[size_t(i)] = digits[v & 15];
  return s;
}

/// Everything besides the source that changes the binary.
std::string keyOf(const NvrtcOptions &o) {
  std::ostringstream k;
  k << "nvrtc=" << nvrtcVersion() << ";arch=" << o.arch
    << ";fast_math=" << o.fastMath << ";warnings_are_errors="
    << o.warningsAreErrors << ";flags=";
  for (const std::string &f : o.extraFlags)
    k << f << '\x1f';
  return k.str();
}

void putString(std::ostream &os, const std::string &s) {
  uint64_t n = s.size();
  os.write(reinterpret_cast<const char *>(&n), sizeof n);
  os.write(s.data(), std::streamsize(n));
}

/// Reads one length-prefixed string; false when the file ends early or the
/// length is beyond `limit` (a foreign or damaged file).
bool getString(std::istream &is, std::string &s, uint64_t limit) {
  uint64_t n = 0;
  if (!is.read(reinterpret_cast<char *>(&n), sizeof n) || n > limit)
    return false;
  s.resize(size_t(n));
  return bool(is.read(s.data(), std::streamsize(n)));
}

/// The cached binary, or "" on any mismatch.
std::string readEntry(const std::string &path, const std::string &key,
                      const std::string &source) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return "";
  in.seekg(0, std::ios::end);
  const uint64_t size = uint64_t(in.tellg());
  in.seekg(0);
  char magic[sizeof kMagic - 1];
  std::string storedKey, storedSource, binary;
  uint64_t sum = 0;
  if (!in.read(magic, sizeof magic) ||
      std::string(magic, sizeof magic) != kMagic ||
      !getString(in, storedKey, size) || storedKey != key ||
      !getString(in, storedSource, size) || storedSource != source ||
      !getString(in, binary, size) ||
      !in.read(reinterpret_cast<char *>(&sum), sizeof sum) ||
      sum != fnv1a64(binary) || binary.empty())
    return "";
  return binary;
}

/// Writes the entry through a temporary file and a rename; returns why it
/// could not, or "".
std::string writeEntry(const std::string &path, const std::string &key,
                       const std::string &source, const std::string &binary) {
  std::error_code ec;
  std::filesystem::create_directories(
      std::filesystem::path(path).parent_path(), ec);
  if (ec)
    return "cannot create the kernel cache directory: " + ec.message();
  std::random_device rd;
  const std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." +
                          hex(uint64_t(rd()) << 32 | rd());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(kMagic, sizeof kMagic - 1);
    putString(out, key);
    putString(out, source);
    putString(out, binary);
    const uint64_t sum = fnv1a64(binary);
    out.write(reinterpret_cast<const char *>(&sum), sizeof sum);
    out.flush();
    if (!out) {
      std::filesystem::remove(tmp, ec);
      return "cannot write " + tmp;
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return "cannot rename the entry into " + path;
  }
  return "";
}

} // namespace

std::string defaultKernelCacheDir() {
  if (const char *dir = std::getenv("DSC_KERNEL_CACHE"))
    return dir;
  if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return std::string(xdg) + "/dsc/kernels";
  if (const char *home = std::getenv("HOME"); home && *home)
    return std::string(home) + "/.cache/dsc/kernels";
  return "";
}

CachedCompile compileCached(const std::string &source, const std::string &name,
                            const NvrtcOptions &options,
                            const std::string &cacheDir) {
  CachedCompile c;
  const std::string key = keyOf(options);
  if (!cacheDir.empty()) {
    // Two independent 64-bit hashes name the file; the stored key and
    // source decide whether it is a hit.
    c.path = cacheDir + "/" + hex(fnv1a64(key + source)) +
             hex(fnv1a64(source + key, 0x84222325cbf29ce4ull)) + "-" +
             options.arch + ".cubin";
    std::string binary = readEntry(c.path, key, source);
    if (!binary.empty()) {
      c.hit = true;
      c.result.ok = true;
      c.result.binary = std::move(binary);
      return c;
    }
  }
  c.result = compileWithNvrtc(source, name, options);
  if (c.result.ok && !cacheDir.empty())
    c.cacheProblem = writeEntry(c.path, key, source, c.result.binary);
  return c;
}

} // namespace dsc::cuda
