//===- Memory.cpp - dsc-run's memory planning and reports -----------------===//

#include "Memory.h"

#include "dsc/Support/OutputFile.h"
#include "dsc/Program/Program.h"
#include "dsc/Support/Environment.h"

#include <cstdlib>
#include <string>

using namespace dsc;

bool dsc::memoryPlanningEnabled() {
  return !envFlag("DSC_NO_MEMORY_PLAN", false);
}

MemoryReport dsc::planStep(rt::Program &program, bool apply) {
  MemoryPlan plan;
  std::string error;
  if (!planMemory(program, plan, error))
    throw dsc::Error("cannot plan the step's memory: " + error);
  if (apply)
    applyMemoryPlan(program, plan);
  return reportMemory(program, plan);
}

void dsc::writeMemoryReport(const MemoryReport &report,
                            const std::string &path) {
  dsc::writeFileAtomic(path, formatMemoryJson(report));
}
