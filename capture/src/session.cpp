#include "session.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <new>

namespace qd::capture {
namespace {

// A batch ends at a flush point; bounding it bounds what a crash can lose beyond the queue.
constexpr size_t kMaxBatchItems = 4096;
constexpr uint64_t kMaxBatchBytes = uint64_t{64} << 20;
constexpr uint64_t kMinQueueBudget = uint64_t{1} << 20;
// Waking a pipeline thread costs the runtime thread a syscall and, on a small core count, its
// CPU. Producers wake the prepare thread only once this much work is waiting; otherwise it
// looks again after kIdlePoll. A crash can therefore also lose up to kIdlePoll of stragglers.
constexpr uint64_t kWakeItems = 32;
constexpr uint64_t kWakeBytes = uint64_t{256} << 10;
constexpr auto kIdlePoll = std::chrono::milliseconds(2);
constexpr int kPipelineNice = 10;

int64_t now_unix_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The pipeline threads must never let an exception reach std::terminate in the host process,
// even when memory is so short that the message cannot be built: then the status has none.
Status status_of_current_exception() noexcept {
  try {
    try {
      throw;
    } catch (const std::bad_alloc&) {
      return error(ErrorCode::kNoMemory, "capture pipeline ran out of memory");
    } catch (const std::exception& e) {
      return error(ErrorCode::kInternal, std::string("capture pipeline failed: ") + e.what());
    } catch (...) {
      return error(ErrorCode::kInternal, "capture pipeline failed");
    }
  } catch (...) {
    return Status(ErrorCode::kNoMemory, std::string());
  }
}

// The pipeline must not compete with the runtime it observes: on a device whose cores are busy
// with inference, the runtime's threads should win. Linux nice values are per thread.
void lower_own_priority() {
#if defined(__linux__)
  setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), kPipelineNice);
#endif
}

// The heap a block of `bytes` takes as glibc's malloc rounds it (a header, 16-byte steps, at
// least 32 bytes).
uint64_t heap_block(uint64_t bytes) {
  return bytes == 0 ? 0 : std::max<uint64_t>(32, (bytes + 8 + 15) / 16 * 16);
}
// A std::string holds up to 15 characters inside itself.
uint64_t string_block(const std::string& text) {
  return text.size() < 16 ? 0 : heap_block(text.size() + 1);
}
uint64_t strings_block(const std::vector<std::string>& texts) {
  uint64_t bytes = heap_block(texts.size() * sizeof(std::string));
  for (const std::string& text : texts) bytes += string_block(text);
  return bytes;
}

uint64_t record_block(const TensorRecord& r) {
  // The handles are parsed from the name on the prepare thread: count one.
  return string_block(r.name) + heap_block(r.dims.size() * sizeof(uint64_t)) +
         heap_block(r.axis_order.size()) +
         heap_block(std::max<size_t>(r.handles.size(), 1) * sizeof(int64_t)) +
         heap_block(r.quant.scales.size() * sizeof(double)) +
         heap_block(r.quant.offsets.size() * sizeof(int32_t));
}

}  // namespace

// About 450 bytes for a small tensor (the queue's node, one item per deque block, and the
// record's name, shape, handles and encoding), more than the data of 64 floats. Left out of the
// budget, a decode loop of tiny tensors whose writer fell behind held 1.6 GiB with the default
// 64 MiB budget (docs/performance.md, "Many runs").
uint64_t Session::bookkeeping_bytes(const Payload& payload) {
  uint64_t bytes = heap_block(sizeof(Item));
  if (const auto* tensor = std::get_if<TensorItem>(&payload)) {
    bytes += record_block(tensor->record);
  } else if (const auto* begin = std::get_if<BeginRunItem>(&payload)) {
    bytes += string_block(begin->name);
  } else if (const auto* profile = std::get_if<ProfileItem>(&payload)) {
    const ProfileEvent& event = profile->event;
    bytes += string_block(event.name) + string_block(event.unit) +
             heap_block(event.handles.size() * sizeof(int64_t));
  } else if (const auto* memory = std::get_if<MemoryCheckpoint>(&payload)) {
    bytes += string_block(memory->label);
  } else if (const auto* node = std::get_if<GraphNode>(&payload)) {
    bytes += string_block(node->name) + string_block(node->op_type) + strings_block(node->inputs) +
             strings_block(node->outputs) + heap_block(node->handles.size() * sizeof(int64_t));
  } else if (const auto* guess = std::get_if<ShapeGuessItem>(&payload)) {
    bytes += string_block(guess->tensor_name);
  }
  return bytes;
}

