// Writes the soak benchmark's model (harness/bench/soak.sh): a tiny float
// graph, out = relu(in + c) * c, so that a job costs little more than the
// runner's start and a corrupted constant changes the outputs.
// Usage: dfarm_soak_model FILE
#include <cstdio>

#include "tests/model_builder/model_builder.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s FILE\n", argv[0]);
    return 2;
  }
  using T = dfarm::tflite::TensorType;
  using Op = dfarm::tflite::BuiltinOperator;
  dfarm::testing::ModelBuilder b;
  int in = b.AddTensor(T::FLOAT32, {1, 16}, "in");
  int c = b.AddConstFloat32({1, 16}, {0.5f, -1.f, 2.f, 0.25f, -0.5f, 1.f, 3.f, -2.f, 0.125f, 4.f,
                                      -0.25f, 1.5f, -3.f, 0.75f, 2.5f, -1.5f});
  int sum = b.AddTensor(T::FLOAT32, {1, 16}, "sum");
  int act = b.AddTensor(T::FLOAT32, {1, 16}, "act");
  int out = b.AddTensor(T::FLOAT32, {1, 16}, "out");
  b.AddAdd(in, c, sum);
  b.AddUnary(Op::RELU, sum, act);
  b.AddBinary(Op::MUL, act, c, out);
  b.SetInputs({in});
  b.SetOutputs({out});
  if (!b.WriteFile(argv[1])) {
    std::fprintf(stderr, "cannot write %s\n", argv[1]);
    return 1;
  }
  return 0;
}
