//===- CublasLtLibraryTest.cpp - cuBLASLt loaded on first use -------------===//
//
// The backend's cublasLt* calls go through forwarders to the library
// loadCublasLt opens (no GPU needed for the calls made here). A process
// that never calls them never loads it: test/tools/lazy-libraries.test
// checks that dsc-run does not name it among its needed libraries.
//
//===----------------------------------------------------------------------===//

#include "CublasLtLibrary.h"

#include <gtest/gtest.h>

#include <cublasLt.h>
#include <dlfcn.h>

#include <string>

using namespace dsc::rt;

TEST(CublasLtLibrary, LoadsTheHeadersMajorVersionOnFirstUse) {
  const std::string soname =
      "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR);
  // Nothing has called cuBLASLt yet: the library is not in the process.
  EXPECT_EQ(dlopen(soname.c_str(), RTLD_NOW | RTLD_NOLOAD), nullptr);
  const size_t version = cublasLtGetVersion(); // loads it
  const CublasLtLibraryInfo &info = loadCublasLt();
  EXPECT_EQ(version, info.version);
  EXPECT_EQ(version / 10000, size_t(CUBLAS_VER_MAJOR));
  EXPECT_NE(info.path.find("libcublasLt"), std::string::npos) << info.path;
  EXPECT_NE(std::string(cublasLtGetStatusString(CUBLAS_STATUS_NOT_INITIALIZED)),
            "");
}

TEST(CublasLtLibrary, AMissingFileSaysWhy) {
  CublasLtLibraryInfo info;
  std::string why;
  EXPECT_EQ(openCublasLt("/nonexistent/libcublasLt.so.13", info, why),
            nullptr);
  EXPECT_NE(why.find("/nonexistent/libcublasLt.so.13"), std::string::npos)
      << why;
}

TEST(CublasLtLibrary, ALibraryThatIsNotCublasLtIsRefused) {
  CublasLtLibraryInfo info;
  std::string why;
  EXPECT_EQ(openCublasLt("libm.so.6", info, why), nullptr);
  EXPECT_NE(why.find("has no cublasLtGetVersion: not cuBLASLt"),
            std::string::npos)
      << why;
}