Result<std::unique_ptr<Session>> Session::open(const SessionConfig& config) {
  if (config.path.empty()) return error(ErrorCode::kInvalidArgument, "session path is empty");
  if (config.queue_budget_bytes < kMinQueueBudget) {
    return error(ErrorCode::kInvalidArgument, "queue budget of " +
                                                  std::to_string(config.queue_budget_bytes) +
                                                  " bytes is below the minimum of 1 MiB");
  }
  QD_ASSIGN_OR_RETURN(NameParser parser, NameParser::create(config.naming, config.custom_pattern,
                                                            config.handle_map_path));
  // The queue first: failing for memory must not have truncated an existing file already.
  std::unique_ptr<Session> session(new (std::nothrow) Session(config, std::move(parser)));
  if (!session || !session->ring_.valid()) {
    return error(ErrorCode::kNoMemory, "cannot allocate a capture queue of " +
                                           std::to_string(config.queue_budget_bytes) + " bytes");
  }
  try {
    session->prepare_work_.reserve(kMaxBatchItems);
    session->write_batch_.reserve(kMaxBatchItems);
  } catch (const std::bad_alloc&) {
    return error(ErrorCode::kNoMemory, "cannot allocate the capture pipeline's batches");
  }
  QD_ASSIGN_OR_RETURN(session->writer_,
                      StoreWriter::create(config.path, config.metadata, config.writer));
  session->preparer_ = std::thread(&Session::prepare_loop, session.get());
  session->writer_thread_ = std::thread(&Session::writer_loop, session.get());
  return session;
}

Session::Session(const SessionConfig& config, NameParser parser)
    : config_(config), parser_(std::move(parser)), ring_(config.queue_budget_bytes) {}

// A destructor's exception would terminate the host; close() stops the threads before it can
// throw, so swallowing is safe.
Session::~Session() {
  try {
    (void)close();
  } catch (...) {
  }
}

// ---- producer side (runtime threads) ----

Status Session::usable_locked() const {
  if (stopping_) return error(ErrorCode::kState, config_.path + ": session is closing");
  return writer_status_;
}

void Session::note_run_used_locked() {
  if (!run_open_) {  // the writer begins "run<N>" by itself; mirror that here
    run_open_ = true;
    run_implicit_ = true;
    run_dropped_ = 0;
  }
}

void Session::wake_workers_locked() {
  if (writer_sleeping_ || preparer_sleeping_) work_ready_.notify_all();
}

void Session::nudge_preparer_locked() {
  const bool enough = enqueued_ - next_prepare_ >= kWakeItems || unprepared_bytes_ >= kWakeBytes;
  if (preparer_sleeping_ && enough) work_ready_.notify_all();
}

// Queues an item whose content is complete (events, run markers). It still passes the prepare
// thread, which marks items strictly in order: the writer never overtakes it. Its bookkeeping
// counts against the budget that tensors wait for, but the item itself never waits.
void Session::push_locked(Item item) {
  item.committed = true;
  item.bookkeeping = bookkeeping_bytes(item.payload);
  const uint64_t bookkeeping = item.bookkeeping;
  queue_.push_back(std::move(item));
  bookkeeping_bytes_ += bookkeeping;
  ++enqueued_;
  nudge_preparer_locked();
}

// The run state changes only once its marker is queued: a push that fails for memory leaves the
// state matching the queue, and the session usable.
Status Session::enqueue(Payload payload) {
  std::lock_guard lock(mutex_);
  QD_RETURN_IF_ERROR(usable_locked());
  const bool begins = std::holds_alternative<BeginRunItem>(payload);
  const bool ends = std::holds_alternative<EndRunItem>(payload);
  if (begins && run_open_ && !run_implicit_) {
    return error(ErrorCode::kState, "begin_run while a run is open");
  }
  if (ends && !run_open_) return error(ErrorCode::kState, "end_run with no run open");
  if (begins && run_open_) {  // ends the implicit run
    push_locked({EndRunItem{run_dropped_}, now_unix_ns()});
    run_open_ = false;
  }
  if (ends) std::get<EndRunItem>(payload).dropped = run_dropped_;
  push_locked({std::move(payload), now_unix_ns()});
  if (begins || ends) {
    run_open_ = begins;
    run_implicit_ = false;
    run_dropped_ = 0;
  }
  return Status::ok();
}

