//===- OpcodeProfile.cpp - Time per opcode, printed at the end ------------===//

#include "dsc/Runtime/OpcodeProfile.h"
#include "dsc/Support/Environment.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace dsc::rt {

bool profileRequested() { return envFlag("DSC_PROFILE", false); }

void OpcodeProfile::add(Opcode op, double seconds) {
  auto &[total, calls] = entries[op];
  total += seconds;
  ++calls;
}

OpcodeProfile::~OpcodeProfile() {
  if (entries.empty())
    return;
  std::vector<std::pair<double, Opcode>> order;
  double all = 0;
  for (auto &[op, entry] : entries) {
    order.push_back({entry.first, op});
    all += entry.first;
  }
  std::sort(order.rbegin(), order.rend());
  std::fprintf(stderr, "dsc %s profile: %.3f s in %zu opcodes\n",
               backend.c_str(), all, order.size());
  for (auto &[seconds, op] : order)
    std::fprintf(stderr, "  %-24s %9.4f s %5.1f%% %8lld calls\n",
                 opcodeName(op), seconds, 100 * seconds / all,
                 (long long)entries[op].second);
}

} // namespace dsc::rt
