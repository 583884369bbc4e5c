//===- ExecTool.cpp - dsc-exec: run functions of a module on every rank ---===//
//
// `[mpirun -np N] dsc-exec [--backend cpu|cuda] MODULE.mlir FUNCTION...`:
// lowers the listed
// functions of a module whose arguments and results carry #dsc.state (a
// dsc.mesh module attribute gives the job's mesh), fills every
// #dsc.state<param, ...> argument with values that name the rank and the
// element (rank * 1000 + element index, in the buffer's type), runs the
// functions in order on the CPU backend (or the CUDA backend: its device
// collectives, NCCL or staged through the host) over the launcher's
// communicator,
// and prints from rank 0 every rank's #dsc.state<output, ...> results:
//
//   rank 1: ar = [1000, 1002, ...]
//
// and the bytes each rank sent per collective kind (Communicator::traffic):
//
//   rank 1: sent all_reduce=16 reduce_scatter=0 ...
//
// For lit tests of the collectives on each mesh axis. Not installed. Every
// failure is one line on stderr and exit status 1.
//
//===----------------------------------------------------------------------===//

#include "dsc/Codegen/LowerToProgram.h"
#include "dsc/Dialect/DscDialect.h"
#include "dsc/Program/Half.h"
#include "dsc/Runtime/CudaBackend.h"
#include "dsc/Runtime/Runtime.h"
#include "dsc/Support/Files.h"
#include "dsc/Support/IRNesting.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include <cstring>
#include <iostream>
#include <sstream>

namespace {

using dsc::rt::Buffer;
using dsc::rt::BufferRole;
using dsc::rt::DType;
using dsc::rt::Error;

dsc::rt::Program lower(const std::string &path,
                       const std::vector<std::string> &functions) {
  mlir::MLIRContext ctx;
  ctx.loadDialect<mlir::dsc::DscDialect, mlir::func::FuncDialect>();
  std::string first;
  mlir::ScopedDiagnosticHandler handler(&ctx, [&](mlir::Diagnostic &diag) {
    if (diag.getSeverity() == mlir::DiagnosticSeverity::Error && first.empty())
      first = diag.str();
    return mlir::success();
  });
  const std::string text = dsc::readRegularFile(path);
  dsc::checkIRNesting(text, path);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(text, &ctx, path);
  if (!module || mlir::failed(mlir::verify(*module)))
    throw Error("'" + path + "' does not parse or verify: " + first);
  std::vector<llvm::StringRef> names(functions.begin(), functions.end());
  mlir::FailureOr<dsc::rt::Program> program =
      dsc::lowerFunctionsToProgram(*module, names);
  if (mlir::failed(program))
    throw Error("cannot lower '" + path + "': " + first);
  return std::move(*program);
}

/// Element i of a parameter on rank r holds r * 1000 + i.
void fill(const Buffer &b, void *data, int rank) {
  for (int64_t i = 0; i < b.numElements(); ++i) {
    const double v = double(rank) * 1000 + double(i);
    switch (b.dtype) {
    case DType::F32:
      static_cast<float *>(data)[i] = float(v);
      break;
    case DType::BF16:
      static_cast<uint16_t *>(data)[i] = dsc::rt::bf16FromFloat(float(v));
      break;
    case DType::F16:
      static_cast<uint16_t *>(data)[i] = dsc::rt::f16FromFloat(float(v));
      break;
    case DType::I32:
      static_cast<int32_t *>(data)[i] = int32_t(v);
      break;
    case DType::I64:
      static_cast<int64_t *>(data)[i] = int64_t(v);
      break;
    case DType::I8:
    case DType::U8:
      static_cast<uint8_t *>(data)[i] = uint8_t(int64_t(v) & 0xff);
      break;
    }
  }
}

double element(const Buffer &b, const void *data, int64_t i) {
  switch (b.dtype) {
  case DType::F32:
    return static_cast<const float *>(data)[i];
  case DType::BF16:
    return dsc::rt::floatFromBF16(static_cast<const uint16_t *>(data)[i]);
  case DType::F16:
    return dsc::rt::floatFromF16(static_cast<const uint16_t *>(data)[i]);
  case DType::I32:
    return static_cast<const int32_t *>(data)[i];
  case DType::I64:
    return double(static_cast<const int64_t *>(data)[i]);
  case DType::I8:
    return static_cast<const int8_t *>(data)[i];
  case DType::U8:
    return static_cast<const uint8_t *>(data)[i];
  }
  return 0;
}

/// This rank's output lines.
std::string outputsOf(const dsc::rt::Program &prog, dsc::rt::Storage &storage,
                      const dsc::rt::Communicator &comm) {
  const int rank = comm.rank();
  std::ostringstream os;
  for (size_t id = 0; id < prog.buffers.size(); ++id) {
    const Buffer &b = prog.buffers[id];
    if (b.role != BufferRole::Output)
      continue;
    os << "rank " << rank << ": " << b.name << " = [";
    for (int64_t i = 0; i < b.numElements(); ++i)
      os << (i ? ", " : "") << element(b, storage.data(int(id)), i);
    os << "]\n";
  }
  os << "rank " << rank << ": sent";
  for (int k = 0; k < int(dsc::rt::CollectiveKind::Count); ++k)
    os << " " << dsc::rt::collectiveKindName(dsc::rt::CollectiveKind(k)) << "="
       << comm.traffic()[dsc::rt::CollectiveKind(k)];
  os << "\n";
  return os.str();
}

/// Rank 0 prints every rank's text in rank order.
void printInRankOrder(dsc::rt::Communicator &comm, const std::string &mine) {
  int64_t length = int64_t(mine.size()), longest = 0;
  std::vector<int64_t> lengths(size_t(comm.size()));
  comm.allGather(&length, lengths.data(), sizeof length);
  for (int64_t l : lengths)
    longest = std::max(longest, l);
  std::string padded = mine;
  padded.resize(size_t(longest));
  std::string all(size_t(longest) * size_t(comm.size()), '\0');
  comm.allGather(padded.data(), all.data(), longest);
  if (comm.rank() != 0)
    return;
  for (int r = 0; r < comm.size(); ++r)
    std::cout << all.substr(size_t(r * longest), size_t(lengths[size_t(r)]));
  std::cout.flush();
}

} // namespace

