// python_random.h against CPython 3.11: the expected draws are Python's own
// (random.Random(seed).random() and .choices(range(n), k=...)).
#include "model/eval/python_random.h"

#include <vector>

#include "gtest/gtest.h"

namespace xmod {
namespace {

TEST(PythonRandom, RandomIsCPythonsForTheSameSeed) {
  PythonRandom zero(0);  // seeded with one key word, 0
  EXPECT_EQ(zero.Random(), 0.8444218515250481);
  EXPECT_EQ(zero.Random(), 0.7579544029403025);
  EXPECT_EQ(PythonRandom(99).Random(), 0.40397807494366633);
  EXPECT_EQ(PythonRandom((uint64_t{1} << 40) + 5).Random(), 0.5043802970418443);  // two words
}

TEST(PythonRandom, ChoiceIndicesAreThoseOfChoices) {
  PythonRandom one(1);
  std::vector<size_t> drawn;
  for (int i = 0; i < 10; ++i) drawn.push_back(one.ChoiceIndex(10));
  EXPECT_EQ(drawn, (std::vector<size_t>{1, 8, 7, 2, 4, 4, 6, 7, 0, 0}));
  PythonRandom seven(7);
  drawn.clear();
  for (int i = 0; i < 5; ++i) drawn.push_back(seven.ChoiceIndex(5153));  // LAMBADA's documents
  EXPECT_EQ(drawn, (std::vector<size_t>{1668, 777, 3354, 373, 2761}));
}

}  // namespace
}  // namespace xmod
