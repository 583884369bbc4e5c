//===- TorchExtension.cpp - CUDA module -> PyTorch extension --------------===//
//
// Writes a PyTorch C++ extension around the launchers of an emitted CUDA
// module. What each launcher accepts comes from the program: a launcher
// serves every instruction with the same generated code, so a tensor
// argument may have any of the shapes those instructions' buffers have (in
// practice one), and its dtype is the buffer's storage type. The checks run
// in the bindings, before any CUDA call, so a wrong argument (a CPU tensor
// included) is a one-line Python TypeError/ValueError naming the launcher
// and the argument.
//
//===----------------------------------------------------------------------===//

#include "dsc/Codegen/TorchExtension.h"
#include "dsc/Support/Hash.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>

namespace dsc::cuda {
namespace {

using Shape = std::vector<int64_t>;

/// Everything the bindings need about one launcher.
struct LauncherInfo {
  const Launcher *launcher = nullptr;
  /// Per parameter: the shapes it was called with (Buffer: one shape per
  /// alternative; Table: the list of the table's shapes per alternative).
  std::vector<std::set<std::vector<Shape>>> shapes;
  std::vector<Storage> storage; ///< per Buffer parameter, else F32
  const rt::Instr *first = nullptr; ///< attributes for the metadata
};

const char *atenType(Storage s) {
  switch (s) {
  case Storage::F32:
    return "at::kFloat";
  case Storage::F16:
    return "at::kHalf";
  case Storage::BF16:
    return "at::kBFloat16";
  case Storage::I32:
    return "at::kInt";
  case Storage::I64:
    return "at::kLong";
  case Storage::I8:
    return "at::kChar";
  case Storage::U8:
    return "at::kByte";
  }
  throw dsc::Error("torch extension: invalid buffer dtype");
}

const char *torchDtype(Storage s) {
  switch (s) {
  case Storage::F32:
    return "float32";
  case Storage::F16:
    return "float16";
  case Storage::BF16:
    return "bfloat16";
  case Storage::I32:
    return "int32";
  case Storage::I64:
    return "int64";
  case Storage::I8:
    return "int8";
  case Storage::U8:
    return "uint8";
  }
  throw dsc::Error("torch extension: invalid buffer dtype");
}

/// `{2, 32, 128}` (C++ braces) or `[2, 32, 128]` (Python).
std::string shapeList(const Shape &s, bool python) {
  std::string out = python ? "[" : "{";
  for (size_t i = 0; i < s.size(); ++i)
    out += (i ? ", " : "") + std::to_string(s[i]);
  return out + (python ? "]" : "}");
}

/// A Python string literal (names, summaries and messages are ASCII).
std::string pyStr(const std::string &s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string pyFloat(double v) {
  if (std::isnan(v))
    return "float(\"nan\")";
  if (std::isinf(v))
    return v > 0 ? "float(\"inf\")" : "-float(\"inf\")";
  // The shortest text that reads back as v, as Python's repr writes it.
  char buf[32];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v)
      break;
  }
  std::string s = buf;
  if (s.find_first_of(".eE") == std::string::npos)
    s += ".0";
  return s;
}

std::string pyAttr(const rt::AttrValue &v) {
  if (const int64_t *i = std::get_if<int64_t>(&v))
    return std::to_string(*i);
  if (const double *d = std::get_if<double>(&v))
    return pyFloat(*d);
  if (const rt::BlockLayout *l = std::get_if<rt::BlockLayout>(&v))
    return "{'block': " + std::to_string(l->block) +
           ", 'heads': " + std::to_string(l->heads) +
           ", 'blocks': " + std::to_string(l->blocks) + "}";
  return pyStr(std::get<std::string>(v));
}

/// FNV-1a: names the compiled module after its sources, so extensions of
/// different steps can be loaded into one process side by side.
std::string hashName(const std::string &a, const std::string &b) {
  const uint64_t h = fnv1a64(b, fnv1a64(a));
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return std::string("dsc_ext_") + std::string(buf, 10);
}

std::vector<LauncherInfo> collect(const rt::Program &program,
                                  const Module &module) {
  std::vector<LauncherInfo> infos(module.launchers.size());
  for (size_t l = 0; l < infos.size(); ++l) {
    const Launcher &L = module.launchers[l];
    infos[l].launcher = &L;
    infos[l].shapes.resize(L.params.size());
    infos[l].storage.assign(L.params.size(), Storage::F32);
  }
  for (const auto &[fnName, steps] : module.steps) {
    const rt::Function &fn = program.function(fnName);
    for (const Step &s : steps) {
      if (s.kind != Step::Kind::Kernel)
        continue;
      LauncherInfo &info = infos[size_t(s.index)];
      if (!info.first)
        info.first = &fn.body[s.instrs.front()];
      for (size_t p = 0; p < info.launcher->params.size(); ++p) {
        const Param &param = info.launcher->params[p];
        if (param.kind != Param::Kind::Buffer &&
            param.kind != Param::Kind::Table)
          continue;
        std::vector<Shape> shapes;
        for (int id : s.args[p].buffers)
          shapes.push_back(program.buffers[size_t(id)].shape);
        info.shapes[p].insert(shapes);
        if (param.kind == Param::Kind::Buffer)
          info.storage[p] = program.buffers[size_t(s.args[p].buffers[0])].dtype;
      }
    }
  }
  return infos;
}

bool isTensor(const Param &p) {
  return p.kind == Param::Kind::Buffer || p.kind == Param::Kind::Table;
}

/// The pointer type in a table parameter's C type (`const float *const *`
/// -> `const float *`).
std::string tableEntry(const Param &p) {
  return p.ctype.substr(0, p.ctype.find(" *")) + " *";
}

const char *kBindingPrologue = R"gen(// Generated by dsc-translate --emit-torch-extension. Do not edit.
//
// pybind11 bindings of the C-ABI launchers in dsc_kernels.cu (the Python
// API is dsc_ext.py; building: README.md). Each binding checks every tensor
// against what its launcher was specialised for and then launches on the
// CUDA stream passed in as an integer (dsc_ext.py passes
// torch.cuda.current_stream().cuda_stream). No ATen CUDA header is used, so
// this file also compiles against a CPU-only torch.
#include <torch/extension.h>

#include "dsc_kernels.h"

#include <cstdint>
#include <string>
#include <vector>

extern "C" cudaError_t dsc_ext_take_status(unsigned int *code,
                                           cudaStream_t cuda_stream);

namespace {

using Shape = std::vector<int64_t>;

std::string shapeStr(at::IntArrayRef s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i)
    out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

/// torch.float32, ... as Python users know them.
std::string dtypeName(at::ScalarType t) {
  switch (t) {
  case at::kFloat:
    return "torch.float32";
  case at::kHalf:
    return "torch.float16";
  case at::kBFloat16:
    return "torch.bfloat16";
  case at::kInt:
    return "torch.int32";
  case at::kLong:
    return "torch.int64";
  default:
    return c10::toString(t);
  }
}

std::string argName(const char *fn, const std::string &arg) {
  return std::string(fn) + ": argument '" + arg + "'";
}

/// Device, dtype, contiguity and alignment of one tensor argument; `device`
/// is that of the first tensor argument (null for the first itself).
void checkTensor(const char *fn, const std::string &arg, const at::Tensor &t,
                 at::ScalarType dtype, const at::Device *device) {
  if (!t.defined())
    throw pybind11::type_error(argName(fn, arg) + " is an undefined tensor");
  if (!t.is_cuda())
    throw pybind11::type_error(argName(fn, arg) +
                               " must be a CUDA tensor, got " +
                               t.device().str());
  if (device && t.device() != *device)
    throw pybind11::value_error(argName(fn, arg) + " is on " +
                                t.device().str() + ", the first tensor on " +
                                device->str());
  if (t.scalar_type() != dtype)
    throw pybind11::type_error(argName(fn, arg) + " must be " +
                               dtypeName(dtype) + ", got " +
                               dtypeName(t.scalar_type()));
  if (!t.is_contiguous())
    throw pybind11::value_error(argName(fn, arg) + " must be contiguous");
  // The kernels use 16-byte vector loads (float4, 2 x __half2).
  if (reinterpret_cast<std::uintptr_t>(t.data_ptr()) % 16 != 0)
    throw pybind11::value_error(argName(fn, arg) +
                                " must be 16-byte aligned (a view at an "
                                "offset?)");
}

void checkShape(const char *fn, const std::string &arg, const at::Tensor &t,
                const std::vector<Shape> &shapes) {
  std::string want;
  for (const Shape &s : shapes) {
    if (t.sizes() == at::IntArrayRef(s))
      return;
    want += (want.empty() ? "" : " or ") + shapeStr(s);
  }
  throw pybind11::value_error(argName(fn, arg) + " must have shape " + want +
                              ", got " + shapeStr(t.sizes()));
}

/// A multi-tensor argument: `size` f32 tensors whose shapes are one of
/// `tables` (a launcher's tables all have the same shapes in practice).
void checkTable(const char *fn, const std::string &arg,
                const std::vector<at::Tensor> &ts, size_t size,
                const std::vector<std::vector<Shape>> &tables,
                const at::Device *device) {
  if (ts.size() != size)
    throw pybind11::value_error(argName(fn, arg) + " must be a list of " +
                                std::to_string(size) + " tensors, got " +
                                std::to_string(ts.size()));
  checkTensor(fn, arg + "[0]", ts[0], at::kFloat, device);
  const at::Device first = ts[0].device();
  for (size_t i = 1; i < ts.size(); ++i)
    checkTensor(fn, arg + "[" + std::to_string(i) + "]", ts[i], at::kFloat,
                &first);
  for (const std::vector<Shape> &table : tables) {
    bool same = true;
    for (size_t i = 0; i < ts.size() && same; ++i)
      same = ts[i].sizes() == at::IntArrayRef(table[i]);
    if (same)
      return;
  }
  for (size_t i = 0; i < ts.size(); ++i) // names the first that differs
    checkShape(fn, arg + "[" + std::to_string(i) + "]", ts[i],
               {tables.front()[i]});
}

void cudaCheck(const char *fn, cudaError_t e) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string(fn) + ": " + cudaGetErrorString(e));
}

