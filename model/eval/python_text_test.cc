// The Python string operations of python_text.h against what CPython 3.11 returns for the
// same strings (the expected values are Python's).
#include "model/eval/python_text.h"

#include "gtest/gtest.h"

namespace xmod {
namespace {

TEST(PythonText, CodePointsCountCharactersNotBytes) {
  EXPECT_EQ(CodePoints(""), 0);
  EXPECT_EQ(CodePoints("abc"), 3);
  EXPECT_EQ(CodePoints("ångström"), 8);  // 10 bytes
  EXPECT_EQ(CodePoints("日本"), 2);      // 6 bytes
}

TEST(PythonText, StripRemovesUnicodeWhiteSpace) {
  EXPECT_EQ(PythonStrip("  a b \t\n"), "a b");
  EXPECT_EQ(PythonStrip("\u00a0\u3000x\u2028"), "x");  // no-break, ideographic, line sep.
  EXPECT_EQ(PythonStrip("\x1fx\x1c"), "x");            // str.isspace() holds for these
  EXPECT_EQ(PythonStrip("\u200bx"), "\u200bx");        // zero-width space: not white space
  EXPECT_EQ(PythonStrip(" \n "), "");
}

TEST(PythonText, CapitalizeTitlesTheFirstAndLowersTheRest) {
  EXPECT_EQ(PythonCapitalize("he then"), "He then");
  EXPECT_EQ(PythonCapitalize("The MAN"), "The man");
  EXPECT_EQ(PythonCapitalize("ÉTIENNE"), "Étienne");
  EXPECT_EQ(PythonCapitalize("ßa"), "Ssa");                     // full title-case mapping
  EXPECT_EQ(PythonCapitalize("ǆemal"), "ǅemal");                // title case, not upper case
  EXPECT_EQ(PythonCapitalize("'hello WORLD"), "'hello world");  // no skipping to a letter
  EXPECT_EQ(PythonCapitalize(""), "");
}

TEST(PythonText, HellaSwagPreprocessIsTheHarnessOne) {
  // Stripped first, so the space "[header]" leaves stays.
  EXPECT_EQ(HellaSwagPreprocess(" [header] How to x [title] Do y. "), " How to x. Do y.");
  EXPECT_EQ(HellaSwagPreprocess("a [step] b"), "a b");
  EXPECT_EQ(HellaSwagPreprocess("a [x] [y] b"), "a  b");                   // "a   b" halved once
  EXPECT_EQ(HellaSwagPreprocess("a    b"), "a  b");                        // one left-to-right pass
  EXPECT_EQ(HellaSwagPreprocess("a [open\nline] b"), "a [open\nline] b");  // "." stops at \n
  EXPECT_EQ(HellaSwagPreprocess("a [[x]] b"), "a ] b");  // shortest match from each "["
  EXPECT_EQ(HellaSwagPreprocess("[title]x"), "x");       // " [title]" needs its space
}

}  // namespace
}  // namespace xmod
