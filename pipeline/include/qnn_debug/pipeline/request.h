// A diff request built once, from what the user named, for the CLI and the Python package alike:
// the inputs (each side's path, format and options: the format registry's, importers/
// input_format.h) and the diff's own settings, each declared once here. `qnn-debug diff`'s
// options and the keywords of Python's qnn_debug.diff are made from these lists.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "qnn_debug/base/status.h"
#include "qnn_debug/pipeline/diff.h"

namespace qd::pipeline {

// The inputs as the user names them.
struct DiffInputs {
  InputSpec reference;                    // path, format ("" = told by content), options
  InputSpec device;                       // the devices' format and options, one set for all
  std::vector<std::string> device_paths;  // one or more, each read with `device`'s
  InputSpec shared;                       // options for both sides and the third stores
  std::string simulation;                 // --sim ("" = none)
  std::string isolated;                   // --isolated ("" = none)
};

// A setting of the diff itself (not of an input).
struct DiffSetting {
  std::string key;                  // Python's keyword
  std::string flags;                // the CLI's option names, "--jobs,-j"
  std::string help;                 // one line
  std::string default_text;         // the default, as help shows it ("" = unset)
  bool many = false;                // given once per device (--label)
  bool path = false;                // names a file the diff reads
  std::string value_name = "TEXT";  // how help names its value: TEXT, PATH, UINT, FLOAT

  // The long option, as errors name it ("--jobs").
  std::string flag() const { return flags.substr(0, flags.find(',')); }
};
const std::vector<DiffSetting>& diff_settings();

// Each setting's values as text, by key: the CLI's strings, Python's values written out.
using DiffSettingValues = std::map<std::string, std::vector<std::string>, std::less<>>;

// The request: each input with the shared options added (importers::with_shared_options), each
// setting parsed. kInvalidArgument naming the option ("--jobs: must be 0 or more, not -2")
// for a value that does not parse or a key no setting has.
Result<DiffRequest> make_diff_request(const DiffInputs& inputs, const DiffSettingValues& settings,
                                      std::string tool_version);

}  // namespace qd::pipeline
