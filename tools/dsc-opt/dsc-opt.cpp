//===- dsc-opt.cpp - dsc pass driver --------------------------------------===//
//
// MlirOptMain with the dsc dialect, every dsc pass and --dsc-train-pipeline.
//
//===----------------------------------------------------------------------===//

#include "dsc/Support/OutputFile.h"
#include "dsc/Support/Files.h"
#include "dsc/Support/IRNesting.h"
#include "dsc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <cerrno>
#include <cstring>
#include <sys/stat.h>
#include <unistd.h>

namespace {

/// All of stdin.
std::string readStdin() {
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
  const std::string name = input == "-" ? "<stdin>" : input;
  // MLIR would read a FIFO or /dev/zero forever, and overflow its stack on
  // IR nested thousands of levels deep: the input is read and checked here
  // and handed to MLIR as a buffer. A file output is written only when all
  // passed, through a temporary and a rename: MLIR's own -o truncates the
  // file at the start and deletes it on failure, destroying what was there.
  // A device or FIFO (-o /dev/null) is written in place.
  struct stat st;
  const bool stream =
      output == "-" || (::stat(output.c_str(), &st) == 0 &&
                        (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)));
  std::string text;
  try {
    text = input == "-" ? readStdin() : dsc::readRegularFile(input);
    dsc::checkIRNesting(text, name);
    if (!stream)
      dsc::checkOutputFile(output, "-o");
  } catch (const std::exception &e) {
    llvm::errs() << "dsc-opt: " << e.what() << "\n";
    return 1;
  }
  std::string result;
  llvm::raw_string_ostream os(result);
  if (mlir::failed(mlir::MlirOptMain(
          os, llvm::MemoryBuffer::getMemBufferCopy(text, name), registry,
          mlir::MlirOptMainConfig::createFromCLOptions())))
    return 1;
  os.flush();
  if (stream) {
    std::error_code ec;
    llvm::raw_fd_ostream out(output, ec);
    if (!ec)
      out << result;
    out.flush();
    if (ec || out.has_error()) {
      llvm::errs() << "dsc-opt: cannot write " << output << "\n";
      out.clear_error();
      return 1;
    }
    return 0;
  }
  try {
    dsc::writeFileAtomic(output, result);
  } catch (const std::exception &e) {
    llvm::errs() << "dsc-opt: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
