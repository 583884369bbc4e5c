//===- dsc-translate.cpp - Lowered step -> CUDA C++ -----------------------===//
//
//   dsc-translate --emit-cuda STEP.mlir -o K.cu [--nvrtc-check=sm_80,sm_90]
//                 [--nvrtc-fast-compile] [--attention-kernel=tiles|registers|cudnn] [--cudnn]
//                 [--gelu-epilogues] [--bias-grad-epilogues] [--sm=NN]
//   dsc-translate --emit-torch-extension STEP.mlir -o DIR [...]
//
// Lowers a step written by `dsc-run compile` (or dsc-opt) to the runtime
// program and emits one CUDA translation unit for it: K.cu (device library,
// one kernel per specialised instruction, C-ABI host launchers) and K.h
// (launcher prototypes, cuBLASLt GEMM descriptors, status messages); it
// prints the counts and the bytes of the device arena the CUDA backend
// allocates for the step (its memory plan, as dsc-run plans it).
// --emit-torch-extension writes the same kernels as a PyTorch C++
// extension into DIR (see include/dsc/Codegen/TorchExtension.h).
// --nvrtc-check compiles the kernels through NVRTC for every listed
// architecture and fails on any error or warning; with --nvrtc-fast-compile
// it skips most optimizations (NVRTC's --Ofast-compile=max: the front end
// and ptxas still check every kernel, three times faster, which is what the
// test suite's many variant checks need; what the CUDA backend compiles and
// runs is the optimized build). Every failure is one
// line on stderr and exit status 1.
//
//===----------------------------------------------------------------------===//

#include "dsc/Codegen/CudaEmitter.h"
#include "dsc/Codegen/LowerToProgram.h"
#include "dsc/Codegen/StepLanes.h"
#include "dsc/Program/MemoryPlan.h"
#include "dsc/Codegen/Nvrtc.h"
#include "dsc/Codegen/TorchExtension.h"
#include "dsc/Dialect/DscDialect.h"
#include "dsc/Support/OutputFile.h"
#include "dsc/Support/Files.h"
#include "dsc/Support/IRNesting.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include <cctype>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <regex>
#include <sstream>

