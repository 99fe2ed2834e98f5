// Tests of the backbone presets (paper Table 4) and their resolution from a BackboneSpec.
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/accounting/accounting.h"

namespace xmod {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<Backbone> Resolve(const std::string& name) {
  xmod::v1::BackboneSpec spec;
  spec.set_name(name);
  return ResolveBackbone(spec);
}

// B.1: the Table 4 backbones follow Qwen3 (rope_theta 1e6, QK-Norm); the CPU presets keep
// RoPE's 1e4 and no QK-Norm.
TEST(BackbonesTest, RopeThetaAndQkNormFollowQwen3ForThePaperBackbones) {
  for (const char* name : {"165M", "298M", "556M", "936M", "1.65B"}) {
    EXPECT_EQ(Resolve(name)->rope_theta, 1e6) << name;
    EXPECT_TRUE(Resolve(name)->qk_norm) << name;
  }
  for (const char* name :
       {"cpu-d64", "cpu-d96", "cpu-d96-t4", "cpu-d128", "cpu-d192", "cpu-d256", "tiny-test"}) {
    EXPECT_EQ(Resolve(name)->rope_theta, 1e4) << name;
    EXPECT_FALSE(Resolve(name)->qk_norm) << name;
  }
  xmod::v1::BackboneSpec spec;
  spec.set_name("cpu-d96");
  spec.set_rope_theta(5e5);
  EXPECT_EQ(ResolveBackbone(spec)->rope_theta, 5e5);
  spec.set_rope_theta(-1);
  EXPECT_THAT(ResolveBackbone(spec).status().message(), HasSubstr("backbone.rope_theta"));
}

TEST(BackbonesTest, PaperTable4) {
  struct Row {
    const char* name;
    int d, head_dim, layers, heads, kv, ffn;
  };
  for (const Row& r :
       {Row{"165M", 512, 64, 28, 16, 8, 1536}, Row{"298M", 768, 64, 28, 16, 8, 2304},
        Row{"556M", 1024, 128, 28, 16, 8, 3072}, Row{"936M", 1536, 128, 28, 16, 8, 3840},
        Row{"1.65B", 2048, 128, 28, 16, 8, 6144}}) {
    absl::StatusOr<Backbone> b = Resolve(r.name);
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(b->name, r.name);
    EXPECT_EQ(b->d_model, r.d);
    EXPECT_EQ(b->head_dim, r.head_dim);
    EXPECT_EQ(b->n_layers, r.layers);
    EXPECT_EQ(b->n_heads, r.heads);
    EXPECT_EQ(b->n_kv_heads, r.kv);
    EXPECT_EQ(b->ffn_dim, r.ffn);
    EXPECT_EQ(b->vocab_size, 50257);
  }
}

TEST(BackbonesTest, CpuPresets) {
  absl::StatusOr<Backbone> b = Resolve("cpu-d256");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->d_model, 256);
  EXPECT_EQ(b->head_dim, 32);
  EXPECT_EQ(b->n_layers, 8);
  EXPECT_EQ(b->n_heads, 8);
  EXPECT_EQ(b->n_kv_heads, 4);
  EXPECT_EQ(b->ffn_dim, 768);
  EXPECT_EQ(b->vocab_size, 2048);
  b = Resolve("tiny-test");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->vocab_size, 256);
  EXPECT_EQ(b->n_layers, 6);
  // cpu-d96 with 165M's attention proportions: query width 2d, key/value width d.
  b = Resolve("cpu-d96-t4");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->n_heads * b->head_dim, 2 * b->d_model);
  EXPECT_EQ(b->n_kv_heads * b->head_dim, b->d_model);
  EXPECT_EQ(b->ffn_dim, Resolve("cpu-d96")->ffn_dim);
  // Every listed preset resolves.
  const std::vector<std::string> names = BackbonePresetNames();
  EXPECT_EQ(names.size(), 12u);
  for (const std::string& name : names) EXPECT_TRUE(Resolve(name).ok()) << name;
}

TEST(BackbonesTest, NonZeroFieldsOverrideThePreset) {
  xmod::v1::BackboneSpec spec;
  spec.set_name("165M");
  spec.set_n_layers(52);  // paper Table 9 deep models
  spec.set_vocab_size(2048);
  absl::StatusOr<Backbone> b = ResolveBackbone(spec);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->n_layers, 52);
  EXPECT_EQ(b->vocab_size, 2048);
  EXPECT_EQ(b->d_model, 512);
}

TEST(BackbonesTest, CustomBackboneNeedsEveryField) {
  xmod::v1::BackboneSpec spec;
  spec.set_d_model(64);
  spec.set_head_dim(16);
  spec.set_n_layers(4);
  spec.set_n_heads(4);
  spec.set_n_kv_heads(1);
  spec.set_ffn_dim(128);
  absl::StatusOr<Backbone> b = ResolveBackbone(spec);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(b.status().message(), HasSubstr("backbone.vocab_size: "));
  spec.set_vocab_size(300);
  b = ResolveBackbone(spec);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->name, "custom");
}

TEST(BackbonesTest, QueryWidthMayDifferFromModelWidth) {
  // Qwen3-0.6B: 16 heads x 128 = 2048 query width on d = 1024.
  absl::StatusOr<Backbone> b = Resolve("556M");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->n_heads * b->head_dim, 2 * b->d_model);
}

TEST(BackbonesTest, RejectsBadInput) {
  absl::StatusOr<Backbone> b = Resolve("7B");
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(b.status().message(), HasSubstr("backbone.name: "));
  EXPECT_THAT(b.status().message(), HasSubstr("556M"));  // lists the presets

  xmod::v1::BackboneSpec spec;
  spec.set_name("556M");
  spec.set_n_kv_heads(3);  // 16 % 3 != 0
  EXPECT_THAT(ResolveBackbone(spec).status().message(), HasSubstr("backbone.n_kv_heads: "));
  spec.set_n_kv_heads(0);
  spec.set_n_heads(12);  // 1024 % 12 != 0
  EXPECT_THAT(ResolveBackbone(spec).status().message(), HasSubstr("backbone.n_heads: "));
  spec.set_n_heads(0);
  spec.set_ffn_dim(-5);
  EXPECT_THAT(ResolveBackbone(spec).status().message(), HasSubstr("backbone.ffn_dim: "));
  spec.set_ffn_dim(0);
  spec.set_head_dim(7);
  EXPECT_THAT(ResolveBackbone(spec).status().message(), HasSubstr("backbone.head_dim: "));
}

}  // namespace
}  // namespace xmod