Status Session::begin_run(std::string name) { return enqueue(BeginRunItem{std::move(name)}); }
Status Session::end_run() { return enqueue(EndRunItem{0}); }

Status Session::record_profile_event(ProfileEvent event, bool parse_handles) {
  return enqueue(ProfileItem{std::move(event), parse_handles});
}

Status Session::record_memory_checkpoint(MemoryCheckpoint checkpoint) {
  checkpoint.time_unix_ns = now_unix_ns();
  return enqueue(std::move(checkpoint));
}

Status Session::add_graph_node(GraphNode node) { return enqueue(std::move(node)); }
Status Session::record_shape_guess(std::string tensor_name) {
  return enqueue(ShapeGuessItem{std::move(tensor_name)});
}

Status Session::reserve_tensor(TensorRecord record, uint64_t nbytes, Stated stated, Item** item,
                               uint8_t** dest) {
  std::lock_guard turn(reserve_mutex_);
  std::unique_lock lock(mutex_);
  QD_RETURN_IF_ERROR(usable_locked());
  Item queued{TensorItem{std::move(record), {}, nullptr, nbytes, {}, stated}};
  TensorItem& tensor = std::get<TensorItem>(queued.payload);
  queued.bookkeeping = bookkeeping_bytes(queued.payload);
  const bool oversize = nbytes > ring_.capacity();
  std::optional<RingSpan> span;
  auto ready = [&] {
    if (!usable_locked().is_ok()) return true;
    if (oversize) return queue_.empty();  // one heap buffer, only once the queue has drained
    // The ring's bytes and every queued item's bookkeeping within the budget; an empty queue
    // takes any tensor that fits the ring, so a tensor of the whole budget still goes through.
    const uint64_t held = ring_.used() + bookkeeping_bytes_ + queued.bookkeeping + nbytes;
    if (!queue_.empty() && held > ring_.capacity()) return false;
    return (span = ring_.reserve(nbytes)).has_value();
  };
  if (config_.policy == FullQueuePolicy::kBlock) {
    space_freed_.wait(lock, ready);
    QD_RETURN_IF_ERROR(usable_locked());
  } else if (oversize || !ready()) {
    ++stats_.dropped;
    if (run_open_) ++run_dropped_;  // drops outside any run count for the session only
    return error(ErrorCode::kQueueFull,
                 "queue full: tensor " + quote_name(tensor.record.name) + " dropped (drop policy)");
  }
  if (oversize) {
    tensor.oversize.reset(new (std::nothrow) uint8_t[nbytes]);
    if (!tensor.oversize) {
      return error(ErrorCode::kNoMemory, "cannot allocate " + std::to_string(nbytes) +
                                             " bytes for tensor " + quote_name(tensor.record.name));
    }
    *dest = tensor.oversize.get();
  } else {
    tensor.span = *span;
    *dest = ring_.at(span->offset);
  }
  queued.unix_ns = now_unix_ns();
  try {
    queue_.push_back(std::move(queued));
  } catch (...) {
    if (span) ring_.cancel_newest(*span);  // leave the ring and the run state as they were
    throw;
  }
  bookkeeping_bytes_ += queue_.back().bookkeeping;
  note_run_used_locked();
  unprepared_bytes_ += nbytes;
  *item = &queue_.back();  // deque references survive push_back and pop_front of others
  ++enqueued_;
  ++stats_.captured;
  stats_.queue_peak_bytes = std::max(stats_.queue_peak_bytes, ring_.used());
  return Status::ok();
}

void Session::commit_item(Item* item) {
  std::lock_guard lock(mutex_);
  item->committed = true;
  nudge_preparer_locked();
}

Status Session::capture(TensorRecord record, const uint8_t* data, uint64_t nbytes, Stated stated) {
  Item* item = nullptr;
  uint8_t* dest = nullptr;
  QD_RETURN_IF_ERROR(reserve_tensor(std::move(record), nbytes, stated, &item, &dest));
  if (nbytes > 0) std::memcpy(dest, data, nbytes);  // outside the locks: producers copy in parallel
  commit_item(item);
  return Status::ok();
}

