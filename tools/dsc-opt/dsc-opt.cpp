//===- dsc-opt.cpp - dsc pass driver --------------------------------------===//
//
// MlirOptMain with the dsc dialect, every dsc pass and --dsc-train-pipeline.
//
//===----------------------------------------------------------------------===//

#include "dsc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<mlir::dsc::DscDialect, mlir::func::FuncDialect>();
  mlir::dsc::registerDscPasses();
  mlir::dsc::registerTrainingPipeline();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "dsc optimizer driver\n", registry));
}
