//===- WeightFileNames.cpp - How weight files name a program's tensors ----===//

#include "WeightFileNames.h"

namespace dsc::rt {

WeightFileNames WeightFileNames::of(const Program &program) {
  WeightFileNames names;
  names.optionalPrefix = program.metaString("hf_optional_prefix", "");
  const std::string tied = program.metaString("hf_tied_tensors", "");
  size_t start = 0;
  while (start < tied.size()) {
    size_t comma = tied.find(',', start);
    if (comma == std::string::npos)
      comma = tied.size();
    const std::string pair = tied.substr(start, comma - start);
    const size_t eq = pair.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == pair.size())
      throw Error("compiled step: dsc.hf_tied_tensors: '" + pair +
                  "' is not <file tensor>=<parameter>");
    names.tied.emplace_back(pair.substr(0, eq), pair.substr(eq + 1));
    start = comma + 1;
  }
  const std::string unused = program.metaString("hf_unused_tensors", "");
  if (!unused.empty()) {
    try {
      names.unused.emplace(unused);
    } catch (const RegexError &e) {
      throw Error(std::string("compiled step: dsc.hf_unused_tensors: ") +
                  e.what());
    }
  }
  return names;
}

std::vector<std::string>
WeightFileNames::candidates(const std::string &name) const {
  std::vector<std::string> out = {name};
  if (!optionalPrefix.empty() && name.rfind(optionalPrefix, 0) == 0)
    out.push_back(name.substr(optionalPrefix.size()));
  return out;
}

} // namespace dsc::rt
