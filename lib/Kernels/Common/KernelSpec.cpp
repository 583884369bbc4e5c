//===- KernelSpec.cpp - The launcher one instruction becomes --------------===//
//
// KernelSpec (KernelSpec.h): parameters, kernels and launches of one
// instruction's launcher, and the literals and launch shapes the kernel
// families' emitters share.
//
//===----------------------------------------------------------------------===//

#include "Common/KernelSpec.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace dsc::cuda {

const char *storageCType(Storage s) {
  switch (s) {
  case Storage::F32:
    return "float";
  case Storage::F16:
    return "__half";
  case Storage::BF16:
    return "__nv_bfloat16";
  case Storage::I32:
    return "int";
  case Storage::I64:
    return "long long";
  case Storage::I8:
    return "signed char";
  case Storage::U8:
    return "unsigned char";
  }
  return "void";
}

namespace detail {

std::string flt(double v) {
  const float f = float(v);
  if (std::isnan(f))
    throw rt::Error("cuda emitter: NaN attribute value");
  if (std::isinf(f))
    return f > 0 ? "__int_as_float(0x7f800000)" : "__int_as_float(0xff800000)";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%af", double(f));
  return buf;
}

std::string dbl(double v) {
  if (std::isnan(v))
    throw rt::Error("cuda emitter: NaN attribute value");
  if (std::isinf(v))
    return v > 0 ? "__longlong_as_double(0x7ff0000000000000LL)"
                 : "__longlong_as_double(0xfff0000000000000LL)";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}

std::string num(int64_t v) {
  return std::to_string(v) + (v > 2147483647LL || v < -2147483647LL ? "LL" : "");
}

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

int vecFor(int64_t n) { return n % 4 == 0 ? 4 : 1; }

int64_t gridFor(int64_t items, int block) {
  return std::max<int64_t>(1, std::min<int64_t>(ceilDiv(items, block), 65536));
}

KernelSpec::KernelSpec(const rt::Program &program, const rt::Instr &instr)
    : program(program), I(instr),
      opName(rt::opcodeName(instr.op)) {
  launcher.op = instr.op;
}

void KernelSpec::fail(const std::string &message) const {
  throw rt::Error(opName + ": " + message);
}

const rt::Buffer &KernelSpec::inBuf(size_t k) const {
  return program.buffers[size_t(inId(k))];
}
const rt::Buffer &KernelSpec::outBuf(size_t k) const {
  if (k >= I.outputs.size())
    fail("missing output #" + std::to_string(k));
  return program.buffers[size_t(I.outputs[k])];
}

int KernelSpec::inId(size_t k) const {
  if (k >= I.inputs.size())
    fail("missing input #" + std::to_string(k));
  int id = I.inputs[k];
  if (id < 0 || size_t(id) >= program.buffers.size())
    fail("buffer id " + std::to_string(id) + " out of range");
  return id;
}

int KernelSpec::outId(size_t k) const {
  if (k >= I.outputs.size())
    fail("missing output #" + std::to_string(k));
  int id = I.outputs[k];
  if (id < 0 || size_t(id) >= program.buffers.size())
    fail("buffer id " + std::to_string(id) + " out of range");
  return id;
}

void KernelSpec::requireType(Storage s, Storage want,
                             const std::string &name) const {
  if (s != want)
    fail(name + " must be stored as " + rt::dtypeName(want) + ", got " +
         rt::dtypeName(s));
}

std::string KernelSpec::buffer(int id, bool output, const std::string &name) {
  const Storage s = program.buffers[size_t(id)].dtype;
  Param p{Param::Kind::Buffer, name,
          std::string(output ? "" : "const ") + storageCType(s) + " *"};
  launcher.params.push_back(p);
  Step::Arg a;
  a.buffers.push_back(id);
  args.push_back(a);
  types[name] = s;
  return name;
}

std::string KernelSpec::in(size_t k, const std::string &name) {
  return buffer(inId(k), false, name);
}

std::string KernelSpec::out(size_t k, const std::string &name) {
  return buffer(outId(k), true, name);
}

std::string KernelSpec::table(const std::string &name,
                              const std::vector<int> &ids, bool output) {
  for (int id : ids)
    if (program.buffers[size_t(id)].dtype != Storage::F32)
      fail("multi-tensor operand '" + program.buffers[size_t(id)].name +
           "' must be stored as f32, got " +
           rt::dtypeName(program.buffers[size_t(id)].dtype));
  Param p{Param::Kind::Table, name,
          output ? "float *const *" : "const float *const *", int(ids.size())};
  launcher.params.push_back(p);
  Step::Arg a;
  a.buffers = ids;
  args.push_back(a);
  return name;
}

std::string KernelSpec::rng() {
  launcher.params.push_back({Param::Kind::Stream, "stream", "unsigned int"});
  Step::Arg a;
  a.value = uint64_t(uint32_t(I.getInt("stream")));
  args.push_back(a);
  launcher.params.push_back({Param::Kind::Seed, "seed", "unsigned long long"});
  args.push_back({});
  launcher.params.push_back(
      {Param::Kind::Offset, "offset", "unsigned long long"});
  args.push_back({});
  return "dsc::Rng{stream, seed, offset}";
}

std::string KernelSpec::scratch(int64_t bytes) {
  launcher.scratchBytes = std::max(launcher.scratchBytes, bytes);
  if (paramIndex("dsc_scratch") < 0) {
    launcher.params.push_back({Param::Kind::Scratch, "dsc_scratch", "void *"});
    args.push_back({});
  }
  return "dsc_scratch";
}

std::string KernelSpec::groupRank(rt::MeshAxis axis) {
  if (paramIndex("group_rank") < 0) {
    launcher.params.push_back({Param::Kind::GroupRank, "group_rank", "int"});
    Step::Arg a;
    a.value = uint64_t(axis);
    args.push_back(a);
  }
  return "group_rank";
}

std::string KernelSpec::T(const std::string &name) const {
  auto it = types.find(name);
  if (it == types.end())
    fail("internal: no buffer parameter '" + name + "'");
  return storageCType(it->second);
}

std::string KernelSpec::status(const std::string &reason) {
  reasons.push_back(reason);
  return "$S" + std::to_string(reasons.size() - 1) + "u";
}

std::string KernelSpec::constArray(const std::string &name,
                                   const std::vector<int64_t> &values) {
  return namespaceArray("__constant__ dsc_i64", name, values);
}

std::string KernelSpec::deviceArray(const std::string &name,
                                    const std::vector<int32_t> &values) {
  return namespaceArray("__device__ const int", name,
                        std::vector<int64_t>(values.begin(), values.end()));
}

std::string KernelSpec::namespaceArray(const std::string &declaration,
                                       const std::string &name,
                                       const std::vector<int64_t> &values) {
  std::string full = "$K_" + name;
  device += declaration + " " + full + "[" +
            std::to_string(std::max<size_t>(1, values.size())) + "] = {";
  for (size_t i = 0; i < values.size(); ++i)
    device += (i ? ", " : "") + num(values[i]);
  if (values.empty())
    device += "0";
  device += "};\n";
  return full;
}

int KernelSpec::paramIndex(const std::string &name) const {
  for (size_t i = 0; i < launcher.params.size(); ++i)
    if (launcher.params[i].name == name)
      return int(i);
  return -1;
}

void KernelSpec::kernel(int64_t grid, int block,
                        const std::vector<std::string> &argNames,
                        const std::string &body) {
  KernelLaunch k;
  k.kernel = "$K_k" + std::to_string(launcher.kernels.size());
  k.grid = grid;
  k.block = block;
  std::string decls;
  for (const std::string &n : argNames) {
    int idx = paramIndex(n);
    if (idx < 0)
      fail("internal: kernel argument '" + n + "' is not a parameter");
    k.args.push_back(idx);
    const Param &p = launcher.params[size_t(idx)];
    std::string decl = p.kind == Param::Kind::Table
                           ? "dsc::Ptrs<" + std::to_string(p.tableSize) + "> "
                           : p.ctype + (p.ctype.back() == '*' ? "" : " ");
    decls += (decls.empty() ? "" : ", ") + decl + n;
  }
  device += "extern \"C\" __global__ void __launch_bounds__(" +
            std::to_string(block) + ") " + k.kernel + "(" + decls +
            ") {\n  " + body + "\n}\n";
  launcher.kernels.push_back(k);
}

RowConfig KernelSpec::rowConfig(int64_t rows, int64_t C) const {
  RowConfig c;
  c.vec = vecFor(C);
  const int64_t groups = ceilDiv(C, c.vec);
  while (c.threads < 1024 && ceilDiv(groups, c.threads) > 8)
    c.threads *= 2;
  c.items = int(ceilDiv(groups, c.threads));
  if (c.items > 32)
    fail("rows of " + std::to_string(C) +
         " elements are too long for a register-cached row kernel (at most " +
         std::to_string(32 * 1024 * c.vec) + ")");
  c.block = c.threads == 32 ? 128 : c.threads;
  c.grid = std::max<int64_t>(1, c.threads == 32 ? ceilDiv(rows, 4) : rows);
  return c;
}

} // namespace detail

} // namespace dsc::cuda
