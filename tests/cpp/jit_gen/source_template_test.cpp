// fillTemplate (Note [Source templates]): holes filled by name, and an
// emitter's slip (a hole without a value, a value no hole takes, an
// unclosed hole) raised, never emitted.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "jit/gen/source_template.h"

namespace flagos::kernels {
namespace {

TEST(SourceTemplate, FillsEveryHoleByName) {
  EXPECT_EQ(fillTemplate("  ${T} x = (${T})${v};\n", {{"T", "float"}, {"v", "p0[o0]"}}),
            "  float x = (float)p0[o0];\n");
  EXPECT_EQ(fillTemplate("no holes", {}), "no holes");
  EXPECT_EQ(fillTemplate("${a}${b}", {{"b", "2"}, {"a", "1"}}), "12");
  EXPECT_EQ(fillTemplate("[${empty}]", {{"empty", ""}}), "[]");
  // A value is inserted as it is: a "${" inside it is not a hole.
  EXPECT_EQ(fillTemplate("${a}", {{"a", "${b}"}}), "${b}");
}

TEST(SourceTemplate, AMissingValueIsAnError) {
  try {
    fillTemplate("${T} x;", {});
    FAIL() << "no error";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("no value for ${T}"), std::string::npos) << e.what();
  }
}

TEST(SourceTemplate, AnUnusedValueIsAnError) {
  try {
    fillTemplate("${T} x;", {{"T", "float"}, {"U", "int"}});
    FAIL() << "no error";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("no hole takes the value U"), std::string::npos)
        << e.what();
  }
}

TEST(SourceTemplate, AnUnclosedHoleIsAnError) {
  EXPECT_THROW(fillTemplate("x = ${T;", {{"T", "float"}}), std::logic_error);
}

}  // namespace
}  // namespace flagos::kernels
