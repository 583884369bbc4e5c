//===- Nvrtc.cpp - Compile CUDA C++ with NVRTC ----------------------------===//
//
// Links libnvrtc only. Diagnostics are mapped back to the emitted kernel:
// NVRTC reports "name(line): error: ..." at the device-library line where a
// template went wrong and "detected during instantiation ... at line N" at
// the wrapper kernel that instantiated it; the message names that kernel.
//
//===----------------------------------------------------------------------===//

#include "dsc/Codegen/Nvrtc.h"

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <sstream>

#ifdef DSC_HAVE_NVRTC
#include <nvrtc.h>
#endif

namespace dsc::cuda {

namespace {

bool isIdentChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

/// The kernel that `text` starts to define ("__global__ void
/// [__launch_bounds__(N)] name("), or "".
std::string kernelDefinedOn(const std::string &text) {
  size_t p = text.find("__global__");
  if (p == std::string::npos)
    return "";
  auto skipSpace = [&] {
    while (p < text.size() && std::isspace(static_cast<unsigned char>(text[p])))
      ++p;
  };
  auto takeWord = [&](const char *word) {
    const size_t n = std::strlen(word);
    if (text.compare(p, n, word) != 0)
      return false;
    p += n;
    return true;
  };
  p += std::strlen("__global__");
  skipSpace();
  if (!takeWord("void"))
    return "";
  skipSpace();
  if (takeWord("__launch_bounds__")) {
    p = text.find(')', p);
    if (p == std::string::npos)
      return "";
    ++p;
    skipSpace();
  }
  const size_t begin = p;
  while (p < text.size() && isIdentChar(text[p]))
    ++p;
  std::string name = text.substr(begin, p - begin);
  skipSpace();
  return p < text.size() && text[p] == '(' ? name : "";
}

/// The `extern "C" __global__` kernel whose definition encloses (or last
/// precedes) 1-based `line`, or "" when the line is before every kernel.
std::string kernelAt(const std::string &source, int line) {
  std::istringstream in(source);
  std::string text, kernel;
  for (int n = 1; std::getline(in, text) && n <= line; ++n) {
    std::string k = kernelDefinedOn(text);
    if (!k.empty())
      kernel = k;
  }
  return kernel;
}

/// Digits at `p` as a positive int (advancing `p`), or -1.
int readLineNumber(const std::string &text, size_t &p) {
  const size_t begin = p;
  while (p < text.size() && std::isdigit(static_cast<unsigned char>(text[p])))
    ++p;
  if (p == begin || p - begin > 9)
    return -1;
  return std::stoi(text.substr(begin, p - begin));
}

/// One NVRTC diagnostic line, "file(line): error[ code]: message".
struct Diagnostic {
  std::string file, severity, message;
  int line = -1;
};

/// Parses `text` as a diagnostic; the file name may itself contain
/// parentheses, so the last "(N): error|warning" is the one.
std::optional<Diagnostic> parseDiagnostic(const std::string &text) {
  for (size_t open = text.rfind('('); open != std::string::npos;
       open = open ? text.rfind('(', open - 1) : std::string::npos) {
    size_t p = open + 1;
    Diagnostic d;
    d.line = readLineNumber(text, p);
    if (d.line < 0 || text.compare(p, 3, "): ") != 0)
      continue;
    p += 3;
    for (const char *severity : {"error", "warning"})
      if (text.compare(p, std::strlen(severity), severity) == 0)
        d.severity = severity;
    if (d.severity.empty())
      continue;
    const size_t colon = text.find(": ", p + d.severity.size());
    if (colon == std::string::npos)
      continue;
    d.file = text.substr(0, open);
    d.message = text.substr(colon + 2);
    return d;
  }
  return std::nullopt;
}

/// N of the last "at line N" in `text` (instantiation context), or -1.
int instantiationLine(const std::string &text) {
  const size_t at = text.rfind("at line ");
  if (at == std::string::npos)
    return -1;
  size_t p = at + std::strlen("at line ");
  return readLineNumber(text, p);
}

/// The first diagnostic of an NVRTC log as one line.
std::string firstDiagnostic(const std::string &log, const std::string &source) {
  std::istringstream in(log);
  std::string text, first, kernel;
  while (std::getline(in, text)) {
    std::optional<Diagnostic> d = parseDiagnostic(text);
    if (first.empty() && d) {
      first = d->file + ":" + std::to_string(d->line) + ": " + d->severity +
              ": " + d->message;
      kernel = kernelAt(source, d->line);
      continue;
    }
    // Instantiation context: the last "at line N" names the wrapper.
    const int line = first.empty() ? -1 : instantiationLine(text);
    if (line > 0) {
      std::string k = kernelAt(source, line);
      if (!k.empty())
        kernel = k;
    }
    if (!first.empty() && d && d->severity == "error")
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

std::string cudaIncludeDir() {
  if (const char *dir = std::getenv("DSC_CUDA_INCLUDE_DIR"); dir && *dir)
    return dir;
  std::error_code ec;
  const std::filesystem::path exe =
      std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const std::filesystem::path bundled =
        exe.parent_path().parent_path() / "include" / "cuda";
    if (std::filesystem::exists(bundled / "cuda_bf16.h", ec))
      return bundled.string();
  }
  return DSC_CUDA_INCLUDE_DIR;
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
      "-I" + cudaIncludeDir()};
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
std::string cudaIncludeDir() { return ""; }

NvrtcResult compileWithNvrtc(const std::string &, const std::string &,
                             const NvrtcOptions &) {
  NvrtcResult r;
  r.message = "this dsc was built without the CUDA toolkit (no NVRTC)";
  return r;
}

#endif

} // namespace dsc::cuda
