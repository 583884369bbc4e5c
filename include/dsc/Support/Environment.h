//===- Environment.h - Boolean DSC_* environment variables ------*- C++ -*-===//
//
// DSC_PROFILE, DSC_NO_MEMORY_PLAN, DSC_CUDA_GRAPHS and DSC_CUDA_VERBOSE are
// switches: "0" or "1". Anything else ("yes", "2", "maybe") was read as one
// or the other depending on the variable; now it is an error naming it.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_SUPPORT_ENVIRONMENT_H
#define DSC_SUPPORT_ENVIRONMENT_H

#include "dsc/Support/Error.h"

namespace dsc {

class EnvironmentError : public Error {
public:
  using Error::Error;
};

/// The switch `name`: `absent` when unset or empty, false for "0", true
/// for "1"; throws EnvironmentError "environment variable NAME='v' is not
/// 0 or 1" for anything else.
bool envFlag(const char *name, bool absent);

} // namespace dsc

#endif // DSC_SUPPORT_ENVIRONMENT_H
