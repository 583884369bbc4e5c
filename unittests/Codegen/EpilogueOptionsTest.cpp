//===- EpilogueOptionsTest.cpp - DSC_CUDA_EPILOGUES's values --------------===//
//
// parseEpilogues: which cuBLASLt epilogues a DSC_CUDA_EPILOGUES value turns
// on, and the message naming a value that is not one.
//
//===----------------------------------------------------------------------===//

#include "dsc/Codegen/CudaEmitter.h"

#include <gtest/gtest.h>

using namespace dsc::cuda;

namespace {

struct Parsed {
  std::string problem;
  bool gelu, biasGrad;
};

Parsed parse(const std::string &value) {
  EmitOptions options;
  // A value replaces what was set before.
  options.geluEpilogues = options.biasGradEpilogues = true;
  std::string problem = parseEpilogues(value, options);
  return {problem, options.geluEpilogues, options.biasGradEpilogues};
}

TEST(EpilogueOptions, OneAndAllTurnOnEveryEpilogue) {
  for (const char *value : {"1", "all"}) {
    Parsed p = parse(value);
    EXPECT_EQ(p.problem, "") << value;
    EXPECT_TRUE(p.gelu && p.biasGrad) << value;
  }
}

TEST(EpilogueOptions, ZeroAndEmptyTurnThemOff) {
  for (const char *value : {"0", ""}) {
    Parsed p = parse(value);
    EXPECT_EQ(p.problem, "") << value;
    EXPECT_FALSE(p.gelu || p.biasGrad) << value;
  }
}

TEST(EpilogueOptions, AListNamesEach) {
  Parsed gelu = parse("gelu");
  EXPECT_TRUE(gelu.gelu);
  EXPECT_FALSE(gelu.biasGrad);
  Parsed bgrad = parse("bgrad");
  EXPECT_FALSE(bgrad.gelu);
  EXPECT_TRUE(bgrad.biasGrad);
  Parsed both = parse("bgrad,gelu");
  EXPECT_EQ(both.problem, "");
  EXPECT_TRUE(both.gelu && both.biasGrad);
}

TEST(EpilogueOptions, AnUnknownEntryIsNamed) {
  EXPECT_EQ(parse("gelu,relu").problem,
            "'relu' is not an epilogue (1, all, or a list of gelu and bgrad)");
  EXPECT_EQ(parse("true").problem,
            "'true' is not an epilogue (1, all, or a list of gelu and bgrad)");
  for (const char *value : {",gelu", "gelu,", "gelu,,bgrad"})
    EXPECT_EQ(parse(value).problem,
              "'' is not an epilogue (1, all, or a list of gelu and bgrad)")
        << value;
}

} // namespace
