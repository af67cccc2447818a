// Child process for the crash test: captures an endless stream of tensors whose values follow
// from their index, and after each flush point prints "durable N" (N tensors are durable).
// The parent SIGKILLs it at chosen moments. Usage: qd_crash_child OUT.h5 FLUSH_EVERY [EXIT_AFTER]
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "qnn_debug/capture.h"

namespace {

// Tensor i: (i % 5) * 20000 + 100 float32 values, value j = i + j * 0.5.
std::vector<float> values_of(int i) {
  std::vector<float> values(static_cast<size_t>(i % 5) * 20000 + 100);
  for (size_t j = 0; j < values.size(); ++j) values[j] = float(i) + float(j) * 0.5f;
  return values;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) return 2;
  const int flush_every = std::atoi(argv[2]);
  // With EXIT_AFTER: capture that many tensors, then return from main with the session open,
  // as a host that never calls qd_session_close does.
  const int exit_after = argc == 4 ? std::atoi(argv[3]) : -1;
  qd_session_options options;
  qd_session_options_init(&options);
  options.path = argv[1];
  qd_session* session = nullptr;
  std::printf("opening\n");  // the parent may aim a kill at qd_session_open itself
  std::fflush(stdout);
  if (qd_session_open(&options, &session) != QD_OK) return 3;
  if (qd_begin_run(session, "killed") != QD_OK) return 4;
  std::printf("opened\n");
  std::fflush(stdout);
  for (int i = 0; i < 1'000'000; ++i) {
    if (i == exit_after) return 0;
    const std::vector<float> values = values_of(i);
    const uint64_t dims[1] = {values.size()};
    const std::string name = "t__debugID_" + std::to_string(i);
    qd_tensor t;
    qd_tensor_init(&t);
    t.name = name.c_str();
    t.dtype = 562;
    t.rank = 1;
    t.dims = dims;
    t.data = values.data();
    t.nbytes = values.size() * sizeof(float);
    if (qd_capture_tensor(session, &t) != QD_OK) {
      std::fprintf(stderr, "capture failed: %s\n", qd_last_error());
      return 5;
    }
    if (flush_every > 0 && (i + 1) % flush_every == 0) {
      if (qd_flush(session) != QD_OK) return 6;
      std::printf("durable %d\n", i + 1);
      std::fflush(stdout);
    }
  }
  qd_session_close(session);
  return 0;
}