/// Makes `device` current for the launch and restores the caller's device.
struct OnDevice {
  int previous = -1;
  OnDevice(const char *fn, const at::Device &device) {
    cudaCheck(fn, cudaGetDevice(&previous));
    if (previous != device.index())
      cudaCheck(fn, cudaSetDevice(device.index()));
  }
  ~OnDevice() { cudaSetDevice(previous); }
};

cudaStream_t asStream(int64_t s) { return reinterpret_cast<cudaStream_t>(s); }

unsigned int philoxStream(const char *fn, int64_t s) {
  if (s < 0 || s > 0xffffffffll)
    throw pybind11::value_error(argName(fn, "stream") +
                                " must be in [0, 2^32), got " +
                                std::to_string(s));
  return static_cast<unsigned int>(s);
}

int64_t takeStatus(int64_t device, int64_t cudaStream) {
  const char *fn = "take_status";
  OnDevice on(fn, at::Device(at::kCUDA, at::DeviceIndex(device)));
  unsigned int code = 0;
  cudaCheck(fn, dsc_ext_take_status(&code, asStream(cudaStream)));
  return code;
}

)gen";

/// One binding: the checks, then the launcher call.
void writeBinding(std::ostream &os, const LauncherInfo &info) {
  const Launcher &L = *info.launcher;
  os << "// " << L.summary << "\n"
     << "void bind_" << L.name << "(";
  for (const Param &p : L.params) {
    switch (p.kind) {
    case Param::Kind::Buffer:
      os << "const at::Tensor &" << p.name << ", ";
      break;
    case Param::Kind::Table:
      os << "const std::vector<at::Tensor> &" << p.name << ", ";
      break;
    case Param::Kind::Stream:
    case Param::Kind::GroupRank:
      os << "int64_t " << p.name << ", ";
      break;
    case Param::Kind::Seed:
    case Param::Kind::Offset:
      os << "uint64_t " << p.name << ", ";
      break;
    case Param::Kind::Scratch:
      break;
    }
  }
  os << "int64_t cuda_stream) {\n"
     << "  const char *fn = \"" << L.name << "\";\n";
  std::string device;
  for (size_t i = 0; i < L.params.size(); ++i) {
    const Param &p = L.params[i];
    if (!isTensor(p))
      continue;
    const std::string dev = device.empty() ? "nullptr" : "&device";
    std::string alternatives = "{";
    for (const std::vector<Shape> &alt : info.shapes[i]) {
      if (alternatives.size() > 1)
        alternatives += ", ";
      if (p.kind == Param::Kind::Buffer) {
        alternatives += shapeList(alt[0], false);
        continue;
      }
      alternatives += "{";
      for (size_t k = 0; k < alt.size(); ++k)
        alternatives += (k ? ", " : "") + shapeList(alt[k], false);
      alternatives += "}";
    }
    alternatives += "}";
    if (p.kind == Param::Kind::Buffer)
      os << "  checkTensor(fn, \"" << p.name << "\", " << p.name << ", "
         << atenType(info.storage[i]) << ", " << dev << ");\n"
         << "  checkShape(fn, \"" << p.name << "\", " << p.name << ", "
         << alternatives << ");\n";
    else
      os << "  checkTable(fn, \"" << p.name << "\", " << p.name << ", "
         << p.tableSize << ", " << alternatives << ", " << dev << ");\n";
    if (device.empty()) {
      device = p.name + (p.kind == Param::Kind::Table ? "[0]" : "");
      os << "  const at::Device device = " << device << ".device();\n";
    }
  }
  if (device.empty())
    throw dsc::Error("torch extension: launcher " + L.name +
                    " takes no tensor");
  for (const Param &p : L.params) {
    if (p.kind == Param::Kind::Table) {
      os << "  std::vector<" << tableEntry(p) << "> " << p.name << "_ptrs;\n"
         << "  for (const at::Tensor &t : " << p.name << ")\n"
         << "    " << p.name << "_ptrs.push_back(static_cast<" << tableEntry(p)
         << ">(t.data_ptr()));\n";
    } else if (p.kind == Param::Kind::Scratch) {
      // From torch's caching allocator, on the stream of the launch (the
      // current stream): freed when this function returns, reused only by
      // work queued after the launch.
      os << "  at::Tensor scratch = at::empty({" << L.scratchBytes
         << "}, at::TensorOptions().dtype(at::kByte).device(device));\n";
    }
  }
  os << "  OnDevice on(fn, device);\n"
     << "  cudaCheck(fn, ::" << L.name << "(";
  for (const Param &p : L.params) {
    switch (p.kind) {
    case Param::Kind::Buffer:
      os << "static_cast<" << p.ctype << ">(" << p.name << ".data_ptr()), ";
      break;
    case Param::Kind::Table:
      os << p.name << "_ptrs.data(), ";
      break;
    case Param::Kind::Stream:
      os << "philoxStream(fn, " << p.name << "), ";
      break;
    case Param::Kind::GroupRank:
      os << "static_cast<int>(" << p.name << "), ";
      break;
    case Param::Kind::Seed:
    case Param::Kind::Offset:
      os << p.name << ", ";
      break;
    case Param::Kind::Scratch:
      os << "scratch.data_ptr(), ";
      break;
    }
  }
  os << "asStream(cuda_stream)));\n}\n\n";
}

