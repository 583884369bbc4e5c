//===- CudaMeshGroups.cpp - A CUDA job's collectives, per mesh axis -------===//

#include "CudaMeshGroups.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace dsc::rt {

namespace {

void check(cudaError_t e, const std::string &what) {
  if (e != cudaSuccess)
    throw Error("CUDA: " + what + ": " + cudaGetErrorString(e));
}

cudaStream_t cudaStreamOf(void *stream) {
  return static_cast<cudaStream_t>(stream);
}

/// What each rank says about its device, gathered at start-up.
struct DeviceIdentity {
  char uuid[16];
  char name[256];
  int capability;
};

std::string describeDevice(const DeviceIdentity &d) {
  return std::string(d.name) + " (sm_" + std::to_string(d.capability) + ")";
}

std::string uuidText(const char (&uuid)[16]) {
  static const char *hex = "0123456789abcdef";
  std::string s = "GPU-";
  for (int i = 0; i < 16; ++i) {
    const unsigned char b = static_cast<unsigned char>(uuid[i]);
    s += hex[b >> 4];
    s += hex[b & 15];
    if (i == 3 || i == 5 || i == 7 || i == 9)
      s += '-';
  }
  return s;
}

/// DSC_CUDA_COMM: "nccl", "staged" or unset (NCCL unless ranks share a
/// GPU).
std::string requestedMode() {
  const char *v = std::getenv("DSC_CUDA_COMM");
  const std::string mode = v ? v : "";
  if (!mode.empty() && mode != "nccl" && mode != "staged")
    throw Error("DSC_CUDA_COMM='" + mode + "': expected nccl or staged");
  return mode;
}

} // namespace

void CudaCopies::toHost(void *host, const void *device, size_t bytes,
                        void *stream) {
  check(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost,
                        cudaStreamOf(stream)),
        "staging a collective's input");
  check(cudaStreamSynchronize(cudaStreamOf(stream)),
        "staging a collective's input");
}

void CudaCopies::toDevice(void *device, const void *host, size_t bytes,
                          void *stream) {
  check(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice,
                        cudaStreamOf(stream)),
        "staging a collective's result");
  // The host buffer is reused by the next collective.
  check(cudaStreamSynchronize(cudaStreamOf(stream)),
        "staging a collective's result");
}

void CudaCopies::within(void *to, const void *from, size_t bytes,
                        void *stream) {
  check(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice,
                        cudaStreamOf(stream)),
        "copying for a collective");
}

void CudaCopies::zero(void *device, size_t bytes, void *stream) {
  check(cudaMemsetAsync(device, 0, bytes, cudaStreamOf(stream)),
        "zeroing for a collective");
}

bool CudaMeshGroups::sharesDevice(Communicator &world, int device,
                                  std::string &shared) {
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, device), "reading the device properties");
  DeviceIdentity mine{};
  std::memcpy(mine.uuid, prop.uuid.bytes, sizeof mine.uuid);
  std::snprintf(mine.name, sizeof mine.name, "%s", prop.name);
  mine.capability = prop.major * 10 + prop.minor;
  std::vector<DeviceIdentity> all(size_t(world.size()));
  world.allGather(&mine, all.data(), int64_t(sizeof mine));
  for (int r = 1; r < world.size(); ++r) {
    const DeviceIdentity &d = all[size_t(r)];
    if (std::strcmp(d.name, all[0].name) != 0 ||
        d.capability != all[0].capability)
      throw Error("CUDA: rank " + std::to_string(r) + " has an " +
                  describeDevice(d) + ", rank 0 an " + describeDevice(all[0]) +
                  ": every rank runs the one compiled step; use GPUs of one "
                  "model");
  }
  for (int a = 0; a < world.size(); ++a)
    for (int b = a + 1; b < world.size(); ++b)
      if (std::memcmp(all[size_t(a)].uuid, all[size_t(b)].uuid, 16) == 0) {
        shared = "ranks " + std::to_string(a) + " and " + std::to_string(b) +
                 " share " + uuidText(all[size_t(a)].uuid);
        return true;
      }
  return false;
}

