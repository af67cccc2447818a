// A closed vocabulary declared once: each enumerator's name (in reports, on the command line and
// in Python) and what it means, in the enum's declaration order. The table is the list, the
// names both ways and the documentation line; a static_assert beside each table holds it to its
// enum, and a test holds docs/report-schema.json's enum to the names.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

namespace qd {

template <typename Enum>
struct Term {
  Enum value;
  std::string_view name;     // in reports, the CLI and Python
  std::string_view meaning;  // one line, for docs, help and the page's legends
};

// Every enumerator once, at its own position (enumerators 0..N-1).
template <typename Enum, size_t N>
constexpr bool in_declaration_order(const std::array<Term<Enum>, N>& terms) {
  for (size_t i = 0; i < N; ++i) {
    if (static_cast<size_t>(terms[i].value) != i) return false;
  }
  return true;
}

template <typename Enum, size_t N>
constexpr std::string_view term_name(const std::array<Term<Enum>, N>& terms, Enum value) {
  const auto i = static_cast<size_t>(value);
  return i < N ? terms[i].name : std::string_view("unknown");
}

template <typename Enum, size_t N>
constexpr std::optional<Enum> parse_term(const std::array<Term<Enum>, N>& terms,
                                         std::string_view name) {
  for (const Term<Enum>& term : terms) {
    if (term.name == name) return term.value;
  }
  return std::nullopt;
}

// The names in order: what the schema's enum lists.
template <typename Enum, size_t N>
std::vector<std::string_view> term_names(const std::array<Term<Enum>, N>& terms) {
  std::vector<std::string_view> names;
  for (const Term<Enum>& term : terms) names.push_back(term.name);
  return names;
}

}  // namespace qd
