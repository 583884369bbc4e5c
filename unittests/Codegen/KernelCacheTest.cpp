//===- KernelCacheTest.cpp - NVRTC binaries cached on disk ----------------===//
//
// Real NVRTC compiles (no GPU needed) of a one-line kernel into a fresh
// cache directory: hits, misses on any key change, and damaged or foreign
// entries that must be recompiled and replaced, never used.
//
//===----------------------------------------------------------------------===//

#include "dsc/Codegen/KernelCache.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

using namespace dsc::cuda;
namespace fs = std::filesystem;

namespace {

const char *kSource =
    "extern \"C\" __global__ void twice(float *x) { x[threadIdx.x] *= 2; }\n";

class KernelCacheTest : public ::testing::Test {
protected:
  void SetUp() override {
    if (!haveNvrtc())
      GTEST_SKIP() << "built without NVRTC";
    dir = fs::temp_directory_path() /
          ("dsc-kernel-cache-test-" + std::to_string(::getpid()));
    fs::remove_all(dir);
  }
  void TearDown() override { fs::remove_all(dir); }

  CachedCompile compile(const std::string &source = kSource,
                        const std::string &arch = "sm_80") {
    NvrtcOptions o;
    o.arch = arch;
    return compileCached(source, "test.cu", o, dir.string());
  }
  size_t entries() const {
    size_t n = 0;
    for (const auto &e : fs::directory_iterator(dir)) {
      EXPECT_EQ(e.path().extension(), ".cubin") << e.path();
      ++n;
    }
    return n;
  }

  fs::path dir;
};

TEST_F(KernelCacheTest, SecondCompileIsAHitWithTheSameBinary) {
  CachedCompile first = compile();
  ASSERT_TRUE(first.result.ok) << first.result.message;
  EXPECT_FALSE(first.hit);
  EXPECT_EQ(first.cacheProblem, "");
  EXPECT_TRUE(fs::exists(first.path));
  CachedCompile second = compile();
  ASSERT_TRUE(second.result.ok);
  EXPECT_TRUE(second.hit);
  EXPECT_EQ(second.path, first.path);
  EXPECT_EQ(second.result.binary, first.result.binary);
  EXPECT_EQ(entries(), 1u); // no temporary files left behind
}

TEST_F(KernelCacheTest, ArchitectureAndSourceAreInTheKey) {
  ASSERT_TRUE(compile().result.ok);
  CachedCompile sm90 = compile(kSource, "sm_90");
  ASSERT_TRUE(sm90.result.ok);
  EXPECT_FALSE(sm90.hit);
  CachedCompile other = compile(std::string(kSource) + "// changed\n");
  ASSERT_TRUE(other.result.ok);
  EXPECT_FALSE(other.hit);
  EXPECT_EQ(entries(), 3u);
}

TEST_F(KernelCacheTest, DamagedEntryIsRecompiledAndReplaced) {
  CachedCompile first = compile();
  ASSERT_TRUE(first.result.ok);
  const auto size = fs::file_size(first.path);
  // One flipped byte in the binary: the checksum no longer matches.
  {
    std::fstream f(first.path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(std::streamoff(size - 40));
    char c = 0;
    f.read(&c, 1);
    f.seekp(std::streamoff(size - 40));
    c = char(c ^ 0x5a);
    f.write(&c, 1);
  }
  CachedCompile flipped = compile();
  ASSERT_TRUE(flipped.result.ok);
  EXPECT_FALSE(flipped.hit);
  EXPECT_EQ(flipped.result.binary, first.result.binary);
  // A truncated entry (an interrupted copy).
  fs::resize_file(first.path, size / 2);
  CachedCompile truncated = compile();
  ASSERT_TRUE(truncated.result.ok);
  EXPECT_FALSE(truncated.hit);
  EXPECT_EQ(fs::file_size(first.path), size);
  // A foreign file under the entry's name.
  std::ofstream(first.path, std::ios::trunc) << "not a dsc kernel cache entry";
  CachedCompile foreign = compile();
  ASSERT_TRUE(foreign.result.ok);
  EXPECT_FALSE(foreign.hit);
  EXPECT_TRUE(compile().hit);
}

TEST_F(KernelCacheTest, UnwritableCacheStillCompiles) {
  // The cache "directory" is a regular file: nothing can be created in it.
  std::ofstream(dir.string()) << "x";
  CachedCompile c = compile();
  ASSERT_TRUE(c.result.ok) << c.result.message;
  EXPECT_FALSE(c.hit);
  EXPECT_NE(c.cacheProblem, "");
  fs::remove(dir);
}

TEST_F(KernelCacheTest, FailedCompileIsNotCached) {
  CachedCompile bad = compile("extern \"C\" __global__ void k() { nope; }\n");
  EXPECT_FALSE(bad.result.ok);
  EXPECT_NE(bad.result.message.find("test.cu:1:"), std::string::npos)
      << bad.result.message;
  EXPECT_FALSE(fs::exists(bad.path));
}

TEST(KernelCacheDir, EnvironmentChoosesTheDirectory) {
  setenv("DSC_KERNEL_CACHE", "/tmp/dsc-cache-x", 1);
  EXPECT_EQ(defaultKernelCacheDir(), "/tmp/dsc-cache-x");
  unsetenv("DSC_KERNEL_CACHE");
  setenv("XDG_CACHE_HOME", "/tmp/xdg", 1);
  EXPECT_EQ(defaultKernelCacheDir(), "/tmp/xdg/dsc/kernels");
}

} // namespace
