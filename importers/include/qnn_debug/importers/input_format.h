// The input formats qnn-debug reads (docs/formats.md): a store, or a dump another tool wrote.
// Each format is one unit (its importer's .cpp) that says how it is told by content, which
// options it takes and how it converts into a store; all of them are listed in one place,
// importers/src/input_formats.cpp. `qnn-debug capture <format>`, `diff`'s --ref-*/--dev-*
// options and format detection, and the Python package's side options are all made from that
// list (docs/architecture.md, "A new input format").
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "qnn_debug/base/status.h"

namespace qd::importers {

// One input as the user gave it: a path and its options by key (InputOption::key), each a list
// of values (one value for an option that takes one).
struct InputSpec {
  std::string path;
  std::vector<std::string> more_paths;  // further inputs of one conversion (capture npz a b c)
  std::string format;                   // a format's name; "" = told by content
  std::map<std::string, std::vector<std::string>, std::less<>> options;

  // The values given for `key` (none: empty).
  const std::vector<std::string>& values(std::string_view key) const;
  // The value given for `key`, the last one if several ("" when none).
  std::string value(std::string_view key) const;
};

// `side` with the options given for both sides of a diff added: a list option's values after
// the side's own, a single value where the side gave none.
InputSpec with_shared_options(InputSpec side, const InputSpec& shared);

// An option of a format. The command line spells it --FLAG for `capture <format>`, and
// --ref-FLAG / --dev-FLAG (and --FLAG for both sides, when `both_help` is set) for `diff`; the
// Python package's keyword is the key, with ref_ / dev_ for one side.
struct InputOption {
  std::string key;            // "debug_buffer"
  std::string flag;           // "debug-buffer"
  std::string help;           // capture <format> --FLAG (each format words its own)
  std::string side_help;      // diff --ref-FLAG / --dev-FLAG
  std::string both_help;      // diff --FLAG for both sides; "" = none
  bool many = false;          // repeatable: a list of values
  bool path = true;           // a file or folder (not a name such as a preset)
  std::string default_value;  // shown by capture's help; "" = none
};

// The options converting formats share, written once. Encodings files: each format words their
// capture help. The naming preset (`default_naming` is the format's), its handle map and an HTP
// heap profile, which every converting format takes, follow a format's own options.
InputOption encodings_option(std::string capture_help);
std::vector<InputOption> with_naming_options(std::vector<InputOption> own,
                                             std::string default_naming);

// What a conversion did: the lines `capture` prints ("wrote out.h5: 3 runs, ..."), the
// importer's warnings (capture prints them, diff puts them in its report) and the bytes of
// tensor data written (capture --stats).
struct ImportOutcome {
  std::string said;
  std::vector<std::string> warnings;
  uint64_t tensor_bytes = 0;
};

// The first bytes of an input, or that it is a folder: what detection looks at.
struct InputHead {
  bool folder = false;
  std::string bytes;  // the first 16 bytes of a file (fewer if it is shorter)
  bool starts_with(std::string_view prefix) const { return bytes.starts_with(prefix); }
};

struct InputFormat {
  std::string name;         // "npz": capture's subcommand, --ref-format's value
  std::string noun;         // "an npz or npy file": in lists of what diff reads
  std::string detected_as;  // "an npz/npy file": what `inspect` calls such an input
  std::function<bool(const InputHead&)> detect;  // recognizes the format by content
  // `capture <name>`, unless `import` is empty (a store needs no conversion).
  std::string capture_help;
  std::string input_name, input_help;  // capture's positional argument
  std::string more_inputs_help;        // "" = one input per conversion
  std::string capture_example;         // options a typical capture needs: " --net-json x.json"
  std::vector<InputOption> options;    // in capture's order, naming_options last
  // Converts `spec` into the store `output`, replacing it; no store is left on failure.
  std::function<Result<ImportOutcome>(const InputSpec& spec, const std::string& output)> import;
};

// Every format, each once: the store first, then the conversions in `capture`'s order.
std::span<const InputFormat* const> input_formats();

// "store, qnn-net-run, npz or etdump".
std::string format_names();
// "a qnn-debug store, a qnn-net-run output folder, an npz or npy file or an ETDump".
std::string format_nouns();
// kInvalidArgument listing the names for anything else.
Result<const InputFormat*> parse_format(std::string_view name);

// A folder or a file's first bytes, asked of each format in turn. kNotFound for a missing path,
// kCorrupt for anything no format recognizes, naming the path and what it looks like
// (OtherContent).
Result<const InputFormat*> detect_format(const std::string& path);

// Files no command reads as tensors but whose first bytes say what they are, so a refusal can
// name them: a JSON document (encodings, a net JSON, a report), an ExecuTorch program (.pte:
// flatbuffer identifier "ET" and two digits at byte 4, "ET12" today) or bundled program ("BP"
// and two digits, "BP08" today). detect_format's error for such a file says which it is.
enum class OtherContent { kUnknown, kJson, kExecutorchProgram, kBundledProgram };
OtherContent other_content(const std::string& path);

// "qnn-debug capture etdump PATH --debug-buffer debug_output.bin -o store.h5".
std::string capture_command(const InputFormat& format, const std::string& path);

// Before converting `path` as `wanted`: kInvalidArgument saying what it is and which command
// reads it when detection finds another format or a program, ok when it finds `wanted` or
// nothing (the importer then says what is wrong).
Status refuse_other_format(const InputFormat& wanted, const std::string& path);

// The options of every format, each key once (in input_formats() order), with no default
// (a default is a format's): diff's per-side options and the Python package's.
std::vector<InputOption> side_options();

}  // namespace qd::importers
