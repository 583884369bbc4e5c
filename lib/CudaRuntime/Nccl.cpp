//===- Nccl.cpp - NCCL for the CUDA backend's multi-rank jobs -------------===//

#include "Nccl.h"

#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <vector>

namespace dsc::rt {

namespace {

NcclLibrary load() {
  const char *path = std::getenv("DSC_NCCL_LIBRARY");
  const std::string name = path && *path ? path : "libnccl.so.2";
  void *handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle)
    throw Error("several CUDA ranks need NCCL, which cannot be loaded (" +
                std::string(dlerror()) +
                "); install NCCL or set DSC_NCCL_LIBRARY to libnccl.so.2");
  NcclLibrary lib;
  auto resolve = [&](auto &fn, const char *symbol) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(
        dlsym(handle, symbol));
    if (!fn)
      throw Error(name + " has no " + symbol + " (NCCL older than 2.10?)");
  };
  resolve(lib.getVersion, "ncclGetVersion");
  resolve(lib.getUniqueId, "ncclGetUniqueId");
  resolve(lib.commInitRank, "ncclCommInitRank");
  resolve(lib.commDestroy, "ncclCommDestroy");
  resolve(lib.commAbort, "ncclCommAbort");
  resolve(lib.commGetAsyncError, "ncclCommGetAsyncError");
  resolve(lib.allReduce, "ncclAllReduce");
  resolve(lib.allGather, "ncclAllGather");
  resolve(lib.reduceScatter, "ncclReduceScatter");
  resolve(lib.broadcast, "ncclBroadcast");
  resolve(lib.send, "ncclSend");
  resolve(lib.recv, "ncclRecv");
  resolve(lib.groupStart, "ncclGroupStart");
  resolve(lib.groupEnd, "ncclGroupEnd");
  resolve(lib.getErrorString, "ncclGetErrorString");
  lib.commSplit = reinterpret_cast<decltype(lib.commSplit)>(
      dlsym(handle, "ncclCommSplit"));
  lib.check(lib.getVersion(&lib.version), "reading the NCCL version");
  // ncclAvg (the mean of data parallelism) arrived in NCCL 2.10.
  if (lib.version < 21000)
    throw Error(name + " is NCCL " + std::to_string(lib.version) +
                "; dsc needs 2.10 or newer");
  return lib;
}

} // namespace

const NcclLibrary &NcclLibrary::get() {
  static const NcclLibrary lib = load();
  return lib;
}

void NcclLibrary::check(ncclResult_t r, const std::string &what) const {
  if (r != ncclSuccess)
    throw Error(what + ": NCCL: " + getErrorString(r));
}

ncclUniqueId shareUniqueId(const NcclLibrary &nccl, Communicator &host) {
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  if (host.rank() == 0)
    nccl.check(nccl.getUniqueId(&id), "creating the NCCL unique id");
  std::vector<ncclUniqueId> all(size_t(host.size()));
  host.allGather(&id, all.data(), int64_t(sizeof id));
  return all[0];
}

namespace {

ncclRedOp_t ncclOp(ReduceOp op) {
  return op == ReduceOp::Mean  ? ncclAvg
         : op == ReduceOp::Max ? ncclMax
                               : ncclSum;
}

void check(cudaError_t e, const std::string &what) {
  if (e != cudaSuccess)
    throw Error("CUDA: " + what + ": " + cudaGetErrorString(e));
}

cudaStream_t cudaStreamOf(void *stream) {
  return static_cast<cudaStream_t>(stream);
}

} // namespace

NcclGroup::NcclGroup(Communicator &host, const NormKernels *norm)
    : nccl(NcclLibrary::get()), ranks(host.size()), myRank(host.rank()),
      norm(norm) {
  const ncclUniqueId id = shareUniqueId(nccl, host);
  nccl.check(nccl.commInitRank(&comm, host.size(), id, host.rank()),
             "joining the NCCL communicator as rank " +
                 std::to_string(host.rank()));
}

NcclGroup::NcclGroup(NcclGroup &world, int color, Communicator &host)
    : nccl(world.nccl), ranks(host.size()), myRank(host.rank()),
      norm(world.norm) {
  // Every rank of the world takes part in a split, as in the host split
  // that made `host`; the new communicator ranks by `key`.
  if (nccl.commSplit) {
    split = true;
    nccl.check(nccl.commSplit(world.comm, color, host.rank(), &comm, nullptr),
               "splitting the NCCL communicator (color " +
                   std::to_string(color) + ")");
    return;
  }
  const ncclUniqueId id = shareUniqueId(nccl, host);
  nccl.check(nccl.commInitRank(&comm, host.size(), id, host.rank()),
             "joining a group's NCCL communicator as rank " +
                 std::to_string(host.rank()));
}

