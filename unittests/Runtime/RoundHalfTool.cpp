//===- RoundHalfTool.cpp - dsc-round-half, for the PyTorch comparison -----===//
//
// `dsc-round-half f16|bf16 IN OUT`: reads raw little-endian f32 values from
// IN, converts them to f16 or bf16 and back with the CPU backend's
// dsc.convert and writes OUT (f32). Used by
// test/Numerics/round-to-half.test to compare against torch .half() and
// .bfloat16(); not installed.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>

int main(int argc, char **argv) {
  if (argc != 4) {
    std::cerr << "usage: dsc-round-half f16|bf16 IN OUT\n";
    return 2;
  }
  std::ifstream in(argv[2], std::ios::binary);
  std::vector<char> raw((std::istreambuf_iterator<char>(in)), {});
  std::vector<float> x(raw.size() / 4);
  std::memcpy(x.data(), raw.data(), x.size() * 4);
  const std::string format = argv[1];
  if (format != "f16" && format != "bf16") {
    std::cerr << "error: format must be \"f16\" or \"bf16\", got \""
              << format << "\"\n";
    return 1;
  }
  try {
    using dsc::rt::DType;
    dsc::rt::test::Harness h;
    const int64_t n = int64_t(x.size());
    int a = h.buf({n});
    int half = h.buf({n}, format == "bf16" ? DType::BF16 : DType::F16);
    h.alloc();
    h.set(a, x);
    h.run(dsc::rt::Opcode::Convert, {a}, {half});
    h.run(dsc::rt::Opcode::Convert, {half}, {a});
    x = h.get(a);
  } catch (const std::exception &e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  std::ofstream(argv[3], std::ios::binary)
      .write(reinterpret_cast<const char *>(x.data()), x.size() * 4);
  return 0;
}
