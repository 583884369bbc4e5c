//===- dsc-opt.cpp - dsc pass driver --------------------------------------===//
//
// MlirOptMain with the dsc dialect, every dsc pass and --dsc-train-pipeline.
//
//===----------------------------------------------------------------------===//

#include "dsc/Support/Files.h"
#include "dsc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/raw_ostream.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<mlir::dsc::DscDialect, mlir::func::FuncDialect>();
  mlir::dsc::registerDscPasses();
  mlir::dsc::registerTrainingPipeline();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  auto [input, output] = mlir::registerAndParseCLIOptions(
      argc, argv, "dsc optimizer driver\n", registry);
  // MLIR would read a FIFO or /dev/zero forever: refuse anything but a
  // regular file ("-" is stdin, as usual).
  if (input != "-") {
    try {
      dsc::requireRegularFile(input);
    } catch (const dsc::FileError &e) {
      llvm::errs() << "dsc-opt: " << e.what() << "\n";
      return 1;
    }
  }
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, input, output, registry));
}
