//===- WeightFileNames.h - How weight files name a program's tensors -*- C++ -*-===//
//
// Internal to lib/Runtime. The frontend decides how Hugging Face files name
// a model's tensors and records it as module attributes (dsc.hf_*, see
// include/dsc/Frontend/ModelBuilder.h), which reach the runtime as program
// metadata: the runtime spells no model's names itself. A program without
// them (hand-written IR) loads files that name every parameter exactly.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_LIB_RUNTIME_WEIGHTFILENAMES_H
#define DSC_LIB_RUNTIME_WEIGHTFILENAMES_H

#include "dsc/Program/Program.h"
#include "dsc/Support/NameRegex.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dsc::rt {

struct WeightFileNames {
  /// A base-model prefix a file may leave out ("transformer."), or "".
  std::string optionalPrefix;
  /// (file tensor, parameter it must equal): tensors dsc ties.
  std::vector<std::pair<std::string, std::string>> tied;
  /// Tensors a file may hold that are not weights dsc uses.
  std::optional<NameRegex> unused;

  /// Reads the program's hf_optional_prefix, hf_tied_tensors and
  /// hf_unused_tensors; an error naming the attribute when malformed.
  static WeightFileNames of(const Program &program);
  /// The names a file may give parameter `name`: itself, and without the
  /// optional prefix.
  std::vector<std::string> candidates(const std::string &name) const;
  bool isUnused(const std::string &name) const {
    return unused && unused->fullMatch(name);
  }
};

} // namespace dsc::rt

#endif // DSC_LIB_RUNTIME_WEIGHTFILENAMES_H