Status Session::flush() {
  std::unique_lock lock(mutex_);
  const uint64_t target = enqueued_;
  wake_workers_locked();
  space_freed_.wait(lock, [&] { return completed_ >= target || writer_done_; });
  return writer_status_;
}

SessionStats Session::stats() const {
  std::lock_guard lock(mutex_);
  SessionStats copy = stats_;
  copy.writer_status = writer_status_;
  return copy;
}

Status Session::close() {
  bool run_ended = true;
  {
    // Waits for a producer blocked on a full queue to get its space (the writer keeps draining).
    std::lock_guard turn(reserve_mutex_);
    std::lock_guard lock(mutex_);
    if (closed_) return close_status_;
    closed_ = true;
    // Before anything that can throw: threads left running when the exception unwinds through
    // ~Session would be joinable std::threads, and destroying those terminates the host.
    stopping_ = true;
    work_ready_.notify_all();
    run_ended = end_open_run_locked();
  }
  if (preparer_.joinable()) preparer_.join();
  if (writer_thread_.joinable()) writer_thread_.join();
  const Status closed = writer_ ? writer_->close() : Status::ok();
  std::lock_guard lock(mutex_);
  if (!writer_status_.is_ok()) {
    close_status_ = writer_status_;
  } else if (!run_ended) {
    close_status_ = error(ErrorCode::kNoMemory, config_.path +
                                                    ": out of memory for the open run's end "
                                                    "marker; the run reads back as incomplete");
  } else {
    close_status_ = closed;
  }
  return close_status_;
}

// Queues the end of the open run, if any. Out of memory leaves the run incomplete, as a crash
// would, but must not stop the close.
bool Session::end_open_run_locked() noexcept {
  const bool open = run_open_ && writer_status_.is_ok();
  run_open_ = false;
  if (!open) return true;
  try {
    push_locked({EndRunItem{run_dropped_}, now_unix_ns()});
    return true;
  } catch (...) {
    return false;
  }
}

void Session::record_failure(const Status& status) noexcept {
  std::lock_guard lock(mutex_);
  record_failure_locked(status);
}

void Session::record_failure_locked(const Status& status) noexcept {
  if (status.is_ok() || !writer_status_.is_ok()) return;
  try {
    writer_status_ = status;
  } catch (...) {  // no memory to copy the message: the code alone
    writer_status_ = Status(status.code(), std::string());
  }
}

// ---- prepare thread: CPU work on the bytes, in order, ahead of the writer ----

// Fills `work`, whose capacity open() reserved: push_back never allocates here.
void Session::take_unprepared_locked(std::vector<Item*>* work) {
  work->clear();
  for (uint64_t seq = next_prepare_; seq < enqueued_ && work->size() < kMaxBatchItems; ++seq) {
    Item& item = queue_[seq - completed_];
    if (!item.committed) break;  // keep the order: a later item waits for this copy
    work->push_back(&item);
  }
}

void Session::prepare_loop() {
  lower_own_priority();
  std::vector<Item*>& work = prepare_work_;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      preparer_sleeping_ = true;
      while (true) {
        const bool pending = next_prepare_ < enqueued_;
        if ((pending && queue_[next_prepare_ - completed_].committed) || (stopping_ && !pending)) {
          break;
        }
        work_ready_.wait_for(lock, kIdlePoll);  // producers wake us only for bulk work
      }
      preparer_sleeping_ = false;
      if (next_prepare_ == enqueued_) return;  // stopping, and nothing is left to prepare
      take_unprepared_locked(&work);
    }
    for (Item* item : work) {
      try {
        prepare_item(*item);
      } catch (...) {
        record_failure(status_of_current_exception());
      }
    }
    std::lock_guard lock(mutex_);
    for (Item* item : work) {
      item->prepared = true;
      if (const auto* tensor = std::get_if<TensorItem>(&item->payload)) {
        unprepared_bytes_ -= tensor->nbytes;
      }
    }
    next_prepare_ += work.size();
    wake_workers_locked();
  }
}

