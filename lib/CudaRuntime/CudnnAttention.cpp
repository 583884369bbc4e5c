//===- CudnnAttention.cpp - cuDNN fused attention (SDPA) ------------------===//
//
// The cuDNN frontend is header-only; it is compiled here without its JSON
// library (CUDNN_FRONTEND_SKIP_JSON_LIB) and calls the cudnn* C entry
// points directly. libcudnn is not linked: this file defines those entry
// points itself, each forwarding to the symbol of the library loadCudnn
// opened (see "Entry points" below).
//
// Why not the frontend's own NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING: it would
// accept our library (the frontend then declares `extern void
// *cudnn_frontend::cudnn_dlhandle`, which the application defines and
// sets to an already-dlopen'ed libcudnn, as its Python package does), but
// the same switch sends every CUDA runtime call of the frontend
// (cudaMemsetAsync of workspace, the stream-capture queries and
// cudaUserObjectCreate of CUDA graph capture, device attributes) through
// its own dlopen of libcudart.so.12 / .so.13 (cudnn_frontend_shim.h,
// get_cuda_symbol). dsc links the CUDA runtime statically and its GPU
// bundle carries no libcudart.so, so those calls stay on the static runtime
// the rest of the backend uses, and only libcudnn is loaded at run time.
//
//===----------------------------------------------------------------------===//

#include "CudnnAttention.h"
#include "VersionedLibrary.h"

#include <cudnn_frontend.h>

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <glob.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <set>
#include <sstream>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace fe = cudnn_frontend;