std::string bindingSource(const std::vector<LauncherInfo> &infos) {
  std::ostringstream os;
  os << kBindingPrologue;
  for (const LauncherInfo &info : infos)
    writeBinding(os, info);
  os << "} // namespace\n\n"
     << "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n"
     << "  m.def(\"take_status\", &takeStatus, pybind11::arg(\"device\"),\n"
     << "        pybind11::arg(\"cuda_stream\"));\n";
  for (const LauncherInfo &info : infos) {
    const Launcher &L = *info.launcher;
    os << "  m.def(\"" << L.name << "\", &bind_" << L.name << ", "
       << pyStr(L.summary);
    for (const Param &p : L.params)
      if (p.kind != Param::Kind::Scratch)
        os << ", pybind11::arg(\"" << p.name << "\")";
    os << ", pybind11::arg(\"cuda_stream\"));\n";
  }
  os << "}\n";
  return os.str();
}

const char *kStatusSource = R"gen(// Generated by dsc-translate --emit-torch-extension. Do not edit.
//
// The emitted kernels plus a reader of their `dsc_status` device variable
// (the first failure a kernel recorded: a bad token id or label, ...). It
// must live in the translation unit that defines the variable.
#include "dsc_kernels.cu"

extern "C" cudaError_t dsc_ext_take_status(unsigned int *code,
                                           cudaStream_t cuda_stream) {
  static const unsigned int zero = 0;
  cudaError_t e = cudaMemcpyFromSymbolAsync(code, dsc_status, sizeof zero, 0,
                                            cudaMemcpyDeviceToHost,
                                            cuda_stream);
  if (e == cudaSuccess)
    e = cudaMemcpyToSymbolAsync(dsc_status, &zero, sizeof zero, 0,
                                cudaMemcpyHostToDevice, cuda_stream);
  if (e == cudaSuccess)
    e = cudaStreamSynchronize(cuda_stream);
  return e;
}
)gen";

