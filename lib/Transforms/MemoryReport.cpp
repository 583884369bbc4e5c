//===- MemoryReport.cpp - Print the static memory plan of a step ----------===//
//
// -dsc-memory-report: the compiler-side view of what `dsc-run estimate`
// prints. The module is lowered to the runtime Program (the same lowering
// dsc-run uses, so the numbers agree), planned by lib/Program/MemoryPlan.cpp
// and reported on stdout; the IR is left untouched.
//
//===----------------------------------------------------------------------===//

#include "dsc/Codegen/LowerToProgram.h"
#include "dsc/Program/MemoryPlan.h"
#include "dsc/Transforms/Passes.h"

#include "llvm/Support/raw_ostream.h"

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCMEMORYREPORT
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
// Runtime-side names (namespace ::dsc) come in here, once.
namespace rt = ::dsc::rt;
using ::dsc::lowerToProgram;
using ::dsc::MemoryPlan;
using ::dsc::planMemory;
using ::dsc::MemoryReport;
using ::dsc::reportMemory;
using ::dsc::formatMemoryJson;
using ::dsc::formatMemoryTable;

namespace {

struct MemoryReportPass
    : mlir::dsc::impl::DscMemoryReportBase<MemoryReportPass> {
  using DscMemoryReportBase::DscMemoryReportBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<rt::Program> program = lowerToProgram(module);
    if (failed(program))
      return signalPassFailure();
    MemoryPlan plan;
    std::string error;
    if (!planMemory(*program, plan, error)) {
      module.emitError("dsc-memory-report: ") << error;
      return signalPassFailure();
    }
    MemoryReport report = reportMemory(*program, plan);
    llvm::outs() << (format == mlir::dsc::MemoryReportFormat::Json
                         ? formatMemoryJson(report)
                         : formatMemoryTable(report));
    llvm::outs().flush();
    markAllAnalysesPreserved();
  }
};

} // namespace
