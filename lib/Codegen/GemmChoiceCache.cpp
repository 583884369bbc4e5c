//===- GemmChoiceCache.cpp - Timed cuBLASLt algorithm choices on disk -----===//
//
// An entry is three lines: a magic line, the key (newlines in it are
// refused), and "<candidate> <microseconds>".
//
//===----------------------------------------------------------------------===//

#include "dsc/Codegen/GemmChoiceCache.h"

#include "dsc/Support/Hash.h"
#include "dsc/Support/OutputFile.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace dsc::cuda {

namespace {

constexpr const char *kMagic = "dsc gemm choice 1";

std::string entryPath(const std::string &cacheDir, const std::string &key) {
  char name[40];
  std::snprintf(name, sizeof name, "gemm-%016llx.txt",
                static_cast<unsigned long long>(fnv1a64(key)));
  return cacheDir + "/" + name;
}

} // namespace

std::optional<GemmChoice> loadGemmChoice(const std::string &cacheDir,
                                         const std::string &key) {
  if (cacheDir.empty() || key.find('\n') != std::string::npos)
    return std::nullopt;
  std::ifstream in(entryPath(cacheDir, key));
  std::string magic, storedKey, choiceLine;
  if (!std::getline(in, magic) || magic != kMagic ||
      !std::getline(in, storedKey) || storedKey != key ||
      !std::getline(in, choiceLine))
    return std::nullopt;
  std::istringstream fields(choiceLine);
  GemmChoice choice;
  std::string rest;
  if (!(fields >> choice.candidate >> choice.microseconds) ||
      (fields >> rest) || choice.candidate < 0 || !(choice.microseconds >= 0))
    return std::nullopt;
  return choice;
}

std::string storeGemmChoice(const std::string &cacheDir,
                            const std::string &key, const GemmChoice &choice) {
  if (cacheDir.empty())
    return "";
  if (key.find('\n') != std::string::npos)
    return "a GEMM key has a newline";
  std::error_code ec;
  std::filesystem::create_directories(cacheDir, ec);
  if (ec)
    return "cannot create " + cacheDir + ": " + ec.message();
  std::ostringstream entry;
  entry << kMagic << "\n" << key << "\n"
        << choice.candidate << " " << choice.microseconds << "\n";
  try {
    writeFileAtomic(entryPath(cacheDir, key), entry.str());
  } catch (const std::exception &e) {
    return e.what();
  }
  return "";
}

} // namespace dsc::cuda