std::string pythonModule(const std::string &name,
                         const std::vector<LauncherInfo> &infos,
                         const Module &module) {
  std::ostringstream os;
  os << R"gen(# Generated by dsc-translate --emit-torch-extension. Do not edit.
"""PyTorch bindings of the CUDA kernels dsc emitted for one training step.

Every C-ABI launcher of dsc_kernels.cu is a function here. It takes torch
tensors -- its inputs and the outputs it writes, preallocated -- plus, for
dropout and masking kernels, the Philox `stream`, `seed` and `offset`, and
runs on torch.cuda.current_stream(). Each tensor must be exactly what the
launcher was specialised for (CUDA, dtype, shape, contiguous, 16-byte
aligned: see LAUNCHERS); anything else is a TypeError or ValueError naming
the launcher and the argument. A launcher's workspace comes from torch's
allocator.

    import dsc_ext
    dsc_ext.load()   # the module setup.py installed, else a JIT build
    dsc_ext.dsc_LayerNorm_0(x, gamma, beta, y)
    code, message = dsc_ext.take_status()   # (0, "ok") unless a kernel failed

Kernels never trap: a bad token id or label sets a status that
take_status() returns (and resets). GEMMs are not kernels: their cuBLASLt
descriptors are `dsc_gemms` in dsc_kernels.h.
"""
import importlib
import importlib.util
import os

import torch

)gen";
  os << "NAME = " << pyStr(name) << "\n"
     << "SCRATCH_BYTES = " << module.scratchBytes << "\n"
     << "# Flags for setup.py and load(): torch disables the half/bfloat16\n"
     << "# operators and conversions in nvcc builds; the kernels use them.\n"
     << "NVCC_FLAGS = [\"-O3\", \"-std=c++17\", "
        "\"-U__CUDA_NO_HALF_OPERATORS__\",\n"
     << "              \"-U__CUDA_NO_HALF_CONVERSIONS__\", "
        "\"-U__CUDA_NO_HALF2_OPERATORS__\",\n"
     << "              \"-U__CUDA_NO_BFLOAT16_CONVERSIONS__\", "
        "\"-U__CUDA_NO_BFLOAT16_OPERATORS__\"]\n"
     << "CXX_FLAGS = [\"-O2\", \"-std=c++17\"]\n"
     << "SOURCES = [\"binding.cpp\", \"dsc_extension.cu\"]\n\n"
     << "STATUS_MESSAGES = [\n";
  for (const std::string &m : module.statusMessages)
    os << "    " << pyStr(m) << ",\n";
  os << "]\n\n"
     << "# Per launcher: the opcode, the attributes baked into its code (of\n"
     << "# the first instruction it serves), and its parameters in call\n"
     << "# order with their dtype and the shapes the step calls it with.\n"
     << "LAUNCHERS = {\n";
  for (const LauncherInfo &info : infos) {
    const Launcher &L = *info.launcher;
    os << "    " << pyStr(L.name) << ": {\n"
       << "        \"op\": " << pyStr(rt::opcodeName(L.op)) << ",\n"
       << "        \"summary\": " << pyStr(L.summary) << ",\n"
       << "        \"attrs\": {";
    bool firstAttr = true;
    for (const auto &[key, value] : info.first->attrs) {
      if (key == "stream") // a parameter, not baked in
        continue;
      if (const auto *l = std::get_if<rt::BlockLayout>(&value);
          l && l->empty()) // dense: nothing to say
        continue;
      os << (firstAttr ? "" : ", ") << pyStr(key) << ": " << pyAttr(value);
      firstAttr = false;
    }
    os << "},\n"
       << "        \"scratch_bytes\": " << L.scratchBytes << ",\n"
       << "        \"params\": [\n";
    for (size_t i = 0; i < L.params.size(); ++i) {
      const Param &p = L.params[i];
      if (p.kind == Param::Kind::Scratch)
        continue;
      os << "            {\"name\": " << pyStr(p.name) << ", \"kind\": ";
      switch (p.kind) {
      case Param::Kind::Buffer:
      case Param::Kind::Table: {
        const bool table = p.kind == Param::Kind::Table;
        os << (table ? "\"tensors\"" : "\"tensor\"") << ", \"dtype\": \""
           << torchDtype(info.storage[i]) << "\", \"output\": "
           << (p.ctype.rfind("const ", 0) == 0 ? "False" : "True")
           << ", \"shapes\": [";
        bool firstAlt = true;
        for (const std::vector<Shape> &alt : info.shapes[i]) {
          os << (firstAlt ? "" : ", ");
          firstAlt = false;
          if (!table) {
            os << shapeList(alt[0], true);
            continue;
          }
          os << "[";
          for (size_t k = 0; k < alt.size(); ++k)
            os << (k ? ", " : "") << shapeList(alt[k], true);
          os << "]";
        }
        os << "]},\n";
        break;
      }
      case Param::Kind::Stream:
        os << "\"philox_stream\"},\n";
        break;
      case Param::Kind::GroupRank:
        os << "\"group_rank\"},\n";
        break;
      case Param::Kind::Seed:
        os << "\"seed\"},\n";
        break;
      case Param::Kind::Offset:
        os << "\"offset\"},\n";
        break;
      case Param::Kind::Scratch:
        break;
      }
    }
    os << "        ],\n    },\n";
  }
  os << "}\n\n";
  os << R"gen(_here = os.path.dirname(os.path.abspath(__file__))
