#include "session.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <new>

namespace qd::capture {
namespace {

// A batch ends a flush point; bounding it bounds what a crash can lose beyond the queue.
constexpr size_t kMaxBatchItems = 4096;
constexpr uint64_t kMaxBatchBytes = uint64_t{64} << 20;
constexpr uint64_t kMinQueueBudget = uint64_t{1} << 20;

int64_t now_unix_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Result<std::unique_ptr<Session>> Session::open(const SessionConfig& config) {
  if (config.path.empty()) return error(ErrorCode::kInvalidArgument, "session path is empty");
  if (config.queue_budget_bytes < kMinQueueBudget) {
    return error(ErrorCode::kInvalidArgument,
                 "queue budget of " + std::to_string(config.queue_budget_bytes) +
                     " bytes is below the minimum of 1 MiB");
  }
  QD_ASSIGN_OR_RETURN(NameParser parser, NameParser::create(config.naming, config.custom_pattern,
                                                            config.handle_map_path));
  QD_ASSIGN_OR_RETURN(std::unique_ptr<StoreWriter> writer,
                      StoreWriter::create(config.path, config.metadata, config.writer));
  std::unique_ptr<Session> session(new (std::nothrow)
                                       Session(config, std::move(parser), std::move(writer)));
  if (!session || !session->ring_.valid()) {
    return error(ErrorCode::kNoMemory, "cannot allocate a capture queue of " +
                                           std::to_string(config.queue_budget_bytes) + " bytes");
  }
  session->thread_ = std::thread(&Session::writer_loop, session.get());
  return session;
}

Session::Session(const SessionConfig& config, NameParser parser,
                 std::unique_ptr<StoreWriter> writer)
    : config_(config),
      parser_(std::move(parser)),
      writer_(std::move(writer)),
      ring_(config.queue_budget_bytes) {}

Session::~Session() { (void)close(); }

Status Session::usable_locked() const {
  if (stopping_) return error(ErrorCode::kState, config_.path + ": session is closed");
  if (!writer_status_.is_ok()) return writer_status_;
  return Status::ok();
}

void Session::note_run_used_locked() {
  if (!run_open_) {  // the writer begins "run<N>" by itself; mirror that here
    run_open_ = true;
    run_implicit_ = true;
    run_dropped_ = 0;
  }
}

Status Session::enqueue(Payload payload) {
  std::lock_guard lock(mutex_);
  QD_RETURN_IF_ERROR(usable_locked());
  if (std::holds_alternative<BeginRunItem>(payload)) {
    if (run_open_ && !run_implicit_) {
      return error(ErrorCode::kState, "begin_run while a run is open");
    }
    if (run_open_) {  // an implicit run (tensors captured outside begin/end) ends here
      queue_.push_back(Item{EndRunItem{run_dropped_}, now_unix_ns(), true});
      ++enqueued_;
    }
    run_open_ = true;
    run_implicit_ = false;
    run_dropped_ = 0;
  } else if (std::holds_alternative<EndRunItem>(payload)) {
    if (!run_open_) return error(ErrorCode::kState, "end_run with no run open");
    std::get<EndRunItem>(payload).dropped = run_dropped_;
    run_open_ = false;
  }
  queue_.push_back(Item{std::move(payload), now_unix_ns(), true});
  ++enqueued_;
  if (writer_sleeping_) work_ready_.notify_one();
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

Status Session::reserve_tensor(TensorRecord record, uint64_t nbytes, Item** item,
                               uint8_t** dest) {
  std::lock_guard turn(reserve_mutex_);
  std::unique_lock lock(mutex_);
  QD_RETURN_IF_ERROR(usable_locked());
  TensorItem tensor{std::move(record), {}, nullptr, nbytes};
  const bool oversize = nbytes > ring_.capacity();
  const bool block = config_.policy == FullQueuePolicy::kBlock;
  std::optional<RingSpan> span;
  auto ready = [&] {
    if (!usable_locked().is_ok()) return true;
    if (oversize) return queue_.empty();  // one heap buffer, only once the queue has drained
    return (span = ring_.reserve(nbytes)).has_value();
  };
  if (block) {
    space_freed_.wait(lock, ready);
    QD_RETURN_IF_ERROR(usable_locked());
  } else if (oversize || !ready()) {
    ++stats_.dropped;
    if (run_open_) ++run_dropped_;  // drops outside any run count for the session only
    return error(ErrorCode::kQueueFull, "queue full: tensor " + quote_name(tensor.record.name) +
                                            " dropped (drop policy)");
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
  note_run_used_locked();
  queue_.push_back(Item{std::move(tensor), now_unix_ns(), false});
  *item = &queue_.back();  // deque references survive push_back and pop_front of others
  ++enqueued_;
  ++stats_.captured;
  stats_.queue_peak_bytes = std::max(stats_.queue_peak_bytes, ring_.used());
  return Status::ok();
}

void Session::commit_item(Item* item) {
  std::lock_guard lock(mutex_);
  item->committed = true;
  if (writer_sleeping_) work_ready_.notify_one();
}

Status Session::capture(TensorRecord record, const uint8_t* data, uint64_t nbytes) {
  Item* item = nullptr;
  uint8_t* dest = nullptr;
  QD_RETURN_IF_ERROR(reserve_tensor(std::move(record), nbytes, &item, &dest));
  if (nbytes > 0) std::memcpy(dest, data, nbytes);  // outside the locks: producers copy in parallel
  commit_item(item);
  return Status::ok();
}

Status Session::flush() {
  std::unique_lock lock(mutex_);
  const uint64_t target = enqueued_;
  if (writer_sleeping_) work_ready_.notify_one();
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
  {
    std::lock_guard turn(reserve_mutex_);
    std::lock_guard lock(mutex_);
    if (closed_) return close_status_;
    closed_ = true;
    if (run_open_ && writer_status_.is_ok()) {
      queue_.push_back(Item{EndRunItem{run_dropped_}, now_unix_ns(), true});
      ++enqueued_;
      run_open_ = false;
    }
    stopping_ = true;
    work_ready_.notify_one();
    space_freed_.notify_all();  // blocked producers see stopping_ and return
  }
  if (thread_.joinable()) thread_.join();
  Status closed = writer_->close();
  std::lock_guard lock(mutex_);
  close_status_ = writer_status_.is_ok() ? closed : writer_status_;
  return close_status_;
}

// ---- writer thread ----

std::vector<Session::Item*> Session::take_batch_locked() {
  std::vector<Item*> batch;
  uint64_t bytes = 0;
  for (Item& item : queue_) {
    if (!item.committed || batch.size() == kMaxBatchItems || bytes >= kMaxBatchBytes) break;
    if (const auto* tensor = std::get_if<TensorItem>(&item.payload)) bytes += tensor->nbytes;
    batch.push_back(&item);
  }
  return batch;
}

void Session::writer_loop() {
  for (;;) {
    std::vector<Item*> batch;
    Status health;
    {
      std::unique_lock lock(mutex_);
      writer_sleeping_ = true;
      work_ready_.wait(lock, [&] {
        return (!queue_.empty() && queue_.front().committed) || (stopping_ && queue_.empty());
      });
      writer_sleeping_ = false;
      if (queue_.empty()) {  // stopping, and everything is written
        writer_done_ = true;
        space_freed_.notify_all();
        return;
      }
      // Element pointers stay valid while producers push_back; only this thread pops.
      batch = take_batch_locked();
      health = writer_status_;
    }
    for (size_t i = 0; i < batch.size() && health.is_ok(); ++i) write_item(*batch[i]);
    finish_batch(batch.size(), health.is_ok() ? writer_->commit() : health);
  }
}

const uint8_t* Session::item_bytes(const TensorItem& tensor) {
  return tensor.oversize ? tensor.oversize.get() : ring_.at(tensor.span.offset);
}

void Session::write_item(Item& item) {
  Status status;
  if (auto* tensor = std::get_if<TensorItem>(&item.payload)) {
    TensorRecord& record = tensor->record;
    const ParsedName parsed = parser_.parse(record.name);
    record.handles = parsed.handles;
    if (record.output_index < 0) record.output_index = parsed.output_index;
    record.role = parsed.role;
    record.name_matched = parsed.matched;
    status = writer_->append_tensor(record, {item_bytes(*tensor), tensor->nbytes}, item.unix_ns);
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
  }
  if (!status.is_ok()) {
    std::lock_guard lock(mutex_);
    if (writer_status_.is_ok()) writer_status_ = status;
  }
}

void Session::finish_batch(size_t count, const Status& committed) {
  std::lock_guard lock(mutex_);
  if (!committed.is_ok() && writer_status_.is_ok()) writer_status_ = committed;
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
    queue_.pop_front();
  }
  completed_ += count;
  space_freed_.notify_all();
}

}  // namespace qd::capture
