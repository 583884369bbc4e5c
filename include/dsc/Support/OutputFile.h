//===- OutputFile.h - Files dsc writes for the user ------------*- C++ -*-===//
//
// Every file a tool writes for the user (weights, checkpoints, memory
// reports, compiled steps, emitted kernels) is written atomically: a
// temporary file beside it, fsync, rename. A failure leaves the old file as
// it was. The tools check every output path before they start work, so a
// run never computes for an hour and then finds it cannot save.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_SUPPORT_OUTPUTFILE_H
#define DSC_SUPPORT_OUTPUTFILE_H

#include <string>

namespace dsc {

/// Checks that writeFileAtomic(path) can work, before any work is done: the
/// directory exists and is writable, and `path`, if it exists, is a regular
/// file or a symbolic link (a rename over a device such as /dev/null, a
/// FIFO or a directory would replace it). Removes the temporaries of earlier
/// writes to `path` whose process has died. Throws "<option>: <why>".
void checkOutputFile(const std::string &path, const std::string &option);

/// The same for a file written in place as a stream (a log): a FIFO or a
/// character device (/dev/stdout) is accepted; a directory, a missing or
/// unwritable directory is not.
void checkStreamOutput(const std::string &path, const std::string &option);

/// Writes `bytes` to `path` atomically (temporary `path.tmp.<pid>.XXXXXX`
/// in the same directory, fsync, rename). A symbolic link at `path` is
/// replaced by the new file; what it named is left as it was. Refuses a
/// `path` that is neither a regular file nor a link. Throws "cannot write
/// <path>: <why>", having removed the temporary.
void writeFileAtomic(const std::string &path, const std::string &bytes);

/// Whether `a` and `b` both exist and are one file (device and inode:
/// hard links and symbolic links alike).
bool sameFile(const std::string &a, const std::string &b);

/// Before a stream output (a log) is opened: a symbolic link at `path` to
/// a regular file, a directory or nothing is replaced by an empty file
/// (never written through); with `append` it is refused instead. Links to
/// FIFOs and devices (/dev/stdout) are kept.
void replaceLinkToFile(const std::string &path, bool append,
                       const std::string &option);

} // namespace dsc

#endif // DSC_SUPPORT_OUTPUTFILE_H