_C = None


def load(path=None, verbose=False, build_directory=None):
    """Binds the compiled extension and returns it.

    path: a built module (.so) to load; without it, the module setup.py
    installed (NAME) if importable, else a JIT build of SOURCES with
    torch.utils.cpp_extension.load (cached in build_directory, by default
    under ~/.cache/torch_extensions).
    """
    global _C
    if path is not None:
        spec = importlib.util.spec_from_file_location(NAME, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    else:
        try:
            module = importlib.import_module(NAME)
        except ImportError:
            from torch.utils.cpp_extension import load as jit_load
            module = jit_load(NAME, [os.path.join(_here, s) for s in SOURCES],
                              extra_cflags=CXX_FLAGS,
                              extra_cuda_cflags=NVCC_FLAGS,
                              build_directory=build_directory,
                              verbose=verbose)
    _C = module
    return module


def _lib():
    return _C if _C is not None else load()


def _stream(arg):
    """The current stream of the first tensor's device, as an integer; 0
    for anything else (the binding then rejects the argument by name)."""
    t = arg[0] if isinstance(arg, (list, tuple)) and arg else arg
    if isinstance(t, torch.Tensor) and t.is_cuda:
        return torch.cuda.current_stream(t.device).cuda_stream
    return 0


def take_status(device=None):
    """(code, message) of the first failure a kernel recorded on `device`
    (default: the current one) since the last call, and resets it; (0, "ok")
    when there was none. Synchronises the current stream."""
    device = torch.device("cuda") if device is None else torch.device(device)
    index = torch.cuda.current_device() if device.index is None else device.index
    code = _lib().take_status(index, torch.cuda.current_stream(index).cuda_stream)
    return code, STATUS_MESSAGES[code]

)gen";
  for (const LauncherInfo &info : infos) {
    const Launcher &L = *info.launcher;
    std::vector<std::string> args;
    std::string first;
    for (const Param &p : L.params) {
      if (p.kind == Param::Kind::Scratch)
        continue;
      args.push_back(p.name);
      if (first.empty() && isTensor(p))
        first = p.name;
    }
    std::string list;
    for (const std::string &a : args)
      list += (list.empty() ? "" : ", ") + a;
    os << "\ndef " << L.name << "(" << list << "):\n"
       << "    " << pyStr(L.summary) << "\n"
       << "    _lib()." << L.name << "(" << list << ", _stream(" << first
       << "))\n\n";
  }
  return os.str();
}

