//===- CompressedAllReduceTool.cpp - dsc-compressed-allreduce -------------===//
//
// `mpirun -np G dsc-compressed-allreduce N P ITERS OUTDIR`: runs the
// instruction sequence -dsc-onebit-adam emits for one tensor (onebit_compress,
// all_to_all, all_gather, onebit_decode_mean, onebit_compress, all_gather x2,
// onebit_decode, flat_resize) on the CPU backend and the job's communicator,
// ITERS times with error feedback, on a tensor of N elements padded to P.
// Each rank writes its input and its result of every iteration, and its
// errors after the last, as raw f32 to OUTDIR/r<rank>_<what>.bin, for
// test/tools/Inputs/onebit/check_compressed_allreduce.py to compare with
// DeepSpeed's compressed_allreduce written out in numpy. Not installed.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/Runtime.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <iostream>
#include <random>

using namespace dsc::rt;

namespace {

/// A rank's input of iteration `it`: normal values of mixed magnitude, with
/// exact zeros and negative zeros (the sign rule's edge: sign(0) = +1).
std::vector<float> inputOf(int rank, int it, int64_t n) {
  std::mt19937 gen(uint32_t(1000 * rank + it + 1));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t pick = gen() % 16;
    x[size_t(i)] = pick == 0   ? 0.0f
                   : pick == 1 ? -0.0f
                               : normal(gen) * std::ldexp(1.0f, int(gen() % 9) - 4);
  }
  return x;
}

void write(const std::string &path, const float *data, int64_t n) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char *>(data), std::streamsize(n * 4));
  if (!out)
    throw Error("cannot write " + path);
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 5) {
    std::cerr << "usage: dsc-compressed-allreduce N P ITERS OUTDIR\n";
    return 2;
  }
  try {
    const int64_t n = std::stoll(argv[1]), p = std::stoll(argv[2]);
    const int iters = std::stoi(argv[3]);
    const std::string dir = argv[4];
    std::unique_ptr<Communicator> comm = createCommunicator();
    const int64_t g = comm->size();
    if (p % (8 * g) != 0 || p < n)
      throw Error("P must be a multiple of 8 * ranks and at least N");

    Program prog;
    prog.meta["world_size"] = g;
    auto buffer = [&](const char *name, int64_t elements, DType t,
                      BufferRole role = BufferRole::Temp) {
      Buffer b;
      b.name = name;
      b.shape = {elements};
      b.dtype = t;
      b.role = role;
      prog.buffers.push_back(b);
      return int(prog.buffers.size()) - 1;
    };
    const int x = buffer("x", n, DType::F32, BufferRole::Input);
    const int we = buffer("worker_error", p, DType::F32, BufferRole::OptState);
    const int se = buffer("server_error", p / g, DType::F32,
                          BufferRole::OptState);
    const int signs = buffer("signs", p / 8, DType::U8);
    const int scale = buffer("scale", 1, DType::F32);
    const int received = buffer("received", p / 8, DType::U8);
    const int scales = buffer("scales", g, DType::F32);
    const int mean = buffer("mean", p / g, DType::F32);
    const int serverSigns = buffer("server_signs", p / g / 8, DType::U8);
    const int serverScale = buffer("server_scale", 1, DType::F32);
    const int allSigns = buffer("all_signs", p / 8, DType::U8);
    const int allScales = buffer("all_scales", g, DType::F32);
    const int decoded = buffer("decoded", p, DType::F32);
    const int result = buffer("result", n, DType::F32, BufferRole::Output);

    Function &fn = prog.functions["compressed_all_reduce"];
    fn.name = "compressed_all_reduce";
    const std::map<std::string, AttrValue> data = {
        {"axis", std::string("data")}};
    fn.body = {
        {Opcode::OnebitCompress, {x, we}, {signs, scale, we}, {}},
        {Opcode::AllToAll, {signs}, {received}, data},
        {Opcode::AllGather, {scale}, {scales}, data},
        {Opcode::OnebitDecodeMean, {received, scales}, {mean}, {}},
        {Opcode::OnebitCompress, {mean, se}, {serverSigns, serverScale, se}, {}},
        {Opcode::AllGather, {serverSigns}, {allSigns}, data},
        {Opcode::AllGather, {serverScale}, {allScales}, data},
        {Opcode::OnebitDecode, {allSigns, allScales}, {decoded}, {}},
        {Opcode::FlatResize, {decoded}, {result}, {}},
    };

    Storage storage(prog);
    std::memset(storage.data(we), 0, size_t(p) * 4);
    std::memset(storage.data(se), 0, size_t(p / g) * 4);
    std::unique_ptr<Backend> backend = createCpuBackend(*comm);
    const std::string prefix = dir + "/r" + std::to_string(comm->rank()) + "_";
    for (int it = 0; it < iters; ++it) {
      std::vector<float> in = inputOf(comm->rank(), it, n);
      std::memcpy(storage.data(x), in.data(), size_t(n) * 4);
      backend->run(prog, fn, storage, RngContext{});
      write(prefix + "in" + std::to_string(it) + ".bin", in.data(), n);
      write(prefix + "out" + std::to_string(it) + ".bin", storage.f32(result),
            n);
    }
    write(prefix + "worker_error.bin", storage.f32(we), p);
    write(prefix + "server_error.bin", storage.f32(se), p / g);
  } catch (const std::exception &e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
