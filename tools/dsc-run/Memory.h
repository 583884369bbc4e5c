//===- Memory.h - dsc-run's memory planning and reports ---------*- C++ -*-===//
//
// Plans the lowered step's static arena (lib/Program/MemoryPlan.cpp) for
// `dsc-run train`, `demo` and `estimate`, and writes the memory report.
// DSC_NO_MEMORY_PLAN=1 runs the step with one allocation per buffer instead
// (the report is still computed), so the two paths can be compared.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_TOOLS_DSCRUN_MEMORY_H
#define DSC_TOOLS_DSCRUN_MEMORY_H

#include "dsc/Program/MemoryPlan.h"

namespace dsc {

/// True unless DSC_NO_MEMORY_PLAN is set to something other than "0".
bool memoryPlanningEnabled();

/// Plans `program`; applies the plan when `apply`. Throws dsc::Error if the
/// planner rejects the program. Allocates nothing.
MemoryReport planStep(rt::Program &program, bool apply);

/// Writes formatMemoryJson(report) to `path` atomically (temp + rename).
void writeMemoryReport(const MemoryReport &report, const std::string &path);

} // namespace dsc

#endif // DSC_TOOLS_DSCRUN_MEMORY_H
