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
  resolve(lib.allReduce, "ncclAllReduce");
  resolve(lib.allGather, "ncclAllGather");
  resolve(lib.send, "ncclSend");
  resolve(lib.recv, "ncclRecv");
  resolve(lib.groupStart, "ncclGroupStart");
  resolve(lib.groupEnd, "ncclGroupEnd");
  resolve(lib.getErrorString, "ncclGetErrorString");
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

NcclComm::NcclComm(Communicator &host)
    : nccl(NcclLibrary::get()), ranks(host.size()) {
  const ncclUniqueId id = shareUniqueId(nccl, host);
  nccl.check(nccl.commInitRank(&comm, host.size(), id, host.rank()),
             "joining the NCCL communicator as rank " +
                 std::to_string(host.rank()));
}

NcclComm::~NcclComm() {
  if (comm)
    nccl.commDestroy(comm);
}

void NcclComm::allReduce(const void *src, void *dst, size_t count,
                         ReduceOp op, cudaStream_t stream) const {
  const ncclRedOp_t nop = op == ReduceOp::Mean  ? ncclAvg
                          : op == ReduceOp::Max ? ncclMax
                                                : ncclSum;
  nccl.check(nccl.allReduce(src, dst, count, ncclFloat, nop, comm, stream),
             "ncclAllReduce");
}

void NcclComm::allGather(const void *src, void *dst, size_t bytesPerRank,
                         cudaStream_t stream) const {
  nccl.check(nccl.allGather(src, dst, bytesPerRank, ncclUint8, comm, stream),
             "ncclAllGather");
}

void NcclComm::allToAll(const void *src, void *dst, size_t bytesPerPeer,
                        cudaStream_t stream) const {
  const auto *in = static_cast<const char *>(src);
  auto *out = static_cast<char *>(dst);
  nccl.check(nccl.groupStart(), "ncclGroupStart");
  for (int peer = 0; peer < ranks; ++peer) {
    nccl.check(nccl.send(in + size_t(peer) * bytesPerPeer, bytesPerPeer,
                         ncclUint8, peer, comm, stream),
               "ncclSend");
    nccl.check(nccl.recv(out + size_t(peer) * bytesPerPeer, bytesPerPeer,
                         ncclUint8, peer, comm, stream),
               "ncclRecv");
  }
  nccl.check(nccl.groupEnd(), "ncclGroupEnd (all-to-all)");
}

} // namespace dsc::rt
