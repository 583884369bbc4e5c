//===- BackendCompare.cpp - One backend's kernels against another's -------===//

#include "dsc/Runtime/BackendCompare.h"

#include "dsc/Program/Half.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <ostream>
#include <set>
#include <utility>
#include <vector>

namespace dsc::rt {

namespace {

float floatAt(DType t, const void *p, int64_t i) {
  switch (t) {
  case DType::F16:
    return floatFromF16(static_cast<const uint16_t *>(p)[i]);
  case DType::BF16:
    return floatFromBF16(static_cast<const uint16_t *>(p)[i]);
  default:
    return static_cast<const float *>(p)[i];
  }
}

/// A buffer as a report names it: its name, else its id, with its type.
std::string describeBuffer(const Program &p, int id) {
  const Buffer &b = p.buffers[size_t(id)];
  return (b.name.empty() ? "#" + std::to_string(id) : "'" + b.name + "'") +
         " " + shapeStr(b.shape) + ":" + dtypeName(b.dtype);
}

} // namespace

std::string instructionFunctionName(const std::string &function, size_t index) {
  return function + "#" + std::to_string(index);
}

Program withInstructionFunctions(const Program &program,
                                 const std::vector<std::string> &names) {
  Program split = program;
  for (const std::string &name : names) {
    const Function &fn = program.function(name);
    for (size_t i = 0; i < fn.body.size(); ++i) {
      Function one;
      one.name = instructionFunctionName(name, i);
      one.body.push_back(fn.body[i]);
      split.functions[one.name] = std::move(one);
    }
  }
  return split;
}

namespace {

/// relativeBufferError of `n` elements of `dtype` (`bytes` in all).
double relativeError(DType dtype, int64_t n, size_t bytes, const void *ref,
                     const void *got) {
  if (!isFloat(dtype))
    return std::memcmp(ref, got, bytes) == 0 ? 0.0 : INFINITY;
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float a = floatAt(dtype, ref, i), b = floatAt(dtype, got, i);
    if (std::isnan(a) != std::isnan(b))
      return INFINITY;
    if (!std::isnan(a)) {
      diff = std::max(diff, std::fabs(double(b) - double(a)));
      scale = std::max(scale, std::fabs(double(a)));
    }
  }
  return diff == 0 ? 0.0 : diff / std::max(scale, 1e-30);
}

} // namespace

double relativeBufferError(const Buffer &buffer, const void *ref,
                           const void *got) {
  return relativeError(buffer.dtype, buffer.numElements(), buffer.bytes(), ref,
                       got);
}

bool compareInstructionByInstruction(const Program &program,
                                     const std::string &fnName,
                                     Backend &reference, Storage &refMem,
                                     Backend &candidate, Storage &candMem,
                                     const RngContext &rng, double tolerance,
                                     std::ostream &os) {
  const Function &fn = program.function(fnName);
  std::map<std::string, double> worst; // per opcode
  bool ok = true;
  int compared = 0;
  for (size_t i = 0; i < fn.body.size(); ++i) {
    const Instr &I = fn.body[i];
    const Function &alone =
        program.function(instructionFunctionName(fnName, i));
    std::set<int> operands(I.inputs.begin(), I.inputs.end());
    operands.insert(I.outputs.begin(), I.outputs.end());
    const std::vector<int> ids(operands.begin(), operands.end());
    for (int id : ids)
      std::memcpy(candMem.data(id), refMem.data(id),
                  program.buffers[size_t(id)].bytes());
    candidate.upload(candMem, ids);
    reference.run(program, alone, refMem, rng);
    candidate.run(program, alone, candMem, rng);
    candidate.download(candMem, I.outputs);
    for (int id : I.outputs) {
      const double err = relativeBufferError(program.buffers[size_t(id)],
                                             refMem.data(id), candMem.data(id));
      double &w = worst[opcodeName(I.op)];
      w = std::max(w, err);
      ++compared;
      if (!(err <= tolerance) && ok) {
        char line[64];
        std::snprintf(line, sizeof line, "%.3g", err);
        os << "FAIL @" << fnName << " #" << i << " " << opcodeName(I.op)
           << ": buffer " << describeBuffer(program, id)
           << " differs from the reference by " << line
           << " (relative to its largest value; tolerance " << tolerance
           << ")\n";
        ok = false;
      }
    }
  }
  os << "@" << fnName << ": " << compared
     << " buffers compared, each instruction on the reference's operands; "
        "worst relative error per opcode:\n";
  for (const auto &[op, err] : worst) {
    char line[96];
    std::snprintf(line, sizeof line, "  %-28s %.3g\n", op.c_str(), err);
    os << line;
  }
  return ok;
}

bool compareGradients(const Safetensors &reference,
                      const Safetensors &candidate, double tolerance,
                      std::ostream &os) {
  std::vector<std::pair<double, std::string>> errors;
  bool ok = true;
  auto report = [&](const std::string &line) {
    os << "FAIL " << line << "\n";
    ok = false;
  };
  for (const auto &[name, ref] : reference.tensors) {
    if (name != "loss" && name.rfind("grad.", 0) != 0)
      continue;
    auto it = candidate.tensors.find(name);
    if (it == candidate.tensors.end()) {
      report(name + ": missing from the candidate's micro-step");
      continue;
    }
    const Tensor &got = it->second;
    if (got.dtype != ref.dtype || got.shape != ref.shape) {
      report(name + ": " + shapeStr(got.shape) + ":" + dtypeName(got.dtype) +
             " where the reference has " + shapeStr(ref.shape) + ":" +
             dtypeName(ref.dtype));
      continue;
    }
    const double err = relativeError(ref.dtype, elementCount(ref.shape),
                                     ref.bytes.size(), ref.bytes.data(),
                                     got.bytes.data());
    errors.emplace_back(err, name);
    if (!(err <= tolerance)) {
      char line[64];
      std::snprintf(line, sizeof line, "%.3g", err);
      report(name + " differs from the reference by " + line +
             " (relative to its largest value; tolerance " +
             std::to_string(tolerance) + ")");
    }
  }
  std::sort(errors.rbegin(), errors.rend());
  os << errors.size() << " tensors compared (the loss and every parameter's "
     << "gradient); the worst:\n";
  for (size_t i = 0; i < std::min<size_t>(5, errors.size()); ++i) {
    char line[160];
    std::snprintf(line, sizeof line, "  %-48s %.3g\n",
                  errors[i].second.c_str(), errors[i].first);
    os << line;
  }
  if (errors.empty())
    report("the reference's micro-step has no loss or gradients");
  return ok;
}

} // namespace dsc::rt
