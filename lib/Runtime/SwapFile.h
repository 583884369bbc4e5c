//===- SwapFile.h - ZeRO-Infinity's NVMe swap file -------------*- C++ -*-===//
//
// The file in `nvme_path` that holds a step's NVMe-resident buffers
// (Buffer::nvme). It is created unlinked (a killed run leaves nothing
// behind) and its whole size is reserved up front, so a full or unwritable
// directory fails before training starts. The step reads and writes it
// with pread/pwrite (swap_in, swap_out); checkpoints and initialisation
// reach it through a shared mapping of the same file.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_SWAPFILE_H
#define DSC_RUNTIME_SWAPFILE_H

#include <cstdint>
#include <string>

namespace dsc::rt {

class SwapFile {
public:
  /// Reserves `bytes` in a new file in directory `dir`; throws an Error
  /// naming `dir` when it cannot.
  SwapFile(const std::string &dir, int64_t bytes);
  ~SwapFile();
  SwapFile(const SwapFile &) = delete;
  SwapFile &operator=(const SwapFile &) = delete;

  /// The mapping of the whole file.
  char *mapped() const { return base; }
  void read(int64_t offset, void *dst, int64_t bytes) const;
  void write(int64_t offset, const void *src, int64_t bytes) const;

private:
  std::string dir;
  int fd = -1;
  char *base = nullptr;
  int64_t size = 0;
};

} // namespace dsc::rt

#endif // DSC_RUNTIME_SWAPFILE_H
