// The capture session behind the C ABI: a bounded queue of copied tensors and events, drained
// in order by a two-stage pipeline. The prepare thread parses names and computes each tensor's
// stats and checksum; the writer thread owns the StoreWriter (HDF5 is never called from the
// runtime's threads). With the CPU work off the writer, disk writes and digests overlap.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "byte_ring.h"
#include "qnn_debug/base/status.h"
#include "qnn_debug/etdump/store.h"
#include "qnn_debug/etdump/store_writer.h"
#include "qnn_debug/naming/naming.h"

namespace qd::capture {

using naming::NameParser;
using naming::ParsedName;

enum class FullQueuePolicy { kBlock, kDrop };

struct SessionConfig {
  std::string path;
  std::string naming = "debug-id";
  std::string custom_pattern;
  std::string handle_map_path;
  uint64_t queue_budget_bytes = uint64_t{64} << 20;
  FullQueuePolicy policy = FullQueuePolicy::kBlock;
  StoreMetadata metadata;
  WriterOptions writer;
};

struct SessionStats {
  uint64_t captured = 0;
  uint64_t dropped = 0;
  uint64_t written = 0;
  uint64_t bytes_written = 0;
  uint64_t queue_peak_bytes = 0;
  uint64_t lost = 0;
  Status writer_status;
};

// What the producer states about a tensor itself, instead of leaving it to the naming preset.
struct StatedFacts {
  bool handles = false;  // record.handles are the tensor's handles as they are
  bool role = false;     // record.role is the tensor's role
};

class Session {
 public:
  static Result<std::unique_ptr<Session>> open(const SessionConfig& config);
  ~Session();  // close()s
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  Status begin_run(std::string name);
  Status end_run();
  using Stated = StatedFacts;
  // `record.output_index` < 0 asks the naming preset; so do the handles and the role unless
  // `stated`. The bytes are copied before returning.
  Status capture(TensorRecord record, const uint8_t* data, uint64_t nbytes, Stated stated = {});
  Status record_profile_event(ProfileEvent event, bool parse_handles);
  Status record_memory_checkpoint(MemoryCheckpoint checkpoint);
  Status add_graph_node(GraphNode node);
  Status record_shape_guess(std::string tensor_name);
  Status flush();
  SessionStats stats() const;
  Status close();

 private:
  struct TensorItem {
    TensorRecord record;
    RingSpan span;
    std::unique_ptr<uint8_t[]> oversize;  // tensors larger than the whole ring
    uint64_t nbytes = 0;
    TensorDigest digest;  // filled by the prepare thread
    Stated stated;
  };
  struct BeginRunItem {
    std::string name;
  };
  struct EndRunItem {
    uint64_t dropped;
  };
  struct ProfileItem {
    ProfileEvent event;
    bool parse_handles;
  };
  struct ShapeGuessItem {
    std::string tensor_name;
  };
  using Payload = std::variant<TensorItem, BeginRunItem, EndRunItem, ProfileItem, MemoryCheckpoint,
                               GraphNode, ShapeGuessItem>;
  struct Item {
    Payload payload;
    int64_t unix_ns = 0;
    bool committed = false;    // the producer finished copying its bytes
    bool prepared = false;     // names parsed, digest computed: ready for the writer
    uint64_t bookkeeping = 0;  // its heap beyond the ring's bytes, charged against the budget
  };
  // What a queued item holds on the heap beyond its tensor bytes (session.cpp).
  static uint64_t bookkeeping_bytes(const Payload& payload);

  Session(const SessionConfig& config, NameParser parser);

  // Producer side.
  Status usable_locked() const;
  Status enqueue(Payload payload);
  void push_locked(Item item);
  Status reserve_tensor(TensorRecord record, uint64_t nbytes, Stated stated, Item** item,
                        uint8_t** dest);
  void commit_item(Item* item);
  void note_run_used_locked();
  void wake_workers_locked();
  void nudge_preparer_locked();
  bool end_open_run_locked() noexcept;

  // Prepare thread.
  void prepare_loop();
  void take_unprepared_locked(std::vector<Item*>* work);
  void prepare_item(Item& item);

  // Writer thread.
  void writer_loop();
  void take_batch_locked(std::vector<Item*>* batch);
  void write_item(Item& item);
  void finish_batch(size_t count, const Status& committed) noexcept;
  void record_failure(const Status& status) noexcept;
  void record_failure_locked(const Status& status) noexcept;
  const uint8_t* item_bytes(const TensorItem& tensor);

  SessionConfig config_;
  NameParser parser_;
  std::unique_ptr<StoreWriter> writer_;

  std::mutex reserve_mutex_;  // serializes reservations so a waiting producer keeps its turn
  mutable std::mutex mutex_;  // guards everything below
  std::condition_variable work_ready_;  // both pipeline threads wait here
  std::condition_variable space_freed_;
  ByteRing ring_;
  // Item i of the queue has sequence number completed_ + i; only the writer pops.
  std::deque<Item> queue_;
  bool writer_sleeping_ = false;
  bool preparer_sleeping_ = false;
  bool stopping_ = false;
  bool writer_done_ = false;
  bool closed_ = false;
  bool run_open_ = false;
  bool run_implicit_ = false;  // opened by a capture outside begin_run, not by the caller
  uint64_t run_dropped_ = 0;
  uint64_t enqueued_ = 0;      // items ever queued
  uint64_t next_prepare_ = 0;  // sequence number of the next item to prepare
  uint64_t unprepared_bytes_ = 0;
  // The queued items' bookkeeping: with the ring's bytes it stays within the budget (a tensor
  // waits or is dropped otherwise), so tiny tensors cannot hold many times the budget.
  uint64_t bookkeeping_bytes_ = 0;
  uint64_t completed_ = 0;  // items ever taken off the queue
  SessionStats stats_;
  Status writer_status_;  // first failure; then items are discarded and counted as lost
  // Each pipeline thread's list of items in hand, allocated once by open(): the threads' loops
  // allocate nothing outside a try, so running out of memory there is a status, never a
  // std::terminate in the host.
  std::vector<Item*> prepare_work_;
  std::vector<Item*> write_batch_;
  Status close_status_;
  std::thread preparer_;
  std::thread writer_thread_;
};

}  // namespace qd::capture
