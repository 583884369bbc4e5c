//===- ExactDouble.h - A floating-point pass option that round-trips -*- C++ -*-===//
//
// MLIR prints a `double` pass option with raw_ostream's "%e" (7 significant
// digits), so `dsc-run compile --print-pipeline` would print lr=1.234568e-04
// for a configured 1.23456789e-4 and a replay with dsc-opt would train with
// another learning rate. Options of type ExactDouble print the shortest
// decimal that parses back to the same double.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_TRANSFORMS_EXACTDOUBLE_H
#define DSC_TRANSFORMS_EXACTDOUBLE_H

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::dsc {

struct ExactDouble {
  double value = 0.0;
  ExactDouble() = default;
  ExactDouble(double v) : value(v) {}
  operator double() const { return value; }
};

/// The shortest decimal that reads back as `d.value`.
llvm::raw_ostream &operator<<(llvm::raw_ostream &os, ExactDouble d);

} // namespace mlir::dsc

namespace llvm::cl {
template <>
class parser<mlir::dsc::ExactDouble>
    : public basic_parser<mlir::dsc::ExactDouble> {
public:
  parser(Option &o) : basic_parser(o) {}
  /// True on error, as every cl parser.
  bool parse(Option &o, StringRef argName, StringRef arg,
             mlir::dsc::ExactDouble &value);
  StringRef getValueName() const override { return "number"; }
  void printOptionDiff(const Option &o, mlir::dsc::ExactDouble value,
                       OptVal defaultValue, size_t globalWidth) const;
};
} // namespace llvm::cl

#endif // DSC_TRANSFORMS_EXACTDOUBLE_H