int main(int argc, char **argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::string backendName = "cpu";
  if (args.size() >= 2 && args[0] == "--backend") {
    backendName = args[1];
    args.erase(args.begin(), args.begin() + 2);
  }
  if (args.size() < 2 || (backendName != "cpu" && backendName != "cuda")) {
    std::cerr << "usage: [mpirun -np N] dsc-exec [--backend cpu|cuda] "
                 "MODULE.mlir FUNCTION...\n";
    return 2;
  }
  try {
    std::unique_ptr<dsc::rt::Communicator> comm =
        dsc::rt::createCommunicator();
    const std::vector<std::string> functions(args.begin() + 1, args.end());
    dsc::rt::Program prog = lower(args[0], functions);
    if (prog.mesh().size() != comm->size())
      throw Error("the module's mesh has " +
                  std::to_string(prog.mesh().size()) +
                  " ranks but this job has " + std::to_string(comm->size()));
    dsc::rt::Storage storage(prog);
    std::vector<int> params, outputs;
    for (size_t id = 0; id < prog.buffers.size(); ++id) {
      if (prog.buffers[id].role == BufferRole::Param) {
        fill(prog.buffers[id], storage.data(int(id)), comm->rank());
        params.push_back(int(id));
      }
      if (prog.buffers[id].role == BufferRole::Output)
        outputs.push_back(int(id));
    }
    std::unique_ptr<dsc::rt::Backend> backend =
        backendName == "cuda"
            ? dsc::rt::createCudaBackend(prog, *comm, dsc::rt::CudaOptions{})
            : dsc::rt::createCpuBackend(*comm);
    backend->prepare(prog);
    backend->upload(storage, params);
    for (const std::string &name : functions)
      backend->run(prog, prog.function(name), storage, {});
    backend->download(storage, outputs);
    printInRankOrder(*comm, outputsOf(prog, storage, *comm));
    return 0;
  } catch (const std::exception &e) {
    std::cerr << "dsc-exec: error: " << e.what() << "\n";
    return 1;
  }
}