void Session::prepare_item(Item& item) {
  auto* tensor = std::get_if<TensorItem>(&item.payload);
  if (tensor == nullptr) return;
  TensorRecord& record = tensor->record;
  const ParsedName parsed = parser_.parse(record.name);
  if (!tensor->stated.handles) record.handles = parsed.handles;
  if (record.output_index < 0) record.output_index = parsed.output_index;
  if (!tensor->stated.role) record.role = parsed.role;
  record.name_matched = parsed.matched || tensor->stated.handles;
  tensor->digest = digest_tensor(record, {item_bytes(*tensor), tensor->nbytes});
}

// ---- writer thread: HDF5, in order ----

// Fills `batch`, whose capacity open() reserved: push_back never allocates here.
void Session::take_batch_locked(std::vector<Item*>* batch) {
  batch->clear();
  uint64_t bytes = 0;
  for (Item& item : queue_) {
    if (!item.prepared || batch->size() == kMaxBatchItems || bytes >= kMaxBatchBytes) break;
    if (const auto* tensor = std::get_if<TensorItem>(&item.payload)) bytes += tensor->nbytes;
    batch->push_back(&item);
  }
}

void Session::writer_loop() {
  lower_own_priority();
  std::vector<Item*>& batch = write_batch_;
  for (;;) {
    bool healthy = true;
    {
      std::unique_lock lock(mutex_);
      writer_sleeping_ = true;
      work_ready_.wait(lock, [&] {
        return (!queue_.empty() && queue_.front().prepared) || (stopping_ && queue_.empty());
      });
      writer_sleeping_ = false;
      if (queue_.empty()) {  // stopping, and everything is written
        writer_done_ = true;
        space_freed_.notify_all();
        return;
      }
      // Element pointers stay valid while producers push_back; only this thread pops.
      take_batch_locked(&batch);
      healthy = writer_status_.is_ok();
    }
    Status committed;  // after an earlier failure the batch is only counted as lost
    try {
      for (size_t i = 0; i < batch.size() && healthy; ++i) write_item(*batch[i]);
      if (healthy) committed = writer_->commit();
    } catch (...) {
      committed = status_of_current_exception();
    }
    finish_batch(batch.size(), committed);
  }
}

const uint8_t* Session::item_bytes(const TensorItem& tensor) {
  return tensor.oversize ? tensor.oversize.get() : ring_.at(tensor.span.offset);
}

void Session::write_item(Item& item) {
  Status status;
  if (auto* tensor = std::get_if<TensorItem>(&item.payload)) {
    status = writer_->append_tensor(tensor->record, {item_bytes(*tensor), tensor->nbytes},
                                    item.unix_ns, &tensor->digest);
  } else if (auto* begin = std::get_if<BeginRunItem>(&item.payload)) {
    status = writer_->begin_run(begin->name, item.unix_ns).status();
  } else if (auto* end = std::get_if<EndRunItem>(&item.payload)) {
    status = writer_->end_run(item.unix_ns, end->dropped);
  } else if (auto* profile = std::get_if<ProfileItem>(&item.payload)) {
    if (profile->parse_handles) profile->event.handles = parser_.parse(profile->event.name).handles;
    status = writer_->append_profile_event(profile->event);
  } else if (auto* memory = std::get_if<MemoryCheckpoint>(&item.payload)) {
    status = writer_->append_memory_checkpoint(*memory);
  } else if (auto* node = std::get_if<GraphNode>(&item.payload)) {
    status = writer_->append_graph_node(*node);
  } else if (auto* guess = std::get_if<ShapeGuessItem>(&item.payload)) {
    status = writer_->append_shape_guess(guess->tensor_name);
  }
  if (!status.is_ok()) record_failure(status);
}

void Session::finish_batch(size_t count, const Status& committed) noexcept {
  std::lock_guard lock(mutex_);
  record_failure_locked(committed);
  for (size_t i = 0; i < count; ++i) {
    Item& item = queue_.front();
    if (auto* tensor = std::get_if<TensorItem>(&item.payload)) {
      if (writer_status_.is_ok()) {
        ++stats_.written;
        stats_.bytes_written += tensor->nbytes;
      } else {
        ++stats_.lost;
      }
      if (!tensor->oversize) ring_.release(tensor->span);
    }
    bookkeeping_bytes_ -= item.bookkeeping;
    queue_.pop_front();
  }
  completed_ += count;
  space_freed_.notify_all();
}

}  // namespace qd::capture
