#include "import_steps.h"

namespace qd::importers {

Result<EncodingTable> load_encodings_files(const std::vector<std::string>& paths) {
  EncodingTable table;
  for (const std::string& path : paths) {
    QD_ASSIGN_OR_RETURN(EncodingTable more, load_encodings(path));
    QD_RETURN_IF_ERROR(merge_encodings(table, std::move(more)));
  }
  return table;
}

}  // namespace qd::importers