NcclGroup::~NcclGroup() {
  if (comm)
    nccl.commDestroy(comm);
}

ncclResult_t NcclGroup::asyncError() const {
  ncclResult_t state = ncclSuccess;
  const ncclResult_t r = nccl.commGetAsyncError(comm, &state);
  return r != ncclSuccess ? r : state;
}

void NcclGroup::abort() {
  if (comm)
    nccl.commAbort(comm);
  comm = nullptr;
}

void NcclGroup::allReduce(const void *src, void *dst, int64_t floats,
                          ReduceOp op, void *stream) {
  nccl.check(nccl.allReduce(src, dst, size_t(floats), ncclFloat, ncclOp(op),
                            comm, cudaStreamOf(stream)),
             "ncclAllReduce");
}

void NcclGroup::reduceScatter(const void *src, void *dst,
                              int64_t floatsPerRank, ReduceOp op,
                              void *stream) {
  nccl.check(nccl.reduceScatter(src, dst, size_t(floatsPerRank), ncclFloat,
                                ncclOp(op), comm, cudaStreamOf(stream)),
             "ncclReduceScatter");
}

void NcclGroup::allGather(const void *src, void *dst, int64_t bytesPerRank,
                          void *stream) {
  nccl.check(nccl.allGather(src, dst, size_t(bytesPerRank), ncclUint8, comm,
                            cudaStreamOf(stream)),
             "ncclAllGather");
}

void NcclGroup::allToAll(const void *src, void *dst, int64_t bytesPerPeer,
                         void *stream) {
  const auto *in = static_cast<const char *>(src);
  auto *out = static_cast<char *>(dst);
  const size_t bytes = size_t(bytesPerPeer);
  nccl.check(nccl.groupStart(), "ncclGroupStart");
  for (int peer = 0; peer < ranks; ++peer) {
    nccl.check(nccl.send(in + size_t(peer) * bytes, bytes, ncclUint8, peer,
                         comm, cudaStreamOf(stream)),
               "ncclSend");
    nccl.check(nccl.recv(out + size_t(peer) * bytes, bytes, ncclUint8, peer,
                         comm, cudaStreamOf(stream)),
               "ncclRecv");
  }
  nccl.check(nccl.groupEnd(), "ncclGroupEnd (all-to-all)");
}

void NcclGroup::broadcast(void *data, int64_t bytes, int root, void *stream) {
  nccl.check(nccl.broadcast(data, data, size_t(bytes), ncclUint8, root, comm,
                            cudaStreamOf(stream)),
             "ncclBroadcast");
}

void NcclGroup::send(const void *src, int64_t bytes, int to, void *stream) {
  nccl.check(nccl.send(src, size_t(bytes), ncclUint8, to, comm,
                       cudaStreamOf(stream)),
             "ncclSend");
}

void NcclGroup::recv(void *dst, int64_t bytes, int from, void *stream) {
  nccl.check(nccl.recv(dst, size_t(bytes), ncclUint8, from, comm,
                       cudaStreamOf(stream)),
             "ncclRecv");
}

void NcclGroup::exchange(const std::vector<PeerMessage> &sends,
                         const std::vector<PeerMessage> &receives,
                         void *stream) {
  nccl.check(nccl.groupStart(), "ncclGroupStart");
  for (const PeerMessage &m : sends)
    nccl.check(nccl.send(m.data, size_t(m.bytes), ncclUint8, m.peer, comm,
                         cudaStreamOf(stream)),
               "ncclSend");
  for (const PeerMessage &m : receives)
    nccl.check(nccl.recv(m.data, size_t(m.bytes), ncclUint8, m.peer, comm,
                         cudaStreamOf(stream)),
               "ncclRecv");
  nccl.check(nccl.groupEnd(), "ncclGroupEnd (expert exchange)");
}

void NcclGroup::normAllReduce(const void *normIn, void *result, void *stream) {
  if (!norm || !norm->square)
    throw Error("norm_all_reduce on NCCL: the norm kernels are not loaded");
  const void *from = normIn;
  float *square = norm->scratch;
  void *squareArgs[] = {&from, &square};
  check(cudaLaunchKernel(reinterpret_cast<const void *>(norm->square), dim3(1),
                         dim3(1), squareArgs, 0, cudaStreamOf(stream)),
        "launching dsc_norm_square");
  allReduce(square, square, 1, ReduceOp::Sum, stream);
  void *to = result;
  void *sqrtArgs[] = {&square, &to};
  check(cudaLaunchKernel(reinterpret_cast<const void *>(norm->sqrt), dim3(1),
                         dim3(1), sqrtArgs, 0, cudaStreamOf(stream)),
        "launching dsc_norm_sqrt");
}

} // namespace dsc::rt
