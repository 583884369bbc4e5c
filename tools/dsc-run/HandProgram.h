//===- HandProgram.h - A program written in C++ for check-cuda --*- C++ -*-===//
//
// The synthetic checks of `dsc-run check-cuda` (--compression, --epilogues)
// build their programs instruction by instruction: buffers without a
// memory plan (each keeps its value), one function at a time.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_TOOLS_DSCRUN_HANDPROGRAM_H
#define DSC_TOOLS_DSCRUN_HANDPROGRAM_H

#include "dsc/Program/Program.h"

#include <map>
#include <string>
#include <vector>

namespace dsc {

struct HandProgram {
  rt::Program prog;
  rt::Function fn; ///< the function being written
  /// The Input and Output buffers, in the order made.
  std::vector<int> inputs, outputs;

  int buffer(const std::string &name, std::vector<int64_t> shape,
             rt::BufferRole role, rt::DType dtype = rt::DType::F32) {
    rt::Buffer b;
    b.name = name;
    b.role = role;
    b.dtype = dtype;
    b.shape = std::move(shape);
    prog.buffers.push_back(b);
    const int id = int(prog.buffers.size() - 1);
    if (role == rt::BufferRole::Input)
      inputs.push_back(id);
    else if (role == rt::BufferRole::Output)
      outputs.push_back(id);
    return id;
  }
  int input(const std::string &name, std::vector<int64_t> shape,
            rt::DType dtype = rt::DType::F32) {
    return buffer(name, std::move(shape), rt::BufferRole::Input, dtype);
  }
  int output(const std::string &name, std::vector<int64_t> shape,
             rt::DType dtype = rt::DType::F32) {
    return buffer(name, std::move(shape), rt::BufferRole::Output, dtype);
  }
  int temp(const std::string &name, std::vector<int64_t> shape,
           rt::DType dtype = rt::DType::F32) {
    return buffer(name, std::move(shape), rt::BufferRole::Temp, dtype);
  }
  void add(rt::Opcode op, std::vector<int> ins, std::vector<int> outs,
           std::map<std::string, rt::AttrValue> attrs = {}) {
    rt::Instr I;
    I.op = op;
    I.inputs = std::move(ins);
    I.outputs = std::move(outs);
    I.attrs = std::move(attrs);
    fn.body.push_back(I);
  }
  /// Adds the function written so far to the program and starts `next`.
  void finish(const std::string &next = "") {
    prog.functions[fn.name] = fn;
    fn = {};
    fn.name = next;
  }
};

} // namespace dsc

#endif // DSC_TOOLS_DSCRUN_HANDPROGRAM_H