namespace {

const char *kUsage =
    "usage: dsc-translate --emit-cuda STEP.mlir [-o K.cu]\n"
    "                     [--nvrtc-check=sm_80,sm_90]\n"
    "       dsc-translate --emit-torch-extension STEP.mlir -o DIR [...]\n"
    "  --emit-cuda          emit CUDA C++ for the step: K.cu and K.h\n"
    "  -o K.cu              output (the header goes next to it as K.h)\n"
    "  --emit-torch-extension\n"
    "                       write a PyTorch C++ extension wrapping the\n"
    "                       kernels into the directory DIR (see its README.md)\n"
    "  --nvrtc-check=ARCHS  compile the kernels with NVRTC for each arch\n"
    "                       (sm_XX or compute_XX); any error or warning fails\n"
    "  --nvrtc-fast-compile with --nvrtc-check: skip most optimizations\n"
    "                       (NVRTC --Ofast-compile=max), a 3x faster check\n"
    "  --attention-kernel=tiles|registers|cudnn\n"
    "                       force the implementation of every 16-bit fused\n"
    "                       attention (default: per attention, cuDNN where\n"
    "                       it applies and is loaded, else the register\n"
    "                       kernels where they apply, else the tiles kernels;\n"
    "                       fp32 attention always runs the tiles kernels)\n"
    "  --cudnn              emit as for a machine with libcudnn 9: attention\n"
    "                       cuDNN runs becomes a descriptor in K.h, run by\n"
    "                       dsc-run's CUDA backend\n"
    "  --gelu-epilogues     run a tanh-GELU MLP's bias + GELU and its\n"
    "                       gradient as cuBLASLt epilogues of the GEMMs\n"
    "                       before them (the backend's DSC_CUDA_EPILOGUES=gelu)\n"
    "  --bias-grad-epilogues\n"
    "                       compute a bias gradient that sums a weight\n"
    "                       gradient GEMM's dy as that GEMM's BGRADA/BGRADB\n"
    "                       epilogue (the backend's DSC_CUDA_EPILOGUES=bgrad)\n"
    "  --sm=NN              the target's compute capability (default 90)\n"
    "  --list-collectives   print every collective step: its function and\n"
    "                       instruction, mesh axis and group, what it moves\n"
    "  --list-lanes         ZeRO-Offload and overlap_comm: per function with\n"
    "                       steps off the device lane, its lanes and every\n"
    "                       step's waits on other lanes\n";

struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Parses and lowers the step; MLIR diagnostics become one-line failures.
dsc::rt::Program loadProgram(const std::string &path) {
  mlir::MLIRContext ctx;
  ctx.loadDialect<mlir::dsc::DscDialect, mlir::func::FuncDialect>();
  std::string first;
  mlir::ScopedDiagnosticHandler handler(&ctx, [&](mlir::Diagnostic &diag) {
    if (diag.getSeverity() == mlir::DiagnosticSeverity::Error &&
        first.empty()) {
      std::string loc;
      llvm::raw_string_ostream os(loc);
      if (auto file = mlir::dyn_cast<mlir::FileLineColLoc>(diag.getLocation()))
        os << file.getFilename().strref() << ":" << file.getLine() << ":"
           << file.getColumn();
      else
        os << diag.getLocation();
      first = os.str() + ": " + diag.str();
    }
    return mlir::success();
  });
  std::string text;
  try {
    text = dsc::readRegularFile(path); // refuses FIFOs and devices
    dsc::checkIRNesting(text, path);   // MLIR's parser would overflow the stack
  } catch (const dsc::FileError &e) {
    throw Failure(e.what());
  }
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(text, &ctx, path);
  if (!module)
    throw Failure("cannot parse '" + path + "'" +
                  (first.empty() ? "" : ": " + first));
  if (mlir::failed(mlir::verify(*module)))
    throw Failure("'" + path + "' does not verify" +
                  (first.empty() ? "" : ": " + first));
  mlir::FailureOr<dsc::rt::Program> program = dsc::lowerToProgram(*module);
  if (mlir::failed(program))
    throw Failure("cannot lower '" + path + "'" +
                  (first.empty() ? "" : ": " + first));
  return std::move(*program);
}

/// Atomically: a failed write leaves a good file as it was.
void writeFile(const std::string &path, const std::string &text) {
  try {
    dsc::writeFileAtomic(path, text);
  } catch (const dsc::Error &e) {
    throw Failure(e.what());
  }
}

std::vector<std::string> splitArchs(const std::string &list) {
  std::vector<std::string> archs;
  std::stringstream in(list);
  std::string a;
  static const std::regex valid("(sm|compute)_[0-9]+[a-z]?");
  while (std::getline(in, a, ',')) {
    if (!std::regex_match(a, valid))
      throw Failure("--nvrtc-check: '" + a +
                    "' is not an architecture (sm_80, compute_90, ...)");
    archs.push_back(a);
  }
  if (archs.empty())
    throw Failure("--nvrtc-check needs at least one architecture");
  return archs;
}

/// Creates `dir` (and its parents) and writes the extension's files there.
/// A file already there is replaced only if an earlier run wrote it (its
/// "Generated by dsc-translate" line): a user's README.md or setup.py in
/// the directory was silently overwritten.
void writeExtension(const std::string &dir,
                    const std::vector<dsc::cuda::ExtensionFile> &files) {
  for (const dsc::cuda::ExtensionFile &f : files) {
    const std::string path = dir + "/" + f.name;
    std::error_code ec;
    if (!std::filesystem::exists(path, ec))
      continue;
    std::string text;
    try {
      text = dsc::readRegularFile(path);
    } catch (const std::exception &e) {
      throw Failure(e.what());
    }
    if (text.find("Generated by dsc-translate") == std::string::npos)
      throw Failure(path + " exists and was not written by dsc-translate; "
                    "give -o a new or earlier extension directory");
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir))
    throw Failure("cannot create directory '" + dir + "'" +
                  (ec ? ": " + ec.message() : ": not a directory"));
  for (const dsc::cuda::ExtensionFile &f : files)
    writeFile(dir + "/" + f.name, f.text);
}

/// "#12 to_host": a step by its first instruction.
std::string stepName(const dsc::rt::Function &fn, const dsc::cuda::Step &step) {
  const size_t i = step.instrs.at(0);
  return "#" + std::to_string(i) + " " + dsc::rt::opcodeName(fn.body[i].op);
}

