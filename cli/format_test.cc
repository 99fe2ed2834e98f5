// Tests of xmodctl's output formatting: table alignment, CSV quoting and the number formats
// (losses, FLOPs, parameter counts).
#include "cli/format.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace xmod::cli {
namespace {

using ::testing::HasSubstr;

Table Sample() {
  Table t;
  t.columns = {"name", "loss", "note"};
  t.AddRow({Cell::Str("dense"), Cell::Shown(FormatLoss(3.14159)), Cell::Str("a,b")});
  t.AddRow({Cell::Str("xmod-K4"), Cell::Shown(FormatLoss(12.5)), Cell::Null()});
  return t;
}

TEST(FormatTest, TextTableAlignsColumnsAndRightAlignsNumbers) {
  EXPECT_EQ(RenderText(Sample()),
            "NAME        LOSS  NOTE\n"
            "dense     3.1416  a,b\n"
            "xmod-K4  12.5000  -\n");
}

TEST(FormatTest, TextTableCountsUtf8CodePointsForWidth) {
  Table t;
  t.columns = {"φ/φ_D", "x"};
  t.AddRow({Cell::Str("ab"), Cell::Str("y")});
  // "φ/φ_D" is 5 columns wide on screen (7 bytes): "ab" is padded to 5, not 7.
  EXPECT_EQ(RenderText(t), "φ/φ_D  X\nab     y\n");
}

TEST(FormatTest, EmptyTableSaysNoRows) {
  Table t;
  t.columns = {"id"};
  EXPECT_EQ(RenderText(t), "ID\n(no rows)\n");
  EXPECT_EQ(RenderCsv(t), "id\n");
}

TEST(FormatTest, CsvQuotesSpecialFieldsAndLeavesMissingEmpty) {
  Table t = Sample();
  t.AddRow({Cell::Str("say \"hi\""), Cell::Shown("1.0000"), Cell::Str("two\nlines")});
  EXPECT_EQ(RenderCsv(t),
            "name,loss,note\n"
            "dense,3.1416,\"a,b\"\n"
            "xmod-K4,12.5000,\n"
            "\"say \"\"hi\"\"\",1.0000,\"two\nlines\"\n");
}

TEST(FormatTest, SectionsInEachFormat) {
  Table a = Sample();
  a.title = "A";
  Table b;
  b.title = "B";
  b.columns = {"k"};
  b.AddRow({Cell::Int(7)});
  std::string text = RenderSections({a, b}, OutputFormat::kTable);
  EXPECT_THAT(text, HasSubstr("A\nNAME"));
  EXPECT_THAT(text, HasSubstr("\n\nB\nK\n7\n"));
  EXPECT_EQ(RenderSections({b}, OutputFormat::kCsv), "k\n7\n");
}

TEST(FormatTest, NumberFormats) {
  EXPECT_EQ(FormatLoss(3.93126), "3.9313");
  EXPECT_EQ(FormatLoss(0), "-");
  EXPECT_EQ(FormatLoss(0, /*zero_is_missing=*/false), "0.0000");
  EXPECT_EQ(FormatFlops(3.934e9), "3.93e9");
  EXPECT_EQ(FormatFlops(1e20), "1.00e20");
  EXPECT_EQ(FormatFlops(2.5e-4), "2.50e-4");
  EXPECT_EQ(FormatFlops(0), "0");
  EXPECT_EQ(FormatParams(2635393024), "2.64B");
  EXPECT_EQ(FormatParams(543e6), "543M");
  EXPECT_EQ(FormatParams(87300), "87.3K");
  EXPECT_EQ(FormatParams(999.96e6), "1.00B");
  EXPECT_EQ(FormatParams(512), "512");
  EXPECT_EQ(FormatRate(12345), "12.3k");
  EXPECT_EQ(FormatRate(411.2577), "411");
  EXPECT_EQ(FormatRate(12.345), "12.3");
  EXPECT_EQ(FormatNumber(4), "4");
  EXPECT_EQ(FormatNumber(0.5), "0.5");
  EXPECT_EQ(FormatNumber(0.123456), "0.1235");
  EXPECT_EQ(FormatDuration(12.34), "12.3s");
  EXPECT_EQ(FormatDuration(303), "5m03s");
  EXPECT_EQ(FormatDuration(3720), "1h02m");
  EXPECT_EQ(FormatPercent(0.456), "46%");
  EXPECT_EQ(FormatPercent(1.7), "100%");
  EXPECT_EQ(FormatUnixMs(0), "-");
}

TEST(FormatTest, ParseOutputFormatAndCounts) {
  EXPECT_EQ(*ParseOutputFormat("JSON"), OutputFormat::kJson);
  EXPECT_EQ(*ParseOutputFormat("csv"), OutputFormat::kCsv);
  EXPECT_THAT(std::string(ParseOutputFormat("xml").status().message()), HasSubstr("--output"));
  EXPECT_DOUBLE_EQ(*ParseCount("2.64B"), 2.64e9);
  EXPECT_DOUBLE_EQ(*ParseCount("556M"), 556e6);
  EXPECT_DOUBLE_EQ(*ParseCount("300k"), 3e5);
  EXPECT_DOUBLE_EQ(*ParseCount("1e9"), 1e9);
  EXPECT_FALSE(ParseCount("lots").ok());
  EXPECT_FALSE(ParseCount("").ok());
}

}  // namespace
}  // namespace xmod::cli
