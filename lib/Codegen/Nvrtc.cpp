//===- Nvrtc.cpp - Compile CUDA C++ with NVRTC ----------------------------===//
//
// Links libnvrtc only. Diagnostics are mapped back to the emitted kernel:
// NVRTC reports "name(line): error: ..." at the device-library line where a
// template went wrong and "detected during instantiation ... at line N" at
// the wrapper kernel that instantiated it; the message names that kernel.
//
//===----------------------------------------------------------------------===//

#include "dsc/Codegen/Nvrtc.h"

#include <regex>
#include <sstream>

#ifdef DSC_HAVE_NVRTC
#include <nvrtc.h>
#endif

namespace dsc::cuda {

namespace {

/// The `extern "C" __global__` kernel whose definition encloses (or last
/// precedes) 1-based `line`, or "" when the line is before every kernel.
std::string kernelAt(const std::string &source, int line) {
  std::istringstream in(source);
  std::string text, kernel;
  static const std::regex def(
      R"(__global__\s+void\s+(?:__launch_bounds__\(\d+\)\s+)?(\w+)\s*\()");
  for (int n = 1; std::getline(in, text) && n <= line; ++n) {
    std::smatch m;
    if (std::regex_search(text, m, def))
      kernel = m[1];
  }
  return kernel;
}

/// The first diagnostic of an NVRTC log as one line.
std::string firstDiagnostic(const std::string &log, const std::string &source) {
  static const std::regex diag(R"(^(.*)\((\d+)\): (error|warning)[^:]*: (.*)$)");
  static const std::regex inst(R"(at line (\d+))");
  std::istringstream in(log);
  std::string text, first;
  int line = 0;
  std::string kernel;
  while (std::getline(in, text)) {
    std::smatch m;
    if (first.empty() && std::regex_search(text, m, diag)) {
      line = std::stoi(m[2]);
      first = m[1].str() + ":" + m[2].str() + ": " + m[3].str() + ": " +
              m[4].str();
      kernel = kernelAt(source, line);
      continue;
    }
    // Instantiation context: the last "at line N" names the wrapper.
    if (!first.empty() && std::regex_search(text, m, inst)) {
      std::string k = kernelAt(source, std::stoi(m[1]));
      if (!k.empty())
        kernel = k;
    }
    if (!first.empty() && text.find("error") != std::string::npos &&
        std::regex_search(text, m, diag))
      break;
  }
  if (first.empty()) {
    std::istringstream again(log);
    while (std::getline(again, text))
      if (text.find_first_not_of(" \t\r") != std::string::npos)
        return text;
    return "(empty log)";
  }
  return first + (kernel.empty() ? "" : " (in kernel " + kernel + ")");
}

} // namespace

#ifdef DSC_HAVE_NVRTC

bool haveNvrtc() { return true; }

std::string nvrtcVersion() {
  int major = 0, minor = 0;
  if (::nvrtcVersion(&major, &minor) != NVRTC_SUCCESS)
    return "";
  return std::to_string(major) + "." + std::to_string(minor);
}

NvrtcResult compileWithNvrtc(const std::string &source, const std::string &name,
                             const NvrtcOptions &options) {
  NvrtcResult r;
  nvrtcProgram prog;
  nvrtcResult rc =
      nvrtcCreateProgram(&prog, source.c_str(), name.c_str(), 0, nullptr, nullptr);
  if (rc != NVRTC_SUCCESS) {
    r.message = std::string("nvrtcCreateProgram: ") + nvrtcGetErrorString(rc);
    return r;
  }
  std::vector<std::string> flags = {
      "--gpu-architecture=" + options.arch, "-std=c++17", "-default-device",
      "-I" DSC_CUDA_INCLUDE_DIR};
  if (options.fastMath)
    flags.push_back("--use_fast_math");
  flags.insert(flags.end(), options.extraFlags.begin(), options.extraFlags.end());
  std::vector<const char *> argv;
  for (const std::string &f : flags)
    argv.push_back(f.c_str());
  rc = nvrtcCompileProgram(prog, int(argv.size()), argv.data());
  size_t logSize = 0;
  nvrtcGetProgramLogSize(prog, &logSize);
  r.log.assign(logSize, '\0');
  if (logSize)
    nvrtcGetProgramLog(prog, r.log.data());
  while (!r.log.empty() && (r.log.back() == '\0' || r.log.back() == '\n'))
    r.log.pop_back();
  const bool quiet = r.log.find_first_not_of(" \t\r\n") == std::string::npos;
  if (rc != NVRTC_SUCCESS) {
    r.message = quiet ? std::string("nvrtcCompileProgram: ") +
                            nvrtcGetErrorString(rc)
                      : firstDiagnostic(r.log, source);
  } else if (!quiet && options.warningsAreErrors) {
    r.message = firstDiagnostic(r.log, source);
  } else {
    const bool cubin = options.arch.rfind("sm_", 0) == 0;
    size_t size = 0;
    rc = cubin ? nvrtcGetCUBINSize(prog, &size) : nvrtcGetPTXSize(prog, &size);
    if (rc == NVRTC_SUCCESS) {
      r.binary.assign(size, '\0');
      rc = cubin ? nvrtcGetCUBIN(prog, r.binary.data())
                 : nvrtcGetPTX(prog, r.binary.data());
    }
    if (rc != NVRTC_SUCCESS)
      r.message = std::string("reading the compiled code: ") +
                  nvrtcGetErrorString(rc);
    else
      r.ok = true;
  }
  nvrtcDestroyProgram(&prog);
  return r;
}

#else

bool haveNvrtc() { return false; }
std::string nvrtcVersion() { return ""; }

NvrtcResult compileWithNvrtc(const std::string &, const std::string &,
                             const NvrtcOptions &) {
  NvrtcResult r;
  r.message = "this dsc was built without the CUDA toolkit (no NVRTC)";
  return r;
}

#endif

} // namespace dsc::cuda
