//===- TestUtil.h - Helpers for runtime unit tests -------------*- C++ -*-===//
#ifndef DSC_UNITTESTS_RUNTIME_TESTUTIL_H
#define DSC_UNITTESTS_RUNTIME_TESTUTIL_H

#include "dsc/Runtime/Runtime.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace dsc::rt::test {

/// Builds a Program out of loose buffers and runs single instructions on the
/// CPU backend. Declare buffers, then alloc(), then fill and run.
class Harness {
public:
  Harness();
  ~Harness();
  int buf(std::vector<int64_t> shape, DType t = DType::F32,
          BufferRole role = BufferRole::Temp, std::string name = "");
  void alloc();
  float *f(int id) { return storage->f32(id); }
  int32_t *i(int id) { return storage->i32(id); }
  int64_t *l(int id) { return storage->i64(id); }
  void set(int id, const std::vector<float> &v);
  void seti(int id, const std::vector<int32_t> &v);
  std::vector<float> get(int id);
  std::vector<int32_t> geti(int id);
  int64_t numel(int id) const { return prog.buffers[size_t(id)].numElements(); }
  /// Runs one instruction; throws what the backend throws.
  void run(Opcode op, std::vector<int> ins, std::vector<int> outs,
           std::map<std::string, AttrValue> attrs = {});

  Program prog;
  std::unique_ptr<Storage> storage;
  RngContext rng;

private:
  std::unique_ptr<Communicator> comm;
  std::unique_ptr<Backend> backend;
};

/// Deterministic pseudo-random values in [lo, hi).
std::vector<float> uniform(size_t n, uint32_t seed, float lo = -1.0f,
                           float hi = 1.0f);

/// Central finite-difference gradient of loss() with respect to x (which
/// loss() reads), in double precision on the loss.
std::vector<double> numericGrad(float *x, int64_t n,
                                const std::function<double()> &loss,
                                float h = 1e-2f);

/// sum_i w[i] * y[i] in double.
double dot(const float *w, const float *y, int64_t n);

/// A loopback TCP port nobody listens on now.
int freePort();

/// Runs body(rank's communicator) on n ranks at once, threads of this
/// process joined by TCP communicators over the loopback; the failures of
/// every rank, "rank r: message", in rank order.
std::vector<std::string>
onTcpRanks(int n, const std::function<void(Communicator &)> &body,
           double timeoutSeconds = 20);
/// The lines of `v`, each ended by a newline.
std::string joined(const std::vector<std::string> &v);

/// The message of the rt::Error `f` throws, or "<no error>".
std::string errorOf(const std::function<void()> &f);

/// A fresh empty directory under the test temp dir.
std::string tempDir();

} // namespace dsc::rt::test

#endif
