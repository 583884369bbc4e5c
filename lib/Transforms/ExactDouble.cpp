//===- ExactDouble.cpp - A floating-point pass option that round-trips ----===//

#include "dsc/Transforms/ExactDouble.h"

#include <cstdio>
#include <cstdlib>

using namespace mlir::dsc;

llvm::raw_ostream &mlir::dsc::operator<<(llvm::raw_ostream &os,
                                         ExactDouble d) {
  char text[32];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(text, sizeof text, "%.*g", digits, d.value);
    if (std::strtod(text, nullptr) == d.value)
      break;
  }
  return os << text;
}

bool llvm::cl::parser<ExactDouble>::parse(Option &o, StringRef, StringRef arg,
                                          ExactDouble &value) {
  if (arg.getAsDouble(value.value))
    return o.error("'" + arg + "' is not a number");
  return false;
}

void llvm::cl::parser<ExactDouble>::printOptionDiff(
    const Option &o, ExactDouble value, OptVal defaultValue,
    size_t globalWidth) const {
  printOptionName(o, globalWidth);
  outs() << "= " << value;
  if (defaultValue.hasValue())
    outs() << " (default: " << defaultValue.getValue() << ")";
  outs() << "\n";
}
