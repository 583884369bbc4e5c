//===- dsc-opt.cpp - dsc pass driver --------------------------------------===//
//
// MlirOptMain with the dsc dialect, every dsc pass and --dsc-train-pipeline.
//
//===----------------------------------------------------------------------===//

#include "dsc/Support/Files.h"
#include "dsc/Support/IRNesting.h"
#include "dsc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/raw_ostream.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <unistd.h>

namespace {

/// Reads all of stdin and makes fd 0 an unlinked temporary file holding the
/// same bytes, rewound; returns them.
std::string stdinThroughTemporary() {
  std::string text;
  char chunk[1 << 16];
  for (ssize_t n; (n = ::read(0, chunk, sizeof chunk)) != 0;) {
    if (n < 0) {
      if (errno == EINTR)
        continue;
      throw dsc::FileError(std::string("cannot read stdin: ") +
                           std::strerror(errno));
    }
    text.append(chunk, size_t(n));
  }
  FILE *copy = std::tmpfile();
  if (!copy || std::fwrite(text.data(), 1, text.size(), copy) != text.size() ||
      std::fflush(copy) != 0 || ::lseek(fileno(copy), 0, SEEK_SET) != 0 ||
      ::dup2(fileno(copy), 0) < 0)
    throw dsc::FileError(std::string("cannot buffer stdin: ") +
                         std::strerror(errno));
  return text;
}

} // namespace

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<mlir::dsc::DscDialect, mlir::func::FuncDialect>();
  mlir::dsc::registerDscPasses();
  mlir::dsc::registerTrainingPipeline();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  auto [input, output] = mlir::registerAndParseCLIOptions(
      argc, argv, "dsc optimizer driver\n", registry);
  // MLIR would read a FIFO or /dev/zero forever, and overflow its stack on
  // IR nested thousands of levels deep: refuse both before it parses ("-" is
  // stdin, as usual; it is read here and handed on through a temporary
  // file as fd 0, so MLIR still reports "<stdin>").
  try {
    if (input == "-")
      dsc::checkIRNesting(stdinThroughTemporary(), "<stdin>");
    else
      dsc::checkIRNesting(dsc::readRegularFile(input), input);
  } catch (const dsc::FileError &e) {
    llvm::errs() << "dsc-opt: " << e.what() << "\n";
    return 1;
  }
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, input, output, registry));
}