namespace dsc::rt {

//===----------------------------------------------------------------------===//
// Loading libcudnn
//===----------------------------------------------------------------------===//

namespace {

struct LoadedCudnn {
  std::mutex mutex;
  void *handle = nullptr;
  CudnnLibraryInfo info;
};

LoadedCudnn &loaded() {
  // Never destroyed: the frontend's own statics may call into cuDNN while
  // the process exits.
  static LoadedCudnn &state = *new LoadedCudnn;
  return state;
}

std::string envOr(const char *name, const std::string &otherwise = "") {
  const char *value = std::getenv(name);
  return value && *value ? value : otherwise;
}

/// The Python prefixes whose site-packages may hold the nvidia-cudnn-cu13 or
/// -cu12 wheel: an active virtual environment or conda environment, the
/// user's ~/.local, pyenv's versions, and the prefix of every directory on
/// $PATH (a venv's or /usr/local's bin).
std::vector<std::string> pythonPrefixes() {
  std::vector<std::string> prefixes;
  std::set<std::string> seen;
  auto add = [&](const std::string &prefix) {
    if (!prefix.empty() && seen.insert(prefix).second)
      prefixes.push_back(prefix);
  };
  add(envOr("VIRTUAL_ENV"));
  add(envOr("CONDA_PREFIX"));
  if (!envOr("HOME").empty())
    add(envOr("HOME") + "/.local");
  // pyenv's interpreters (its shims on $PATH hide them).
  const std::string pyenv = envOr(
      "PYENV_ROOT", envOr("HOME").empty() ? "" : envOr("HOME") + "/.pyenv");
  if (!pyenv.empty())
    add(pyenv + "/versions/*");
  std::stringstream path(envOr("PATH"));
  for (std::string dir; std::getline(path, dir, ':');) {
    while (dir.size() > 1 && dir.back() == '/')
      dir.pop_back();
    const size_t slash = dir.rfind('/');
    // "/bin" adds no prefix: on a merged /usr it is /usr/bin.
    if (slash != std::string::npos && dir.substr(slash + 1) == "bin")
      add(dir.substr(0, slash));
  }
  return prefixes;
}

/// A place libcudnn.so.9 is looked for after the dynamic loader: glob
/// patterns, and how the error message names them.
struct Place {
  std::string label;
  std::vector<std::string> patterns;
};

std::vector<Place> fallbackPlaces() {
  std::vector<Place> places;
  std::set<std::string> toolkits;
  for (const std::string &root :
       {envOr("CUDA_HOME"), std::string("/usr/local/cuda")})
    if (!root.empty() && toolkits.insert(root).second)
      places.push_back({root + "/lib64", {root + "/lib64/libcudnn.so.9"}});
  Place wheels{"site-packages/nvidia/cudnn/lib under", {}};
  for (const std::string &prefix : pythonPrefixes()) {
    wheels.label += (wheels.patterns.empty() ? " " : ", ") + prefix;
    for (const char *packages : {"site-packages", "dist-packages"})
      for (const char *dir : {"nvidia/cudnn/lib", "nvidia/cu13/lib"})
        wheels.patterns.push_back(prefix + "/lib/python3*/" + packages + "/" +
                                  dir + "/libcudnn.so.9");
  }
  if (!wheels.patterns.empty())
    places.push_back(wheels);
  return places;
}

std::vector<std::string> expand(const std::string &pattern) {
  std::vector<std::string> paths;
  glob_t matches;
  if (glob(pattern.c_str(), 0, nullptr, &matches) == 0)
    for (size_t i = 0; i < matches.gl_pathc; ++i)
      paths.push_back(matches.gl_pathv[i]);
  globfree(&matches);
  // The newest Python first.
  return {paths.rbegin(), paths.rend()};
}

std::string versionString(size_t version) {
  if (version < 90000) // cuDNN 8 counted major * 1000 + minor * 100 + patch
    return std::to_string(version / 1000) + "." +
           std::to_string(version / 100 % 10) + "." +
           std::to_string(version % 100);
  return dottedVersion(version);
}

/// Opens `name` and checks it is cuDNN 9; on failure returns null with the
/// reason in `why`.
void *openCudnn(const std::string &name, CudnnLibraryInfo &info,
                std::string &why) {
  void *handle = openVersionedLibrary(name, "cudnnGetVersion", "cuDNN",
                                      info.path, info.version, why);
  if (!handle || (info.version >= 90000 && info.version < 100000))
    return handle;
  why = info.path + " is cuDNN " + versionString(info.version) +
        "; cuDNN attention needs cuDNN 9";
  dlclose(handle);
  return nullptr;
}

void *cudnnSymbol(const char *name) {
  const CudnnLibraryInfo &info = loadCudnn();
  void *symbol = dlsym(loaded().handle, name);
  if (!symbol)
    throw Error(info.path + " (cuDNN " + versionString(info.version) +
                ") has no " + name + ": dsc was built with cuDNN " +
                versionString(CUDNN_VERSION) + " headers");
  return symbol;
}

} // namespace

const CudnnLibraryInfo &loadCudnn() {
  LoadedCudnn &state = loaded();
  std::lock_guard<std::mutex> lock(state.mutex);
  if (state.handle)
    return state.info;

  CudnnLibraryInfo info;
  std::string why;
  const std::string override = envOr("DSC_CUDNN_LIBRARY");
  if (!override.empty()) {
    state.handle = openCudnn(override, info, why);
    if (!state.handle)
      throw Error("cuDNN attention: DSC_CUDNN_LIBRARY=" + override +
                  " cannot be used (" + why + ")");
  } else {
    std::vector<std::string> tried;
    state.handle = openCudnn("libcudnn.so.9", info, why);
    tried.push_back("libcudnn.so.9 through the dynamic loader");
    for (const Place &place : fallbackPlaces()) {
      bool found = false;
      for (const std::string &pattern : place.patterns)
        for (const std::string &path : expand(pattern)) {
          if (state.handle)
            break;
          // A library that exists but cannot be used says why.
          found = true;
          state.handle = openCudnn(path, info, why);
          if (!state.handle)
            tried.push_back(why);
        }
      if (state.handle)
        break;
      if (!found)
        tried.push_back(place.label);
    }
    if (!state.handle) {
      std::string message = "cuDNN attention needs libcudnn 9, which cannot "
                            "be loaded (tried ";
      for (size_t i = 0; i < tried.size(); ++i)
        message += (i ? ", " : "") + tried[i];
      throw Error(message + "); install cuDNN 9 (pip install "
                            "nvidia-cudnn-cu13) or set DSC_CUDNN_LIBRARY to "
                            "its libcudnn.so.9");
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
// The cudnn* functions the frontend (and CudnnHandle) call, defined here
// with cudnn.h's prototypes: each resolves its symbol in the loaded library
// once (loading it on first use) and forwards. A frontend upgrade that calls
// a function not listed fails to link, naming it. They are hidden: linked
// into a shared object they must not interpose on libcudnn's own calls.

#define DSC_CUDNN_FORWARD(ret, name, params, args)                             \
  extern "C" __attribute__((visibility("hidden"))) ret name params {           \
    static const auto fn =                                                     \
        reinterpret_cast<decltype(&name)>(dsc::rt::cudnnSymbol(#name));        \
    return fn args;                                                            \
  }

DSC_CUDNN_FORWARD(size_t, cudnnGetVersion, (void), ())
DSC_CUDNN_FORWARD(const char *, cudnnGetErrorString, (cudnnStatus_t status),
                  (status))
DSC_CUDNN_FORWARD(void, cudnnGetLastErrorString,
                  (char *message, size_t maxSize), (message, maxSize))
DSC_CUDNN_FORWARD(cudnnStatus_t, cudnnCreate, (cudnnHandle_t * handle),
                  (handle))
DSC_CUDNN_FORWARD(cudnnStatus_t, cudnnDestroy, (cudnnHandle_t handle), (handle))
DSC_CUDNN_FORWARD(cudnnStatus_t, cudnnSetStream,
                  (cudnnHandle_t handle, cudaStream_t stream), (handle, stream))
DSC_CUDNN_FORWARD(cudnnStatus_t, cudnnGetStream,
                  (cudnnHandle_t handle, cudaStream_t *stream),
                  (handle, stream))
DSC_CUDNN_FORWARD(cudnnStatus_t, cudnnBackendCreateDescriptor,
                  (cudnnBackendDescriptorType_t type,
                   cudnnBackendDescriptor_t *descriptor),
                  (type, descriptor))
DSC_CUDNN_FORWARD(cudnnStatus_t, cudnnBackendDestroyDescriptor,
                  (cudnnBackendDescriptor_t descriptor), (descriptor))
DSC_CUDNN_FORWARD(cudnnStatus_t, cudnnBackendFinalize,
                  (cudnnBackendDescriptor_t descriptor), (descriptor))
DSC_CUDNN_FORWARD(cudnnStatus_t, cudnnBackendSetAttribute,
                  (cudnnBackendDescriptor_t descriptor,
                   cudnnBackendAttributeName_t name,
                   cudnnBackendAttributeType_t type, int64_t count,
                   const void *elements),
                  (descriptor, name, type, count, elements))
DSC_CUDNN_FORWARD(cudnnStatus_t, cudnnBackendGetAttribute,
                  (cudnnBackendDescriptor_t const descriptor,
                   cudnnBackendAttributeName_t name,
                   cudnnBackendAttributeType_t type, int64_t requested,
                   int64_t *count, void *elements),
                  (descriptor, name, type, requested, count, elements))
DSC_CUDNN_FORWARD(cudnnStatus_t, cudnnBackendExecute,
                  (cudnnHandle_t handle, cudnnBackendDescriptor_t plan,
                   cudnnBackendDescriptor_t variantPack),
                  (handle, plan, variantPack))

#undef DSC_CUDNN_FORWARD

namespace dsc::rt {

//===----------------------------------------------------------------------===//
// CudnnHandle
//===----------------------------------------------------------------------===//

namespace {

std::string statusName(cudnnStatus_t status) {
  return cudnnGetErrorString(status);
}

} // namespace

CudnnHandle::CudnnHandle() {
  loadCudnn();
  const cudnnStatus_t status = cudnnCreate(&handle);
  if (status != CUDNN_STATUS_SUCCESS)
    throw Error("cuDNN: cudnnCreate: " + statusName(status));
}

CudnnHandle::~CudnnHandle() {
  if (handle)
    cudnnDestroy(handle);
}

//===----------------------------------------------------------------------===//
// SdpaProblem
//===----------------------------------------------------------------------===//

SdpaStrides SdpaStrides::bhsd(int64_t heads, int64_t seq, int64_t headDim) {
  return {heads * seq * headDim, seq * headDim, headDim, 1};
}

SdpaStrides SdpaStrides::bshd(int64_t heads, int64_t seq, int64_t headDim,
                              int64_t tokenStride) {
  if (tokenStride == 0)
    tokenStride = heads * headDim;
  return {seq * tokenStride, headDim, tokenStride, 1};
}

SdpaProblem SdpaProblem::fusedQkv(int64_t batch, int64_t heads, int64_t seq,
                                  int64_t headDim) {
  SdpaProblem p;
  p.batch = batch;
  p.qHeads = p.kvHeads = heads;
  p.qLen = p.kvLen = seq;
  p.headDim = headDim;
  p.q = p.k = p.v = p.dq = p.dk = p.dv =
      SdpaStrides::bshd(heads, seq, headDim, 3 * heads * headDim);
  p.o = p.dO = SdpaStrides::bshd(heads, seq, headDim);
  p.scale = 1.0f / std::sqrt(float(headDim));
  return p;
}

std::string SdpaProblem::describe() const {
  std::ostringstream s;
  s << "attention B" << batch << " H" << qHeads << "/" << kvHeads << " T"
    << qLen << "x" << kvLen << " D" << headDim << " "
    << (type == SdpaType::BF16 ? "bf16" : "f16");
  if (causal)
    s << " causal";
  if (keyPadding)
    s << " key-padding";
  if (dropout != 0.0f)
    s << " dropout " << dropout;
  return s.str();
}

//===----------------------------------------------------------------------===//
// CudnnSdpa
//===----------------------------------------------------------------------===//

namespace {

// The uids that bind tensors to pointers at execution.
enum Uid : int64_t {
  kQ = 1,
  kK,
  kV,
  kO,
  kStats,
  kSeed,
  kOffset,
  kQLens,
  kKvLens,
  kDO,
  kDQ,
  kDK,
  kDV,
};

using TensorPtr = std::shared_ptr<fe::graph::Tensor_attributes>;

const char *codeName(fe::error_code_t code) {
  switch (code) {
  case fe::error_code_t::OK:
    return "OK";
  case fe::error_code_t::ATTRIBUTE_NOT_SET:
    return "ATTRIBUTE_NOT_SET";
  case fe::error_code_t::SHAPE_DEDUCTION_FAILED:
    return "SHAPE_DEDUCTION_FAILED";
  case fe::error_code_t::INVALID_TENSOR_NAME:
    return "INVALID_TENSOR_NAME";
  case fe::error_code_t::INVALID_VARIANT_PACK:
    return "INVALID_VARIANT_PACK";
  case fe::error_code_t::GRAPH_NOT_SUPPORTED:
    return "GRAPH_NOT_SUPPORTED";
  case fe::error_code_t::GRAPH_EXECUTION_PLAN_CREATION_FAILED:
    return "GRAPH_EXECUTION_PLAN_CREATION_FAILED";
  case fe::error_code_t::GRAPH_EXECUTION_FAILED:
    return "GRAPH_EXECUTION_FAILED";
  case fe::error_code_t::HEURISTIC_QUERY_FAILED:
    return "HEURISTIC_QUERY_FAILED";
  case fe::error_code_t::UNSUPPORTED_GRAPH_FORMAT:
    return "UNSUPPORTED_GRAPH_FORMAT";
  case fe::error_code_t::CUDA_API_FAILED:
    return "CUDA_API_FAILED";
  case fe::error_code_t::CUDNN_BACKEND_API_FAILED:
    return "CUDNN_BACKEND_API_FAILED";
  case fe::error_code_t::INVALID_CUDA_DEVICE:
    return "INVALID_CUDA_DEVICE";
  case fe::error_code_t::HANDLE_ERROR:
    return "HANDLE_ERROR";
  case fe::error_code_t::INVALID_VALUE:
    return "INVALID_VALUE";
  case fe::error_code_t::NVRTC_COMPILATION_FAILED:
    return "NVRTC_COMPILATION_FAILED";
  }
  return "unknown error";
}

/// One line: newlines of the frontend's message become spaces.
std::string oneLine(std::string text) {
  for (char &c : text)
    if (c == '\n' || c == '\r')
      c = ' ';
  while (!text.empty() && text.back() == ' ')
    text.pop_back();
  return text;
}

/// Whether a failed step means "cuDNN cannot run this problem" rather than
/// a broken installation or a bug.
bool isUnsupported(fe::error_code_t code, bool planning) {
  return code == fe::error_code_t::GRAPH_NOT_SUPPORTED ||
         code == fe::error_code_t::INVALID_VALUE ||
         code == fe::error_code_t::ATTRIBUTE_NOT_SET ||
         code == fe::error_code_t::SHAPE_DEDUCTION_FAILED ||
         (planning &&
          (code == fe::error_code_t::GRAPH_EXECUTION_PLAN_CREATION_FAILED ||
           code == fe::error_code_t::HEURISTIC_QUERY_FAILED));
}

} // namespace

struct CudnnSdpa::Graphs {
  SdpaProblem problem;
  std::shared_ptr<fe::graph::Graph> forward, backward;
  cudnnHandle_t handle = nullptr;
  int64_t forwardWorkspace = 0, backwardWorkspace = 0;

  /// Throws for a failed frontend call: "<problem>: <step>: cuDNN <code>:
  /// <message>".
  void check(fe::error_t result, const char *step,
             bool planning = false) const {
    if (result.is_good())
      return;
    const std::string message = "cuDNN " + problem.describe() + ": " + step +
                                ": " + codeName(result.get_code()) + ": " +
                                oneLine(result.get_message());
    if (isUnsupported(result.get_code(), planning))
      throw CudnnUnsupported(message);
    throw Error(message);
  }

  void buildPlans(fe::graph::Graph &graph, cudnnHandle_t handle,
                  int64_t &workspace, bool forward) const;

  /// Runs a frontend call that may also throw (the entry points throw Error
  /// when the library lacks a symbol; the frontend throws std::exception
  /// for some CUDA failures).
  template <typename Fn> void guarded(const char *step, Fn &&fn) const {
    try {
      fn();
    } catch (const Error &) {
      throw;
    } catch (const std::exception &e) {
      throw Error("cuDNN " + problem.describe() + ": " + step + ": " +
                  oneLine(e.what()));
    }
  }
};

namespace {

fe::DataType_t ioType(SdpaType t) {
  switch (t) {
  case SdpaType::BF16:
    return fe::DataType_t::BFLOAT16;
  case SdpaType::F16:
    return fe::DataType_t::HALF;
  }
  return fe::DataType_t::BFLOAT16;
}

std::shared_ptr<fe::graph::Graph> newGraph(const SdpaProblem &p,
                                           int smVersion) {
  auto graph = std::make_shared<fe::graph::Graph>();
  graph->set_io_data_type(ioType(p.type))
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  // Fixes the architecture validate() judges support for, so no device is
  // queried (the frontend would call cudaGetDevice otherwise).
  graph->set_sm_version(smVersion);
  return graph;
}

TensorPtr operand(fe::graph::Graph &graph, const char *name, Uid uid,
                  int64_t batch, int64_t heads, int64_t seq, int64_t dim,
                  const SdpaStrides &s) {
  return graph.tensor(fe::graph::Tensor_attributes()
                          .set_name(name)
                          .set_uid(uid)
                          .set_dim({batch, heads, seq, dim})
                          .set_stride({s.batch, s.head, s.seq, s.dim}));
}

void setOutput(const TensorPtr &t, const char *name, Uid uid, int64_t batch,
               int64_t heads, int64_t seq, int64_t dim, const SdpaStrides &s) {
  t->set_output(true)
      .set_name(name)
      .set_uid(uid)
      .set_dim({batch, heads, seq, dim})
      .set_stride({s.batch, s.head, s.seq, s.dim});
}

TensorPtr scalarInt(fe::graph::Graph &graph, const char *name, Uid uid,
                    int64_t count, fe::DataType_t type) {
  return graph.tensor(fe::graph::Tensor_attributes()
                          .set_name(name)
                          .set_uid(uid)
                          .set_dim({count, 1, 1, 1})
                          .set_stride({1, 1, 1, 1})
                          .set_data_type(type));
}

/// The stats tensor f32 [B, H, T, 1], contiguous.
void statsLayout(fe::graph::Tensor_attributes &t, const SdpaProblem &p) {
  t.set_name("stats")
      .set_uid(kStats)
      .set_data_type(fe::DataType_t::FLOAT)
      .set_dim({p.batch, p.qHeads, p.qLen, 1})
      .set_stride({p.qHeads * p.qLen, p.qLen, 1, 1});
}

/// The mask and dropout options both attribute kinds share.
template <typename Attributes>
void setMasks(Attributes &a, fe::graph::Graph &graph, const SdpaProblem &p) {
  a.set_attn_scale(p.scale);
  if (p.causal) {
    a.set_diagonal_alignment(p.qLen == p.kvLen
                                 ? fe::DiagonalAlignment_t::TOP_LEFT
                                 : fe::DiagonalAlignment_t::BOTTOM_RIGHT)
        .set_diagonal_band_right_bound(0);
  }
  if (p.keyPadding)
    a.set_padding_mask(true)
        .set_seq_len_q(
            scalarInt(graph, "q_lens", kQLens, p.batch, fe::DataType_t::INT32))
        .set_seq_len_kv(scalarInt(graph, "kv_lens", kKvLens, p.batch,
                                  fe::DataType_t::INT32));
  if (p.dropout != 0.0f)
    a.set_dropout(
        p.dropout, scalarInt(graph, "seed", kSeed, 1, fe::DataType_t::INT64),
        scalarInt(graph, "offset", kOffset, 1, fe::DataType_t::INT64));
}

/// What the frontend cannot be asked: problems no cuDNN version runs, or
/// that would index out of the caller's buffers.
void checkProblem(const SdpaProblem &p) {
  auto fail = [&](const std::string &why) {
    throw CudnnUnsupported("cuDNN " + p.describe() + ": " + why);
  };
  if (p.batch <= 0 || p.qHeads <= 0 || p.kvHeads <= 0 || p.qLen <= 0 ||
      p.kvLen <= 0 || p.headDim <= 0)
    fail("every extent must be positive");
  if (p.qHeads % p.kvHeads != 0)
    fail("query heads must be a multiple of key/value heads");
  if (!(p.dropout >= 0.0f && p.dropout < 1.0f))
    fail("dropout must be in [0, 1)");
  if (!std::isfinite(p.scale))
    fail("the scale must be finite");
}

int currentSmVersion() {
  int device = 0, major = 0, minor = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor,
                             device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor,
                             device) != cudaSuccess) {
    cudaGetLastError();
    throw Error("cuDNN attention: no CUDA device to read the compute "
                "capability of");
  }
  return major * 10 + minor;
}

} // namespace

CudnnSdpa::CudnnSdpa(const SdpaProblem &problem, int smVersion)
    : graphs(std::make_unique<Graphs>()) {
  Graphs &g = *graphs;
  g.problem = problem;
  const SdpaProblem &p = g.problem;
  checkProblem(p);
  loadCudnn();
  if (smVersion == 0)
    smVersion = currentSmVersion();
  // Q, K and V, the same in both graphs.
  auto qkvOperands = [&](fe::graph::Graph &graph) {
    return std::make_tuple(
        operand(graph, "q", kQ, p.batch, p.qHeads, p.qLen, p.headDim, p.q),
        operand(graph, "k", kK, p.batch, p.kvHeads, p.kvLen, p.headDim, p.k),
        operand(graph, "v", kV, p.batch, p.kvHeads, p.kvLen, p.headDim, p.v));
  };

  g.guarded("describing the forward", [&] {
    g.forward = newGraph(p, smVersion);
    fe::graph::Graph &graph = *g.forward;
    auto [q, k, v] = qkvOperands(graph);
    auto options =
        fe::graph::SDPA_attributes().set_name("sdpa").set_generate_stats(
            p.backward);
    setMasks(options, graph, p);
    auto [o, stats] = graph.sdpa(q, k, v, options);
    setOutput(o, "o", kO, p.batch, p.qHeads, p.qLen, p.headDim, p.o);
    if (p.backward)
      statsLayout(stats->set_output(true), p);
    g.check(graph.validate(), "validating the forward");
  });
  if (!p.backward)
    return;

  g.guarded("describing the backward", [&] {
    g.backward = newGraph(p, smVersion);
    fe::graph::Graph &graph = *g.backward;
    auto [q, k, v] = qkvOperands(graph);
    TensorPtr o =
        operand(graph, "o", kO, p.batch, p.qHeads, p.qLen, p.headDim, p.o);
    TensorPtr dO =
        operand(graph, "dO", kDO, p.batch, p.qHeads, p.qLen, p.headDim, p.dO);
    TensorPtr stats = graph.tensor(fe::graph::Tensor_attributes());
    statsLayout(*stats, p);
    auto options =
        fe::graph::SDPA_backward_attributes().set_name("sdpa_backward");
    setMasks(options, graph, p);
    auto [dq, dk, dv] = graph.sdpa_backward(q, k, v, o, dO, stats, options);
    setOutput(dq, "dq", kDQ, p.batch, p.qHeads, p.qLen, p.headDim, p.dq);
    setOutput(dk, "dk", kDK, p.batch, p.kvHeads, p.kvLen, p.headDim, p.dk);
    setOutput(dv, "dv", kDV, p.batch, p.kvHeads, p.kvLen, p.headDim, p.dv);
    g.check(graph.validate(), "validating the backward");
  });
}

CudnnSdpa::~CudnnSdpa() = default;
CudnnSdpa::CudnnSdpa(CudnnSdpa &&) noexcept = default;
CudnnSdpa &CudnnSdpa::operator=(CudnnSdpa &&) noexcept = default;

const SdpaProblem &CudnnSdpa::problem() const { return graphs->problem; }

/// Lowers `graph`, asks cuDNN's heuristics (mode A, then the fallback list)
/// for engines that support it and builds the first that compiles.
void CudnnSdpa::Graphs::buildPlans(fe::graph::Graph &graph,
                                   cudnnHandle_t handle, int64_t &workspace,
                                   bool forward) const {
  const Graphs &g = *this;
  g.check(graph.build_operation_graph(handle),
          forward ? "lowering the forward" : "lowering the backward");
  g.check(graph.create_execution_plans(
              {fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK}),
          forward ? "finding forward engines" : "finding backward engines",
          /*planning=*/true);
  g.check(graph.check_support(),
          forward ? "checking forward engines" : "checking backward engines",
          /*planning=*/true);
  g.check(graph.build_plans(fe::BuildPlanPolicy_t::HEURISTICS_CHOICE),
          forward ? "building the forward plan" : "building the backward plan",
          /*planning=*/true);
  g.check(graph.get_workspace_size(workspace),
          forward ? "sizing the forward workspace"
                  : "sizing the backward workspace");
}

void CudnnSdpa::build(cudnnHandle_t handle) {
  Graphs &g = *graphs;
  if (!handle)
    throw Error("cuDNN " + g.problem.describe() + ": build needs a handle");
  g.guarded("building", [&] {
    g.buildPlans(*g.forward, handle, g.forwardWorkspace, true);
    if (g.backward)
      g.buildPlans(*g.backward, handle, g.backwardWorkspace, false);
  });
  g.handle = handle;
}

bool CudnnSdpa::built() const { return graphs->handle != nullptr; }

int64_t CudnnSdpa::forwardWorkspaceBytes() const {
  return graphs->forwardWorkspace;
}
int64_t CudnnSdpa::backwardWorkspaceBytes() const {
  return graphs->backwardWorkspace;
}
int64_t CudnnSdpa::workspaceBytes() const {
  return std::max(graphs->forwardWorkspace, graphs->backwardWorkspace);
}

namespace {

void bindMasks(std::unordered_map<int64_t, void *> &pack, const SdpaProblem &p,
               const int64_t *seed, const int64_t *offset, const int32_t *qLens,
               const int32_t *kvLens, const std::string &where) {
  if (p.dropout != 0.0f) {
    if (!seed || !offset)
      throw Error(where + ": dropout needs the seed and offset tensors");
    pack[kSeed] = const_cast<int64_t *>(seed);
    pack[kOffset] = const_cast<int64_t *>(offset);
  }
  if (p.keyPadding) {
    if (!qLens || !kvLens)
      throw Error(where + ": key padding needs the length tensors");
    pack[kQLens] = const_cast<int32_t *>(qLens);
    pack[kKvLens] = const_cast<int32_t *>(kvLens);
  }
}

void setStream(cudnnHandle_t handle, cudaStream_t stream,
               const std::string &where) {
  const cudnnStatus_t status = cudnnSetStream(handle, stream);
  if (status != CUDNN_STATUS_SUCCESS)
    throw Error(where + ": cudnnSetStream: " + statusName(status));
}

} // namespace

void CudnnSdpa::forward(const SdpaForwardArgs &a, cudaStream_t stream) const {
  const Graphs &g = *graphs;
  const std::string where = "cuDNN " + g.problem.describe() + " forward";
  if (!g.handle)
    throw Error(where + ": not built");
  std::unordered_map<int64_t, void *> pack = {
      {kQ, const_cast<void *>(a.q)},
      {kK, const_cast<void *>(a.k)},
      {kV, const_cast<void *>(a.v)},
      {kO, a.o},
  };
  if (g.problem.backward)
    pack[kStats] = a.stats;
  bindMasks(pack, g.problem, a.seed, a.offset, a.qLens, a.kvLens, where);
  setStream(g.handle, stream, where);
  g.guarded("running the forward", [&] {
    g.check(g.forward->execute(g.handle, pack, a.workspace),
            "running the forward");
  });
}

void CudnnSdpa::backward(const SdpaBackwardArgs &a, cudaStream_t stream) const {
  const Graphs &g = *graphs;
  const std::string where = "cuDNN " + g.problem.describe() + " backward";
  if (!g.backward)
    throw Error(where + ": the problem was built without its backward");
  if (!g.handle)
    throw Error(where + ": not built");
  std::unordered_map<int64_t, void *> pack = {
      {kQ, const_cast<void *>(a.q)},
      {kK, const_cast<void *>(a.k)},
      {kV, const_cast<void *>(a.v)},
      {kO, const_cast<void *>(a.o)},
      {kDO, const_cast<void *>(a.dO)},
      {kStats, const_cast<float *>(a.stats)},
      {kDQ, a.dq},
      {kDK, a.dk},
      {kDV, a.dv},
  };
  bindMasks(pack, g.problem, a.seed, a.offset, a.qLens, a.kvLens, where);
  setStream(g.handle, stream, where);
  g.guarded("running the backward", [&] {
    g.check(g.backward->execute(g.handle, pack, a.workspace),
            "running the backward");
  });
}

} // namespace dsc::rt
