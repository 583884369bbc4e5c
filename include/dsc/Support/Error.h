//===- Error.h - The base of dsc's user-facing errors -----------*- C++ -*-===//
//
// Every failure dsc reports to a user (a bad file, config, program, shape,
// flag or environment) is a dsc::Error, or a subclass naming what was being
// read, with a one-line message; the tools print it and exit non-zero.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_SUPPORT_ERROR_H
#define DSC_SUPPORT_ERROR_H

#include <stdexcept>

namespace dsc {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

} // namespace dsc

#endif // DSC_SUPPORT_ERROR_H
