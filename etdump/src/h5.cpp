#include "h5.h"

#include <algorithm>
#include <cstdlib>

namespace qd::h5 {
namespace {

herr_t keep_innermost(unsigned index, const H5E_error2_t* error, void* out) {
  if (index == 0 && error->desc != nullptr) *static_cast<std::string*>(out) = error->desc;
  return 0;
}

}  // namespace

std::string last_error_detail() {
  std::string detail;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, keep_innermost, &detail);
  return detail;
}

bool write_fixed_string_attribute(hid_t object, const char* name, const std::string& value) {
  Datatype type(H5Tcopy(H5T_C_S1));
  std::string padded = value.empty() ? std::string(1, '\0') : value;  // a size of 0 is invalid
  H5Tset_size(type.get(), padded.size());
  H5Tset_strpad(type.get(), H5T_STR_NULLPAD);
  H5Tset_cset(type.get(), H5T_CSET_UTF8);
  Dataspace scalar(H5Screate(H5S_SCALAR));
  Attribute attribute(H5Acreate2(object, name, type.get(), scalar.get(), H5P_DEFAULT, H5P_DEFAULT));
  return attribute.valid() && H5Awrite(attribute.get(), type.get(), padded.data()) >= 0;
}

bool write_int64_attribute(hid_t object, const char* name, int64_t value) {
  Dataspace scalar(H5Screate(H5S_SCALAR));
  Attribute attribute(
      H5Acreate2(object, name, H5T_STD_I64LE, scalar.get(), H5P_DEFAULT, H5P_DEFAULT));
  return attribute.valid() && H5Awrite(attribute.get(), H5T_NATIVE_INT64, &value) >= 0;
}

bool read_string_attribute(hid_t object, const char* name, std::string* value) {
  if (H5Aexists(object, name) <= 0) return false;
  Attribute attribute(H5Aopen(object, name, H5P_DEFAULT));
  Datatype stored(H5Aget_type(attribute.get()));
  if (!stored.valid() || H5Tget_class(stored.get()) != H5T_STRING) return false;
  if (H5Tis_variable_str(stored.get()) != 0) return false;
  const size_t size = H5Tget_size(stored.get());
  if (size == 0 || size > kMaxFixedString) return false;
  Datatype type(H5Tcopy(stored.get()));
  std::string text(size, '\0');
  if (H5Aread(attribute.get(), type.get(), text.data()) < 0) return false;
  text.erase(std::find(text.begin(), text.end(), '\0'), text.end());
  *value = std::move(text);
  return true;
}

bool read_int64_attribute(hid_t object, const char* name, int64_t* value) {
  if (H5Aexists(object, name) <= 0) return false;
  Attribute attribute(H5Aopen(object, name, H5P_DEFAULT));
  return attribute.valid() && H5Aread(attribute.get(), H5T_NATIVE_INT64, value) >= 0;
}

}  // namespace qd::h5