CudaMeshGroups::CudaMeshGroups(Communicator &world, const Mesh &mesh,
                               int device) {
  host = std::make_unique<MeshGroups>(world, mesh);
  if (world.size() == 1)
    return;
  const std::string mode = requestedMode();
  std::string shared;
  const bool sharing = sharesDevice(world, device, shared);
  if (sharing && mode == "nccl")
    throw Error("DSC_CUDA_COMM=nccl, but " + shared +
                " and NCCL refuses two ranks on one GPU; unset it to stage "
                "the collectives through host memory");
  stagedMode = sharing || mode == "staged";
  if (world.rank() == 0)
    std::fprintf(stderr, "dsc: CUDA collectives %s\n",
                 stagedMode
                     ? ("staged through host memory over " +
                        std::string(world.transport()) + " (" +
                        (sharing ? shared : "DSC_CUDA_COMM=staged") + ")")
                           .c_str()
                     : "on NCCL");
  if (!stagedMode)
    ncclWorld = std::make_unique<NcclGroup>(world, &norm);
  for (MeshAxis axis : kMeshAxes) {
    const int64_t g = mesh.groupSize(axis);
    if (g == 1)
      continue;
    // Without a split the outer data axis is the data axis (MeshGroups).
    if (axis == MeshAxis::DataOuter && mesh.dataInner == 1) {
      groups[int(axis)] = groups[int(MeshAxis::Data)];
      continue;
    }
    Communicator &members = host->group(axis);
    if (stagedMode) {
      owned.push_back(createStagedGroup(members, copier));
      groups[int(axis)] = owned.back().get();
    } else if (g == world.size()) {
      groups[int(axis)] = ncclWorld.get();
      if (ncclGroups.empty() || ncclGroups.front().first != ncclWorld.get())
        ncclGroups.emplace(ncclGroups.begin(), ncclWorld.get(), axis);
    } else {
      // Every rank splits, in the same axis order: the group is named by
      // its member at coordinate 0, as MeshGroups names it.
      const int color = int(mesh.rankAlong(world.rank(), axis, 0));
      auto split = std::make_unique<NcclGroup>(*ncclWorld, color, members);
      ncclGroups.emplace_back(split.get(), axis);
      groups[int(axis)] = split.get();
      owned.push_back(std::move(split));
    }
  }
}

CudaMeshGroups::~CudaMeshGroups() {
  owned.clear();
  ncclWorld.reset();
  cudaFree(norm.scratch);
}

void CudaMeshGroups::wait(cudaStream_t stream, const std::string &what) {
  if (ncclGroups.empty()) {
    check(cudaStreamSynchronize(stream), what);
    return;
  }
  const double limit = collectiveTimeoutSeconds();
  const auto start = std::chrono::steady_clock::now();
  auto abortAll = [&] {
    for (auto &[group, axis] : ncclGroups)
      group->abort();
  };
  for (;;) {
    const cudaError_t e = cudaStreamQuery(stream);
    if (e == cudaSuccess)
      return;
    if (e != cudaErrorNotReady)
      check(e, what);
    for (auto &[group, axis] : ncclGroups) {
      const ncclResult_t r = group->asyncError();
      if (r != ncclSuccess && r != ncclInProgress) {
        const std::string message = group->errorString(r);
        abortAll();
        throw Error("CUDA: " + what + ": NCCL over the " + meshAxisName(axis) +
                    " group failed (" + message +
                    "): a rank was lost or its network failed");
      }
    }
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    if (limit > 0 && waited > limit) {
      abortAll();
      throw Error("CUDA: " + what + " did not finish within " +
                  std::to_string(int(limit)) +
                  " s (DSC_COMM_TIMEOUT): a rank of an NCCL group stopped "
                  "answering; the communicators were aborted");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void CudaMeshGroups::setNormKernels(cudaKernel_t square, cudaKernel_t sqrt) {
  norm.square = square;
  norm.sqrt = sqrt;
  if (!norm.scratch)
    check(cudaMalloc(reinterpret_cast<void **>(&norm.scratch), sizeof(float)),
          "allocating the norm all-reduce's scratch");
}

} // namespace dsc::rt
