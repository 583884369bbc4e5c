//===- Files.h - Reading user files and JSON safely ------------*- C++ -*-===//
//
// Every file a user names (configs, token files, weights, checkpoints, MLIR
// inputs) is read through readRegularFile: it refuses directories, FIFOs and
// devices (a FIFO or /dev/zero would block or read forever) and files over a
// caller's size limit, each with a one-line FileError naming the path.
// parseStrictJson parses JSON with a nesting limit and rejects duplicate keys
// (nlohmann::json would keep the last one silently).
//
//===----------------------------------------------------------------------===//
#ifndef DSC_SUPPORT_FILES_H
#define DSC_SUPPORT_FILES_H

#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>
#include "dsc/Support/Error.h"

#include <stdexcept>
#include <string>
#include <string_view>

namespace dsc {

/// A user file that cannot be read; what() is one line naming the path.
struct FileError : Error {
  using Error::Error;
};

/// What a file of this st_mode is, for messages: "a directory", "a FIFO",
/// "a character device", ... ("not a file" for anything else).
const char *fileTypeName(unsigned mode);

/// Throws FileError "<path> is not a regular file (a directory)" (or a FIFO,
/// a character device, ...) or "cannot open <path>: <reason>".
void requireRegularFile(const std::string &path);

/// Reads a whole regular file. `maxBytes` bounds what is read (a file over it
/// is refused: "<path> is <n> bytes, over the <limit> limit for <what>").
std::string readRegularFile(
    const std::string &path,
    uint64_t maxBytes = std::numeric_limits<uint64_t>::max(),
    const std::string &what = "");

/// Thrown by parseStrictJson. `keyPath` is "a.b[].c" (empty at the top).
struct JsonError : Error {
  enum Kind { Malformed, DuplicateKey, TooDeep };
  JsonError(Kind kind, std::string keyPath, const std::string &msg)
      : Error(msg), kind(kind), keyPath(std::move(keyPath)) {}
  Kind kind;
  std::string keyPath;
};

/// Strict JSON (no comments, no NaN). Containers nested more than `maxDepth`
/// levels are refused as soon as the parser reaches them (time and memory
/// stay linear in the input); duplicate keys in one object are refused. The
/// messages: "malformed JSON: ...", "<path>: duplicate key", "<path>: nesting
/// too deep (more than <maxDepth> levels)".
nlohmann::json parseStrictJson(std::string_view text, int maxDepth);

} // namespace dsc

#endif // DSC_SUPPORT_FILES_H
