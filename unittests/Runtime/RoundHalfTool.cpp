//===- RoundHalfTool.cpp - dsc-round-half, for the PyTorch comparison -----===//
//
// `dsc-round-half f16|bf16 IN OUT`: reads raw little-endian f32 values from
// IN, rounds them with the CPU backend's RoundToHalf and writes OUT. Used by
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
  try {
    dsc::rt::test::Harness h;
    int a = h.buf({int64_t(x.size())});
    h.alloc();
    h.set(a, x);
    h.run(dsc::rt::Opcode::RoundToHalf, {a}, {a},
          {{"format", std::string(argv[1])}});
    x = h.get(a);
  } catch (const std::exception &e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  std::ofstream(argv[3], std::ios::binary)
      .write(reinterpret_cast<const char *>(x.data()), x.size() * 4);
  return 0;
}
