//===- CublasLtLibrary.cpp - cuBLASLt, loaded when the CUDA backend starts ===//

#include "CublasLtLibrary.h"
#include "VersionedLibrary.h"

#include "dsc/Support/Error.h"

#include <cublasLt.h>
#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <vector>

namespace dsc::rt {

namespace {

struct LoadedCublasLt {
  std::mutex mutex;
  void *handle = nullptr;
  CublasLtLibraryInfo info;
};

LoadedCublasLt &loaded() {
  // Never destroyed: handles the backend frees at exit still call into it.
  static LoadedCublasLt &state = *new LoadedCublasLt;
  return state;
}

const std::string kSoname =
    "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR);

void *cublasLtSymbol(const char *name) {
  const CublasLtLibraryInfo &info = loadCublasLt();
  void *symbol = dlsym(loaded().handle, name);
  if (!symbol)
    throw Error(info.path + " has no " + name + ": dsc was built with " +
                "cuBLASLt " + std::to_string(CUBLAS_VERSION) + " headers");
  return symbol;
}

} // namespace

void *openCublasLt(const std::string &name, CublasLtLibraryInfo &info,
                   std::string &why) {
  void *handle = openVersionedLibrary(name, "cublasLtGetVersion", "cuBLASLt",
                                      info.path, info.version, why);
  if (!handle || info.version / 10000 == CUBLAS_VER_MAJOR)
    return handle;
  why = info.path + " is cuBLASLt " + std::to_string(info.version) +
        "; dsc was built for major version " +
        std::to_string(CUBLAS_VER_MAJOR);
  dlclose(handle);
  return nullptr;
}

const CublasLtLibraryInfo &loadCublasLt() {
  LoadedCublasLt &state = loaded();
  std::lock_guard<std::mutex> lock(state.mutex);
  if (state.handle)
    return state.info;
  CublasLtLibraryInfo info;
  std::string why;
  const char *override = std::getenv("DSC_CUBLASLT_LIBRARY");
  if (override && *override) {
    state.handle = openCublasLt(override, info, why);
    if (!state.handle)
      throw Error("the CUDA backend: DSC_CUBLASLT_LIBRARY=" +
                  std::string(override) + " cannot be used (" + why + ")");
  } else {
    std::vector<std::string> tried;
    for (const std::string &candidate :
         {kSoname, std::string(DSC_CUDA_LIBRARY_DIR) + "/" + kSoname}) {
      state.handle = openCublasLt(candidate, info, why);
      if (state.handle)
        break;
      tried.push_back(why);
    }
    if (!state.handle) {
      std::string message = "the CUDA backend needs " + kSoname +
                            ", which cannot be loaded (";
      for (size_t i = 0; i < tried.size(); ++i)
        message += (i ? "; " : "") + tried[i];
      throw Error(message + "); install the CUDA toolkit's cuBLAS or set "
                            "DSC_CUBLASLT_LIBRARY to its " + kSoname);
    }
  }
  state.info = info;
  return state.info;
}

} // namespace dsc::rt

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//
//
// The cublasLt* functions the backend calls, with cublasLt.h's prototypes:
// each resolves its symbol once (loading the library on first use) and
// forwards. A new call not listed here fails to link, naming it. Hidden, so
// that linked into a shared object they never interpose on other users of
// cuBLASLt in the process (PyTorch's, under the extension).

#define DSC_CUBLASLT_FORWARD(ret, name, params, args)                          \
  extern "C" __attribute__((visibility("hidden"))) ret name params {           \
    static const auto fn =                                                     \
        reinterpret_cast<decltype(&name)>(dsc::rt::cublasLtSymbol(#name));     \
    return fn args;                                                            \
  }

DSC_CUBLASLT_FORWARD(size_t, cublasLtGetVersion, (void), ())
DSC_CUBLASLT_FORWARD(const char *, cublasLtGetStatusString,
                     (cublasStatus_t status), (status))
DSC_CUBLASLT_FORWARD(cublasStatus_t, cublasLtCreate,
                     (cublasLtHandle_t * handle), (handle))
DSC_CUBLASLT_FORWARD(cublasStatus_t, cublasLtDestroy,
                     (cublasLtHandle_t handle), (handle))
DSC_CUBLASLT_FORWARD(cublasStatus_t, cublasLtMatmulDescCreate,
                     (cublasLtMatmulDesc_t * desc,
                      cublasComputeType_t computeType,
                      cudaDataType_t scaleType),
                     (desc, computeType, scaleType))
DSC_CUBLASLT_FORWARD(cublasStatus_t, cublasLtMatmulDescDestroy,
                     (cublasLtMatmulDesc_t desc), (desc))
DSC_CUBLASLT_FORWARD(cublasStatus_t, cublasLtMatmulDescSetAttribute,
                     (cublasLtMatmulDesc_t desc,
                      cublasLtMatmulDescAttributes_t attr, const void *buf,
                      size_t size),
                     (desc, attr, buf, size))
DSC_CUBLASLT_FORWARD(cublasStatus_t, cublasLtMatrixLayoutCreate,
                     (cublasLtMatrixLayout_t * layout, cudaDataType type,
                      uint64_t rows, uint64_t cols, int64_t ld),
                     (layout, type, rows, cols, ld))
DSC_CUBLASLT_FORWARD(cublasStatus_t, cublasLtMatrixLayoutDestroy,
                     (cublasLtMatrixLayout_t layout), (layout))
DSC_CUBLASLT_FORWARD(cublasStatus_t, cublasLtMatrixLayoutSetAttribute,
                     (cublasLtMatrixLayout_t layout,
                      cublasLtMatrixLayoutAttribute_t attr, const void *buf,
                      size_t size),
                     (layout, attr, buf, size))
DSC_CUBLASLT_FORWARD(cublasStatus_t, cublasLtMatmulPreferenceCreate,
                     (cublasLtMatmulPreference_t * pref), (pref))
DSC_CUBLASLT_FORWARD(cublasStatus_t, cublasLtMatmulPreferenceDestroy,
                     (cublasLtMatmulPreference_t pref), (pref))
DSC_CUBLASLT_FORWARD(cublasStatus_t, cublasLtMatmulPreferenceSetAttribute,
                     (cublasLtMatmulPreference_t pref,
                      cublasLtMatmulPreferenceAttributes_t attr,
                      const void *buf, size_t size),
                     (pref, attr, buf, size))
DSC_CUBLASLT_FORWARD(cublasStatus_t, cublasLtMatmulAlgoGetHeuristic,
                     (cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                      cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                      cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                      cublasLtMatmulPreference_t pref, int requested,
                      cublasLtMatmulHeuristicResult_t results[], int *count),
                     (handle, desc, a, b, c, d, pref, requested, results,
                      count))
DSC_CUBLASLT_FORWARD(cublasStatus_t, cublasLtMatmul,
                     (cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                      const void *alpha, const void *a,
                      cublasLtMatrixLayout_t aDesc, const void *b,
                      cublasLtMatrixLayout_t bDesc, const void *beta,
                      const void *c, cublasLtMatrixLayout_t cDesc, void *d,
                      cublasLtMatrixLayout_t dDesc,
                      const cublasLtMatmulAlgo_t *algo, void *workspace,
                      size_t workspaceSize, cudaStream_t stream),
                     (handle, desc, alpha, a, aDesc, b, bDesc, beta, c, cDesc,
                      d, dDesc, algo, workspace, workspaceSize, stream))
