//===- DeviceCollectives.h - Collectives on a device backend's memory -*- C++ -*-===//
//
// What a device backend (CUDA) needs to run a Program's collective
// instructions (DeviceCollective) on its own memory: one DeviceGroup per mesh axis
// that moves device buffers (NCCL, or the host-staged group made here),
// and runDeviceCollective, which maps an instruction onto its group's
// operations exactly as the CPU backend maps it onto a Communicator's.
// Device addresses and streams are opaque here: this half links no CUDA,
// so the staged group is tested on CPU ranks with host memory standing in
// for the device's.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_DEVICECOLLECTIVES_H
#define DSC_RUNTIME_DEVICECOLLECTIVES_H

#include "dsc/Program/DeviceCollective.h"
#include "dsc/Runtime/Runtime.h"

#include <memory>
#include <string>
#include <vector>

namespace dsc::rt {

/// What this rank sends for `c` by Communicator::traffic's ring volumes,
/// and under which kind (Count: nothing, as shard and a one-rank group).
CollectiveKind trafficKind(const DeviceCollective &c);
int64_t sentBytes(const DeviceCollective &c, int64_t groupRank);

/// Copies between device and host memory, in the order of the device work
/// queued on `stream` before them; they complete before they return.
class DeviceCopies {
public:
  virtual ~DeviceCopies() = default;
  virtual void toHost(void *host, const void *device, size_t bytes,
                      void *stream) = 0;
  virtual void toDevice(void *device, const void *host, size_t bytes,
                        void *stream) = 0;
  /// Device to device; may return before it completes (stream order).
  virtual void within(void *to, const void *from, size_t bytes,
                      void *stream) = 0;
  /// `bytes` zero bytes at `device`; may return before it completes.
  virtual void zero(void *device, size_t bytes, void *stream) = 0;
};

/// One point-to-point message of an exchange: `bytes` at device address
/// `data` to or from group rank `peer`.
struct PeerMessage {
  void *data = nullptr;
  int64_t bytes = 0;
  int peer = 0;
};

/// The collectives of one mesh axis's group on device memory, queued on
/// `stream` (the backend's, opaque). Their semantics are Communicator's;
/// `src` and `dst` may be equal (in place) where the operation allows it.
class DeviceGroup {
public:
  virtual ~DeviceGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// Whether its operations may be captured into a CUDA graph (NCCL's
  /// kernels may; the staged group's host work may not).
  virtual bool capturable() const = 0;
  /// Whether it counts what it sends in the job's CommTraffic itself (the
  /// staged group's host communicator does); otherwise the backend counts
  /// DeviceCollective::sentBytes.
  virtual bool countsTraffic() const = 0;
  virtual void allReduce(const void *src, void *dst, int64_t floats,
                         ReduceOp op, void *stream) = 0;
  virtual void reduceScatter(const void *src, void *dst, int64_t floatsPerRank,
                             ReduceOp op, void *stream) = 0;
  virtual void allGather(const void *src, void *dst, int64_t bytesPerRank,
                         void *stream) = 0;
  virtual void allToAll(const void *src, void *dst, int64_t bytesPerPeer,
                        void *stream) = 0;
  virtual void broadcast(void *data, int64_t bytes, int root, void *stream) = 0;
  virtual void send(const void *src, int64_t bytes, int to, void *stream) = 0;
  virtual void recv(void *dst, int64_t bytes, int from, void *stream) = 0;
  /// `result` (one float) receives the square root of the sum over the
  /// group of each rank's `norm` squared.
  virtual void normAllReduce(const void *norm, void *result, void *stream) = 0;
  /// An all-to-all of any sizes (MPI_Alltoallv as messages): every send and
  /// receive posted together, so no order of them can deadlock; messages
  /// between two ranks match in the order given. Counted as all-to-all
  /// traffic.
  virtual void exchange(const std::vector<PeerMessage> &sends,
                        const std::vector<PeerMessage> &receives,
                        void *stream) = 0;
};

/// A group whose device buffers go through host memory and `host`, the
/// job's communicator of the same ranks (MPI or TCP): the mode for ranks
/// that share a GPU, where NCCL refuses to run. `copies` must outlive it.
std::unique_ptr<DeviceGroup> createStagedGroup(Communicator &host,
                                               DeviceCopies &copies);

/// Runs collective `c` on its axis's group `g`: `src` is the input's
/// device address and `dst` the output's (Send: no output; Recv: no
/// input), `copies` serves the local copies (an out-of-place broadcast,
/// shard).
void runDeviceCollective(DeviceGroup &g, DeviceCopies &copies,
                         const DeviceCollective &c, const void *src, void *dst,
                         void *stream);

/// Runs expert parallelism's dsc.moe_exchange_counts or dsc.moe_exchange
/// (`c.op`) on the expert axis's group `g`, `operands` the instruction's
/// inputs then outputs (device addresses). The counts are read to the host
/// first (the backend cannot capture it into a CUDA graph); the rows move
/// as one message per non-empty block of ExpertExchangeLayout, this rank's
/// own by device copies. Returns the bytes this rank sent to its peers.
int64_t runDeviceExpertExchange(DeviceGroup &g, DeviceCopies &copies,
                                const DeviceCollective &c,
                                const std::vector<void *> &operands,
                                void *stream);

} // namespace dsc::rt

#endif // DSC_RUNTIME_DEVICECOLLECTIVES_H