/// --list-lanes: each function whose steps leave the device lane, its
/// lanes' sizes, and every step that waits on another lane.
void printLanes(const dsc::rt::Program &program,
                const dsc::cuda::Module &module) {
  using dsc::cuda::Lane;
  for (const auto &[name, steps] : module.steps) {
    const dsc::rt::Function &fn = program.function(name);
    const dsc::cuda::StepLanes lanes =
        dsc::cuda::scheduleLanes(program, fn, steps);
    if (!lanes.offDevice())
      continue;
    size_t count[dsc::cuda::kLaneCount] = {}, waits = 0;
    for (size_t k = 0; k < steps.size(); ++k) {
      ++count[size_t(lanes.lane[k])];
      waits += lanes.waits[k].size();
    }
    std::cout << "dsc-translate: lanes of @" << name << ":";
    for (int l = 0; l < dsc::cuda::kLaneCount; ++l)
      std::cout << (l ? ", " : " ") << count[l] << " "
                << dsc::cuda::laneName(Lane(l));
    std::cout << "; " << waits << " waits across lanes\n";
    for (size_t k = 0; k < steps.size(); ++k) {
      if (lanes.lane[k] == Lane::Device && lanes.waits[k].empty())
        continue;
      std::cout << "@" << name << " " << stepName(fn, steps[k]) << " ["
                << dsc::cuda::laneName(lanes.lane[k]) << "]";
      const char *separator = " after ";
      for (size_t w : lanes.waits[k]) {
        std::cout << separator << stepName(fn, steps[w]) << " ["
                  << dsc::cuda::laneName(lanes.lane[w]) << "]";
        separator = ", ";
      }
      std::cout << "\n";
    }
  }
}