const char *kSetupPy = R"gen(# Generated by dsc-translate --emit-torch-extension. Do not edit.
#
# Builds and installs the extension and its Python module dsc_ext:
#   pip install --no-build-isolation .     (needs torch with CUDA and nvcc)
#   python setup.py build_ext --inplace    (the module next to dsc_ext.py)
import os
import sys

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dsc_ext  # noqa: E402  (NAME, SOURCES and the flags)

setup(
    name=dsc_ext.NAME,
    py_modules=["dsc_ext"],
    ext_modules=[CUDAExtension(dsc_ext.NAME, dsc_ext.SOURCES,
                               extra_compile_args={"cxx": dsc_ext.CXX_FLAGS,
                                                   "nvcc": dsc_ext.NVCC_FLAGS})],
    cmdclass={"build_ext": BuildExtension},
)
)gen";

std::string readme(const std::string &name, const Module &module) {
  std::ostringstream os;
  os << "# " << name << ": dsc kernels as a PyTorch extension\n\n"
     << "Generated by dsc-translate --emit-torch-extension. "
     << module.launchers.size() << " launchers (`dsc_<opcode>_<k>`).\n\n"
     << "| file | what |\n| --- | --- |\n"
     << "| `dsc_kernels.cu`, `dsc_kernels.h` | the kernels and C-ABI "
        "launchers, as `--emit-cuda` writes them (the header also has the "
        "cuBLASLt GEMM descriptors and status messages) |\n"
     << "| `dsc_extension.cu` | includes `dsc_kernels.cu`, adds the status "
        "reader |\n"
     << "| `binding.cpp` | one pybind11 function per launcher over "
        "`torch::Tensor`, with the argument checks |\n"
     << "| `dsc_ext.py` | the Python API: `load()`, one function per "
        "launcher on the current CUDA stream, `LAUNCHERS` (what each "
        "accepts), `take_status()` |\n"
     << "| `setup.py` | `pip install --no-build-isolation .` |\n\n"
     << "Use, without installing (JIT build, cached by torch):\n\n"
     << "```python\nimport sys; sys.path.insert(0, \"THIS_DIR\")\n"
     << "import dsc_ext\ndsc_ext.load(verbose=True)\n"
     << "help(dsc_ext)\n```\n\n"
     << "Needs PyTorch built with CUDA, nvcc, and a GPU of compute "
        "capability 8.0 or newer (the kernels use bf16 arithmetic); torch "
        "picks the architectures (`TORCH_CUDA_ARCH_LIST`).\n";
  return os.str();
}

} // namespace

std::vector<ExtensionFile> torchExtensionFiles(const rt::Program &program,
                                               const Module &module) {
  const std::string include =
      std::string("#include \"") + kTorchKernelsHeader + "\"";
  if (module.source.find(include) == std::string::npos)
    throw dsc::Error(std::string("torch extension: the module must be "
                                "emitted with headerName ") +
                    kTorchKernelsHeader);
  const std::vector<LauncherInfo> infos = collect(program, module);
  const std::string name = hashName(module.source, module.header);
  return {
      {kTorchKernelsSource, module.source},
      {kTorchKernelsHeader, module.header},
      {"dsc_extension.cu", kStatusSource},
      {"binding.cpp", bindingSource(infos)},
      {"dsc_ext.py", pythonModule(name, infos, module)},
      {"setup.py", kSetupPy},
      {"README.md", readme(name, module)},
  };
}

} // namespace dsc::cuda
