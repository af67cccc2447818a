// Small RAII layer over the HDF5 C API (the 1.10 C++ API has no SWMR calls).
#pragma once

#include <hdf5.h>

#include <string>
#include <utility>

namespace qd::h5 {

using Closer = herr_t (*)(hid_t);

// Owns one HDF5 identifier and closes it with the matching H5?close.
template <Closer kClose>
class Handle {
 public:
  Handle() = default;
  explicit Handle(hid_t id) : id_(id) {}
  Handle(Handle&& other) noexcept : id_(std::exchange(other.id_, H5I_INVALID_HID)) {}
  Handle& operator=(Handle&& other) noexcept {
    if (this != &other) {
      reset();
      id_ = std::exchange(other.id_, H5I_INVALID_HID);
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { reset(); }

  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  void reset() {
    if (id_ >= 0) kClose(id_);
    id_ = H5I_INVALID_HID;
  }
  hid_t release() { return std::exchange(id_, H5I_INVALID_HID); }

 private:
  hid_t id_ = H5I_INVALID_HID;
};

using File = Handle<H5Fclose>;
using Dataset = Handle<H5Dclose>;
using Dataspace = Handle<H5Sclose>;
using Datatype = Handle<H5Tclose>;
using PropertyList = Handle<H5Pclose>;
using Attribute = Handle<H5Aclose>;

// Turns off HDF5's printing of error stacks to stderr for this thread while alive: qnn-debug
// reports errors itself, and a capture hook must not spam the host runtime's stderr.
class QuietErrors {
 public:
  QuietErrors() {
    H5Eget_auto2(H5E_DEFAULT, &old_func_, &old_data_);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  ~QuietErrors() { H5Eset_auto2(H5E_DEFAULT, old_func_, old_data_); }
  QuietErrors(const QuietErrors&) = delete;
  QuietErrors& operator=(const QuietErrors&) = delete;

 private:
  H5E_auto2_t old_func_ = nullptr;
  void* old_data_ = nullptr;
};

// The most specific message on this thread's HDF5 error stack, or "" when it is empty.
std::string last_error_detail();

// A fixed-length, NUL-padded UTF-8 string: stored in the object header, under its checksum.
bool write_fixed_string_attribute(hid_t object, const char* name, const std::string& value);
bool write_int64_attribute(hid_t object, const char* name, int64_t value);
// Fixed-length strings only: a variable-length string (format 1) is never read, because its bytes
// live in HDF5's global heap, which carries no checksum and which a damaged length makes libhdf5
// 1.10 read out of bounds (or loop forever). Returns false for one.
inline constexpr size_t kMaxFixedString = size_t{1} << 20;
bool read_string_attribute(hid_t object, const char* name, std::string* value);
bool read_int64_attribute(hid_t object, const char* name, int64_t* value);

}  // namespace qd::h5
