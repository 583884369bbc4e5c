#include "TestUtil.h"

#include "dsc/Runtime/TcpCommunicator.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>

namespace dsc::rt::test {

Harness::Harness()
    : comm(createSingleRankCommunicator()), backend(createCpuBackend(*comm)) {
  rng.seed = 1234;
  rng.offset = 7;
}
Harness::~Harness() = default;

int Harness::buf(std::vector<int64_t> shape, DType t, BufferRole role,
                 std::string name) {
  if (storage)
    throw std::logic_error("buf() after alloc()");
  Buffer b;
  b.name = name.empty() ? "b" + std::to_string(prog.buffers.size()) : name;
  b.role = role;
  b.dtype = t;
  b.shape = std::move(shape);
  prog.buffers.push_back(b);
  return int(prog.buffers.size() - 1);
}

void Harness::alloc() { storage = std::make_unique<Storage>(prog); }

void Harness::set(int id, const std::vector<float> &v) {
  if (int64_t(v.size()) != numel(id))
    throw std::logic_error("set: size mismatch");
  std::memcpy(f(id), v.data(), v.size() * 4);
}
void Harness::seti(int id, const std::vector<int32_t> &v) {
  if (int64_t(v.size()) != numel(id))
    throw std::logic_error("seti: size mismatch");
  std::memcpy(i(id), v.data(), v.size() * 4);
}
std::vector<float> Harness::get(int id) {
  return std::vector<float>(f(id), f(id) + numel(id));
}
std::vector<int32_t> Harness::geti(int id) {
  return std::vector<int32_t>(i(id), i(id) + numel(id));
}

void Harness::run(Opcode op, std::vector<int> ins, std::vector<int> outs,
                  std::map<std::string, AttrValue> attrs) {
  if (!storage)
    alloc();
  Function fn;
  fn.name = "test";
  Instr in;
  in.op = op;
  in.inputs = std::move(ins);
  in.outputs = std::move(outs);
  in.attrs = std::move(attrs);
  fn.body.push_back(in);
  backend->run(prog, fn, *storage, rng);
}

std::vector<float> uniform(size_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float &x : v)
    x = d(gen);
  return v;
}

std::vector<double> numericGrad(float *x, int64_t n,
                                const std::function<double()> &loss, float h) {
  std::vector<double> g(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) {
    const float orig = x[k];
    x[k] = orig + h;
    double lp = loss();
    x[k] = orig - h;
    double lm = loss();
    x[k] = orig;
    g[size_t(k)] = (lp - lm) / (2.0 * double(h));
  }
  return g;
}

double dot(const float *w, const float *y, int64_t n) {
  double s = 0.0;
  for (int64_t k = 0; k < n; ++k)
    s += double(w[k]) * double(y[k]);
  return s;
}

std::string tempDir() {
  std::string base = ::testing::TempDir();
  if (base.empty() || base.back() != '/')
    base += '/';
  std::string tmpl = base + "dsc_rt_XXXXXX";
  std::vector<char> name(tmpl.begin(), tmpl.end());
  name.push_back('\0');
  if (!::mkdtemp(name.data()))
    throw std::runtime_error("mkdtemp failed");
  return std::string(name.data());
}

std::string errorOf(const std::function<void()> &f) {
  try {
    f();
  } catch (const Error &e) {
    return e.what();
  }
  return "<no error>";
}

int freePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

std::vector<std::string>
onTcpRanks(int n, const std::function<void(Communicator &)> &body,
           double timeoutSeconds) {
  const int port = freePort();
  std::vector<std::string> failures(static_cast<size_t>(n));
  std::vector<std::thread> ranks;
  for (int r = 0; r < n; ++r)
    ranks.emplace_back([&, r] {
      try {
        TcpJob job;
        job.masterAddr = "127.0.0.1";
        job.masterPort = port;
        job.rank = r;
        job.worldSize = n;
        job.timeoutSeconds = timeoutSeconds;
        auto comm = createTcpCommunicator(job);
        body(*comm);
      } catch (const std::exception &e) {
        failures[size_t(r)] = "rank " + std::to_string(r) + ": " + e.what();
      }
    });
  for (std::thread &t : ranks)
    t.join();
  std::vector<std::string> all;
  for (const std::string &f : failures)
    if (!f.empty())
      all.push_back(f);
  return all;
}

std::string joined(const std::vector<std::string> &v) {
  std::string s;
  for (const std::string &x : v)
    s += x + "\n";
  return s;
}

} // namespace dsc::rt::test
