//===- MlirFuzzer.cpp - The MLIR-text entry points of the tools -----------===//
//
// What dsc-opt, dsc-translate and `dsc-run train STEP.mlir` do with user IR:
// dsc::checkIRNesting, then mlir::parseSourceString<ModuleOp> with the dsc
// and func dialects loaded, mlir::verify, and for a module that verifies
// lowerToProgram, then rt::checkInstr on every instruction of the program
// (what each backend checks before it runs one). Accepted: FileError from
// the nesting check, parse/verify/lowering failures reported as diagnostics,
// rt::Error from checkInstr.
//
//===----------------------------------------------------------------------===//

#include "FuzzCommon.h"

#include "dsc/Codegen/LowerToProgram.h"
#include "dsc/Dialect/DscDialect.h"
#include "dsc/Program/InstrCheck.h"
#include "dsc/Support/Files.h"
#include "dsc/Support/IRNesting.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

using namespace dsc;

/// LLVM's BumpPtrAllocator poisons its free slab space when the code that
/// instantiates it is built with ASan (ours, here) but not in Debian's
/// libMLIR (gcc, no sanitizer): libMLIR then touches memory our copy of the
/// template poisoned, a false use-after-poison. Only manual poisoning is
/// turned off; ASan's own checks stay.
extern "C" const char *__asan_default_options() {
  return "allow_user_poisoning=0";
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // The tools parse a std::string they read (never a null buffer: MLIR's
  // lexer takes a null position for its code-completion point).
  const std::string text(fuzz::bytesOf(data, size));
  try {
    checkIRNesting(text, "fuzz.mlir");
  } catch (const FileError &) {
    return 0;
  } catch (...) {
    fuzz::unexpectedException();
  }
  try {
    // A fresh context per input: a shared one would keep every attribute
    // and type ever parsed (memory grows over a run).
    mlir::MLIRContext ctx(mlir::MLIRContext::Threading::DISABLED);
    ctx.loadDialect<mlir::dsc::DscDialect, mlir::func::FuncDialect>();
    mlir::ScopedDiagnosticHandler quiet(
        &ctx, [](mlir::Diagnostic &) { return mlir::success(); });
    mlir::OwningOpRef<mlir::ModuleOp> module =
        mlir::parseSourceString<mlir::ModuleOp>(text, &ctx, "fuzz.mlir");
    if (!module || mlir::failed(mlir::verify(*module)))
      return 0;
    mlir::FailureOr<rt::Program> program = lowerToProgram(*module);
    if (mlir::failed(program))
      return 0;
    for (const auto &[name, fn] : program->functions)
      for (const rt::Instr &instr : fn.body) {
        try {
          rt::checkInstr(*program, instr);
        } catch (const rt::Error &) {
        }
      }
  } catch (...) {
    fuzz::unexpectedException();
  }
  return 0;
}
