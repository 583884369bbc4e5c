//===- SwapFile.h - ZeRO-Infinity's NVMe swap file -------------*- C++ -*-===//
//
// The file in `nvme_path` that holds a step's NVMe-resident buffers
// (Buffer::nvme). It is created unlinked (a killed run leaves nothing
// behind) and its whole size is reserved up front, so a full or unwritable
// directory fails before training starts. The step reads and writes it
// (swap_in, swap_out) with O_DIRECT where the file system allows it, so
// the state does not stay in RAM as page cache, through the request
// queues of DeepSpeed's `aio` section (SwapIo.h);
// checkpoints and initialisation reach it through a shared mapping of the
// same file (the kernel writes back and drops the cached pages of a range
// around each direct transfer, so the two views agree).
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_SWAPFILE_H
#define DSC_RUNTIME_SWAPFILE_H

#include "SwapIo.h"

#include <cstdint>
#include <memory>
#include <string>

namespace dsc::rt {

class SwapFile {
public:
  /// Direct transfers are aligned to this (every logical block size up to
  /// 4 KiB).
  static constexpr int64_t kAlignment = SwapIo::kAlignment;

  /// Reserves `bytes` in a new file in directory `dir`; throws an Error
  /// naming `dir` when it cannot. Without O_DIRECT (tmpfs, some network
  /// file systems) it says so once on stderr and uses the page cache.
  SwapFile(const std::string &dir, int64_t bytes,
           const AioOptions &aio = AioOptions());
  ~SwapFile();
  SwapFile(const SwapFile &) = delete;
  SwapFile &operator=(const SwapFile &) = delete;

  /// The mapping of the whole file.
  char *mapped() const { return base; }
  /// Whether reads and writes bypass the page cache.
  bool direct() const { return io != nullptr; }
  /// The request queues of direct transfers; null without O_DIRECT.
  const SwapIo *queues() const { return io.get(); }
  /// `bytes` at `offset`; direct transfers need `offset` to be a multiple
  /// of kAlignment and may write the file up to the next multiple (the
  /// memory plan starts every tensor at one).
  void read(int64_t offset, void *dst, int64_t bytes) const;
  void write(int64_t offset, const void *src, int64_t bytes) const;

private:
  void release();
  void transfer(bool out, int64_t offset, char *data, int64_t bytes) const;
  std::string dir;
  int fd = -1;
  char *base = nullptr;
  int64_t size = 0;
  /// Null without O_DIRECT.
  std::unique_ptr<SwapIo> io;
};

} // namespace dsc::rt

#endif // DSC_RUNTIME_SWAPFILE_H