int run(int argc, char **argv) {
  bool emit = false, torch = false, listCollectives = false, listLanes = false;
  bool fastCompile = false;
  std::string input, output, check;
  dsc::cuda::EmitOptions options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--emit-cuda")
      emit = true;
    else if (arg == "-o") {
      if (i + 1 >= argc)
        throw Failure("option '-o' needs a value");
      output = argv[++i];
    } else if (arg.rfind("--nvrtc-check=", 0) == 0)
      check = arg.substr(14);
    else if (arg == "--nvrtc-check")
      throw Failure("--nvrtc-check needs =ARCHS (e.g. --nvrtc-check=sm_80)");
    else if (arg == "--nvrtc-fast-compile")
      fastCompile = true;
    else if (arg.rfind("--attention-kernel=", 0) == 0) {
      if (!dsc::cuda::parseAttentionKernel(arg.substr(19), options.attention))
        throw Failure("--attention-kernel: '" + arg.substr(19) +
                      "' is not tiles, registers or cudnn");
      options.forceAttention = true;
    } else if (arg == "--cudnn")
      options.cudnn = true;
    else if (arg == "--gelu-epilogues")
      options.geluEpilogues = true;
    else if (arg == "--bias-grad-epilogues")
      options.biasGradEpilogues = true;
    else if (arg == "--list-collectives")
      listCollectives = true;
    else if (arg == "--list-lanes")
      listLanes = true;
    else if (arg.rfind("--sm=", 0) == 0) {
      const std::string v = arg.substr(5);
      if (v.size() != 2 || !std::isdigit(v[0]) || !std::isdigit(v[1]) ||
          v < "70")
        throw Failure("--sm: '" + v + "' is not a compute capability of 70 "
                      "or more (e.g. --sm=80)");
      options.sm = std::stoi(v);
    } else if (arg == "-h" || arg == "--help") {
      std::cout << kUsage;
      return 0;
    } else if (arg == "--emit-torch-extension")
      torch = true;
    else if (arg.size() > 1 && arg[0] == '-')
      throw Failure("unknown option '" + arg + "'");
    else if (!input.empty())
      throw Failure("unexpected argument '" + arg + "' (one input only)");
    else
      input = arg;
  }
  if (emit && torch)
    throw Failure("--emit-cuda and --emit-torch-extension write different "
                  "outputs: pass one");
  if (!emit && !torch)
    throw Failure("nothing to do: pass --emit-cuda or --emit-torch-extension "
                  "(see --help)");
  if (input.empty())
    throw Failure("missing input STEP.mlir");
  if (torch && output.empty())
    throw Failure("--emit-torch-extension needs -o DIR");
  if (output.empty() && check.empty())
    throw Failure("missing -o K.cu (or --nvrtc-check=ARCHS)");
  const std::vector<std::string> archs =
      check.empty() ? std::vector<std::string>() : splitArchs(check);
  if (fastCompile && archs.empty())
    throw Failure("--nvrtc-fast-compile applies to --nvrtc-check=ARCHS, "
                  "which is missing");
  if (!archs.empty() && !dsc::cuda::haveNvrtc())
    throw Failure("--nvrtc-check: this dsc was built without the CUDA "
                  "toolkit (no NVRTC)");

  if (torch && (options.cudnn || (options.forceAttention &&
                                   options.attention ==
                                       dsc::cuda::AttentionKernel::Cudnn)))
    throw Failure("the torch extension binds dsc's own kernels: cuDNN "
                  "attention (--cudnn, --attention-kernel=cudnn) runs in "
                  "dsc-run's CUDA backend only");
  if (torch && (options.geluEpilogues || options.biasGradEpilogues))
    throw Failure("the torch extension binds dsc's own kernels: cuBLASLt "
                  "epilogues (--gelu-epilogues, --bias-grad-epilogues) run in "
                  "dsc-run's CUDA backend only");
  std::string header = output;
  if (torch) {
    options.headerName = dsc::cuda::kTorchKernelsHeader;
  } else if (!output.empty()) {
    if (header.size() > 3 && header.compare(header.size() - 3, 3, ".cu") == 0)
      header.replace(header.size() - 3, 3, ".h");
    else
      header += ".h";
    options.headerName = header.substr(header.find_last_of('/') + 1);
    // Before any work: both files can be written, and neither is the
    // step being read.
    try {
      dsc::checkOutputFile(output, "-o");
      dsc::checkOutputFile(header, "-o (header)");
    } catch (const dsc::Error &e) {
      throw Failure(e.what());
    }
    for (const std::string &out : {output, header})
      if (dsc::sameFile(out, input))
        throw Failure("-o would overwrite the input " + input +
                      "; give it another path");
  }

  dsc::rt::Program program = loadProgram(input);
  // Planned as dsc-run plans it, so the arena reported is the one the CUDA
  // backend allocates for this step.
  dsc::MemoryPlan plan;
  std::string planError;
  if (!dsc::planMemory(program, plan, planError))
    throw Failure("cannot plan the step's memory: " + planError);
  dsc::applyMemoryPlan(program, plan);
  dsc::cuda::Module module;
  try {
    module = dsc::cuda::emitCuda(program, options);
  } catch (const dsc::Error &e) {
    throw Failure(std::string("cannot emit CUDA: ") + e.what());
  }
  std::vector<dsc::cuda::ExtensionFile> extension;
  if (torch) {
    try {
      extension = dsc::cuda::torchExtensionFiles(program, module);
    } catch (const dsc::Error &e) {
      throw Failure(e.what());
    }
    writeExtension(output, extension);
  } else if (!output.empty()) {
    writeFile(output, module.source);
    writeFile(header, module.header);
  }
  size_t kernels = 0;
  for (const dsc::cuda::Launcher &l : module.launchers)
    kernels += l.kernels.size();
  // Collective steps over more than one rank by opcode, in the op table's
  // order (over one rank they are copies the backend makes or skips).
  std::map<dsc::rt::Opcode, size_t> collectives;
  for (const auto &[fn, steps] : module.steps)
    for (const dsc::cuda::Step &step : steps)
      if (step.kind == dsc::cuda::Step::Kind::Collective &&
          step.collective.group > 1)
        ++collectives[step.collective.op];
  std::cout << "dsc-translate: " << module.launchers.size() << " launchers, "
            << kernels << " kernels, " << module.gemms.size()
            << " GEMM descriptors, device arena "
            << dsc::cuda::deviceLayout(program).arenaBytes << " bytes\n";
  if (!collectives.empty()) {
    std::cout << "dsc-translate: collectives:";
    const char *separator = " ";
    for (const auto &[op, count] : collectives) {
      std::cout << separator << count << " " << dsc::rt::opcodeName(op);
      separator = ", ";
    }
    std::cout << "\n";
  }
  if (listCollectives)
    for (const auto &[fn, steps] : module.steps)
      for (const dsc::cuda::Step &step : steps)
        if (step.kind == dsc::cuda::Step::Kind::Collective)
          std::cout << "@" << fn << " #" << step.instrs.at(0) << ": "
                    << step.collective.describe() << "\n";
  if (listLanes)
    printLanes(program, module);
  if (torch)
    std::cout << "dsc-translate: torch extension in " << output << " ("
              << extension.size() << " files)\n";
  const std::string name =
      output.empty() || torch ? dsc::cuda::kTorchKernelsSource
                              : output.substr(output.find_last_of('/') + 1);
  for (const std::string &arch : archs) {
    dsc::cuda::NvrtcOptions opts;
    opts.arch = arch;
    if (fastCompile)
      opts.extraFlags.push_back("--Ofast-compile=max");
    dsc::cuda::NvrtcResult r =
        dsc::cuda::compileWithNvrtc(module.source, name, opts);
    if (!r.ok)
      throw Failure("nvrtc " + arch + ": " + r.message);
    std::cout << "nvrtc " << arch << ": ok ("
              << (fastCompile ? "fast compile, " : "") << r.binary.size()
              << " bytes; headers from " << dsc::cuda::cudaIncludeDir()
              << ")\n";
  }
  for (const std::string &choice : module.attentionChoices)
    std::cout << "dsc-translate: attention " << choice << "\n";
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception &e) {
    std::cerr << "dsc-translate: " << e.what() << "\n";
    return 1;
  }
}
