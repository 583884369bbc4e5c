//===- CommonEmit.cpp - Helpers of the families' CUDA emit logic ----------===//
//
// Template calls, literals and the launch shape of a grid-stride kernel:
// what every <Family>Emit.cpp writes its launchers with.
//
//===----------------------------------------------------------------------===//

#include "Common/CommonEmit.h"

namespace dsc::cuda::detail {

std::string tmpl(const std::string &name,
                 const std::vector<std::string> &targs) {
  std::string s = "dsc::" + name + "<";
  for (size_t i = 0; i < targs.size(); ++i)
    s += (i ? ", " : "") + targs[i];
  return s + ">";
}

std::string call(const std::string &fn, const std::vector<std::string> &targs,
                 const std::vector<std::string> &args) {
  std::string s = tmpl(fn, targs) + "(";
  for (size_t i = 0; i < args.size(); ++i)
    s += (i ? ", " : "") + args[i];
  return s + ");";
}

std::string b(bool v) { return v ? "true" : "false"; }
std::string n(int64_t v) { return num(v); }
std::string ll(int64_t v) { return std::to_string(v) + "LL"; }

/// Elementwise launch: `items` work items of a grid-stride loop.
void elementwise(KernelSpec &s, int64_t items,
                 const std::vector<std::string> &args,
                 const std::string &body) {
  s.kernel(gridFor(items, kBlock), kBlock, args, body);
}

std::string rowArgs(const RowConfig &c) {
  return std::to_string(c.threads) + ", " + std::to_string(c.items) + ", " +
         std::to_string(c.vec);
}

} // namespace dsc::cuda::detail
