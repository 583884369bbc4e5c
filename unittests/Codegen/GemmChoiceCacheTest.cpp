//===- GemmChoiceCacheTest.cpp - Timed cuBLASLt choices on disk -----------===//
//
// The GEMM algorithm choices the CUDA backend keeps beside the kernel
// cache: a stored choice is found under its exact key only; damaged,
// foreign or colliding entries are misses; an unwritable directory is
// reported, not thrown.
//
//===----------------------------------------------------------------------===//

#include "dsc/Codegen/GemmChoiceCache.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

using namespace dsc::cuda;
namespace fs = std::filesystem;

namespace {

class GemmChoiceCacheTest : public ::testing::Test {
protected:
  void SetUp() override {
    dir = fs::temp_directory_path() /
          ("dsc-gemm-choice-test-" + std::to_string(::getpid()));
    fs::remove_all(dir);
  }
  void TearDown() override { fs::remove_all(dir); }
  /// The only entry's path.
  fs::path entry() const {
    fs::path found;
    for (const auto &e : fs::directory_iterator(dir)) {
      EXPECT_TRUE(found.empty()) << "a second entry " << e.path();
      found = e.path();
    }
    return found;
  }

  fs::path dir;
  const std::string key = "NVIDIA H200|cublasLt 130100|Linear 4096x768x3072";
};

TEST_F(GemmChoiceCacheTest, StoredChoiceIsFoundUnderItsKeyOnly) {
  EXPECT_FALSE(loadGemmChoice(dir.string(), key));
  ASSERT_EQ(storeGemmChoice(dir.string(), key, {3, 41.5}), "");
  std::optional<GemmChoice> c = loadGemmChoice(dir.string(), key);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->candidate, 3);
  EXPECT_DOUBLE_EQ(c->microseconds, 41.5);
  EXPECT_FALSE(loadGemmChoice(dir.string(), key + "x"));
  ASSERT_EQ(storeGemmChoice(dir.string(), key, {1, 40.0}), ""); // replaced
  EXPECT_EQ(loadGemmChoice(dir.string(), key)->candidate, 1);
}

TEST_F(GemmChoiceCacheTest, DamagedOrCollidingEntriesAreMisses) {
  ASSERT_EQ(storeGemmChoice(dir.string(), key, {2, 10.0}), "");
  const fs::path path = entry();
  for (const char *text :
       {"", "dsc gemm choice 1\n", "garbage\n", "dsc gemm choice 1\nKEY\n",
        "dsc gemm choice 1\nKEY\n2\n", "dsc gemm choice 1\nKEY\n-1 3\n",
        "dsc gemm choice 1\nKEY\n2 nan\n", "dsc gemm choice 1\nKEY\n2 3 4\n",
        "dsc gemm choice 1\nanother key\n2 3\n"}) {
    std::string body = text;
    if (size_t at = body.find("KEY"); at != std::string::npos)
      body.replace(at, 3, key);
    std::ofstream(path, std::ios::trunc) << body;
    EXPECT_FALSE(loadGemmChoice(dir.string(), key)) << text;
  }
}

TEST_F(GemmChoiceCacheTest, NoDirectoryMeansNoCaching) {
  EXPECT_EQ(storeGemmChoice("", key, {1, 1.0}), "");
  EXPECT_FALSE(loadGemmChoice("", key));
  EXPECT_NE(storeGemmChoice(dir.string(), "a\nb", {1, 1.0}), "");
}

TEST_F(GemmChoiceCacheTest, UnwritableDirectoryIsReported) {
  fs::create_directories(dir);
  const fs::path file = dir / "not-a-directory";
  std::ofstream(file) << "x";
  EXPECT_NE(storeGemmChoice(file.string(), key, {1, 1.0}), "");
}

} // namespace
